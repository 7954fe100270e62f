"""psiTurk's status routes and GET /sync act only on psiTurk participants, and only for the browser
that proves to be the participant (the write cookie /exp sets) wherever psiTurk's page flow carries
it: a native participant is never moved by them, a stranger who knows a uniqueId (workerId and
assignmentId, which are not secret) completes, quits, starts or reads nobody. /worker_submitted,
called by the ad page inside MTurk's frame where no cookie of ours travels, only moves a completed
participant on to submitted (docs/psiturk.md)."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from humanlike.server import database
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.tables.core import Participant
from humanlike.server.tables.psiturk import PsiturkAssignment
from tests.server.conftest import enter
from tests.server.psiturk.conftest import make_app
from tests.server.psiturk.test_protocol import blob, start, stored

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def status(app, **where) -> tuple[str, int | None]:
    """(participant status, psiTurk status) of the one participant matching ``where``."""
    with app.app_context():
        part = db.session.execute(sa.select(Participant).filter_by(**where)).scalar_one()
        code = db.session.execute(sa.select(PsiturkAssignment.status).where(
            PsiturkAssignment.participant_id == part.id)).scalar_one_or_none()
        return part.status, code


@pytest.fixture
def both_app(database_url, stroop_project, small_experiment):
    """One server with a native study (``small``) and psiTurk's example project."""
    app = make_app(database_url, stroop_project, EXPERIMENT_PATHS=[str(small_experiment)])
    experiments.sync_all(app)
    yield app
    database.dispose(app)


def test_status_routes_never_move_a_native_participant(both_app):
    native = both_app.test_client()
    pid, _ = enter(native, "PROLIFIC_PID=native1&STUDY_ID=s1&SESSION_ID=x1")
    before = status(both_app, public_id=pid)
    psi = both_app.test_client()
    start(psi)  # the psiTurk project's experiment row and a participant of its own
    for uid in (pid, "native1", "native1:x1", "native1:s1"):
        for client in (native, psi):
            answers = [client.get(f"/worker_complete?uniqueId={uid}"),
                       client.get(f"/worker_submitted?uniqueId={uid}"),
                       client.post("/quitter", data={"uniqueId": uid}),
                       client.post("/inexp", data={"uniqueId": uid})]
            for answer in answers:
                assert answer.status_code != 200 or answer.json["status"] in (
                    "database error", "error, uniqueId not found"), answer.json
            assert client.get(f"/complete?uniqueId={uid}&mode=live").status_code >= 400
            assert client.get(f"/sync/{uid}").status_code in (403, 404)
    assert status(both_app, public_id=pid) == before and before[1] is None


def test_a_stranger_can_neither_complete_quit_start_nor_read_a_psiturk_participant(
        client, psiturk_app):
    uid = start(client)  # W1:A1, sandbox
    client.put(f"/sync/{uid}", json=blob(uid, 3, {"comments": "my own words"}))
    stranger = psiturk_app.test_client()
    assert stranger.post("/inexp", data={"uniqueId": uid}).status_code == 403
    assert status(psiturk_app, platform_id="W1") == ("allocated", 1)
    assert client.post("/inexp", data={"uniqueId": uid}).json == {"status": "success"}
    for answer in (stranger.get(f"/worker_complete?uniqueId={uid}"),
                   stranger.get(f"/complete?uniqueId={uid}&mode=sandbox"),
                   stranger.post("/quitter", data={"uniqueId": uid}),
                   stranger.get(f"/worker_submitted?uniqueId={uid}")):
        assert answer.status_code == 403, answer.get_data(as_text=True)
        assert "my own words" not in answer.get_data(as_text=True)
    assert status(psiturk_app, platform_id="W1") == ("started", 2)
    # GET /sync: a stranger learns nothing, not even whether the participant exists
    mine = stranger.get(f"/sync/{uid}")
    nobody = stranger.get("/sync/nobody%3Ahere")
    assert mine.status_code == nobody.status_code == 403
    assert mine.get_data() == nobody.get_data() and b"my own words" not in mine.get_data()
    assert b"W1" not in mine.get_data()
    # another psiTurk participant's browser is a stranger too
    other = psiturk_app.test_client()
    start(other, "hitId=H1&assignmentId=A2&workerId=W2")
    assert other.get(f"/sync/{uid}").status_code == 403
    assert other.get(f"/worker_complete?uniqueId={uid}").status_code == 403
    assert status(psiturk_app, platform_id="W1") == ("started", 2)
    # the participant's own browser still does all of it
    assert json.loads(client.get(f"/sync/{uid}").get_data())["questiondata"] == {
        "comments": "my own words"}
    assert client.get(f"/complete?uniqueId={uid}&mode=sandbox").status_code == 200
    assert status(psiturk_app, platform_id="W1") == ("completed", 3)
    # /worker_submitted (no cookie in MTurk's frame): a completed participant moves on to submitted
    assert stranger.get(f"/worker_submitted?uniqueId={uid}").json == {"status": "success"}
    assert status(psiturk_app, platform_id="W1") == ("submitted", 4)
    assert stored(psiturk_app, uid)[0] == [0, 1, 2]


def test_worker_submitted_without_proof_moves_no_unfinished_participant(client, psiturk_app):
    uid = start(client)
    stranger = psiturk_app.test_client()
    assert stranger.get(f"/worker_submitted?uniqueId={uid}").status_code == 403
    client.post("/quitter", data={"uniqueId": uid})
    assert stranger.get(f"/worker_submitted?uniqueId={uid}").status_code == 403
    assert status(psiturk_app, platform_id="W1") == ("quit_early", 6)


def test_the_write_cookie_travels_to_the_status_routes_only_as_a_first_party_cookie(client):
    start(client)
    cookie = next(c for c in client._cookies.values() if c.key.startswith("psiturk_"))
    assert cookie.path == "/" and cookie.http_only and cookie.same_site == "Lax"


@SQLITE
def test_psiturk_format_export_neutralises_formula_cells(client, psiturk_app, database_url,
                                                          tmp_path):
    """``export --format psiturk``: formula-like text in questiondata.csv, eventdata.csv and
    psiturk_trials.csv is prefixed by ``'`` as in the native export; numbers and other text are
    as psiTurk writes them."""
    import csv

    from click.testing import CliRunner

    from humanlike.cli import main

    uid = start(client)
    body = blob(uid, 2, {"comments": '=HYPERLINK("http://evil.example","click")',
                         "age": "-12", "plain": "fine"})
    body["data"][1]["trialdata"] = {"response": "@SUM(A1)", "rt": "+5", "word": "-cmd"}
    body["eventdata"].append({"eventtype": "focus", "value": "=1+2", "timestamp": 2,
                              "interval": 1})
    assert client.put(f"/sync/{uid}", json=body).status_code == 200
    database.dispose(psiturk_app)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["export", "psiturk-psiturk-example", "--format", "psiturk",
                                       "--out", str(out), "--database-url", database_url])
    assert result.exit_code == 0, result.output
    questions = {row[1]: row[2] for row in csv.reader((out / "questiondata.csv").open())}
    assert questions == {"comments": '\'=HYPERLINK("http://evil.example","click")',
                         "age": "-12", "plain": "fine"}
    events = [row[3] for row in csv.reader((out / "eventdata.csv").open())]
    assert events[-1] == "'=1+2"
    import pandas as pd

    tidy = pd.read_csv(out / "psiturk_trials.csv", dtype=str)
    assert tidy["response"].tolist()[1] == "'@SUM(A1)" and tidy["word"].tolist()[1] == "'-cmd"
    assert tidy["rt"].tolist() == ["300", "+5"]  # a number stays a number
    for name in ("questiondata.csv", "eventdata.csv", "psiturk_trials.csv", "trialdata.csv"):
        for row in csv.reader((out / name).open()):
            assert not any(cell[:1] in ("=", "@") for cell in row), (name, row)
