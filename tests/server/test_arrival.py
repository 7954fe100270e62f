"""Arrival defects of issue 45: a sid-less panel arrival taken over, undeclared sources admitted,
completion codes readable before finishing, and a reload during /start turned away."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading

import numpy as np
import pytest
import sqlalchemy as sa

from humanlike.server.export import writer as export
from humanlike.server.extensions import db
from humanlike.server.participants import allocation, resume
from humanlike.server.participants.rehearsal import REHEARSAL_HEADER, rehearsal_key
from humanlike.server.tables.core import Event, Experiment, Participant
from tests.server.admin.dashboard_helpers import login
from tests.server.conftest import auth, enter
from tests.server.sources import answer, app_factory, spec_with
from tests.server.test_export import run_participant

PANEL = """\
[platform]
preset = "panel"
participant_param = "pid"
session_param = "sid"
completion_url = "https://panel.example/done?code={code}"
"""
SONA = '[platform]\npreset = "sona"\ncompletion_url = "https://sona.example/c?sc={participant_id}"\n'
LAB = 'platform = "lab"\n'


@pytest.fixture
def source_app(database_url, tmp_path, monkeypatch):
    """``source_app(spec_path)``: an app serving that spec on the test database."""
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        yield make


def n_participants(app) -> int:
    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar_one()


def token_works(client, pid: str, token: str) -> bool:
    resp = client.post(f"/api/v1/participants/{pid}/events", json={"type": "blur"},
                       headers=auth(token))
    return resp.status_code == 201


def expected_code(secret: str, public_id: str) -> str:
    """The completion code computed independently of the server: HMAC-SHA256, base32, 10 chars."""
    mac = hmac.new(secret.encode(), b"completion:" + public_id.encode(), hashlib.sha256).digest()
    return base64.b32encode(mac).decode()[:10]


# --- 7: an arrival without the session parameter binds nothing a stranger can claim ----------

@pytest.mark.parametrize(("table", "first", "stranger"), [
    (PANEL, "pid=X1", "pid=X1&sid=anything"),
    (None, "PROLIFIC_PID=X1&STUDY_ID=S1", "PROLIFIC_PID=X1&STUDY_ID=S1&SESSION_ID=anything"),
])
def test_an_arrival_without_a_session_id_cannot_be_taken_over_by_a_later_one(
        small_experiment, tmp_path, source_app, table, first, stranger):
    served = source_app(spec_with(small_experiment, tmp_path / "panel", table) if table
                        else small_experiment)
    owner = served.test_client()
    pid, token = enter(owner, first)
    answer(owner, pid, token, upto=2)
    taken = served.test_client().get(f"/start/small?{stranger}")
    assert taken.status_code == 409 and "#token=" not in taken.headers.get("Location", "")
    assert token_works(owner, pid, token)  # the real participant's token was not revoked
    with served.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.session_id, row.status) == (None, "started")
    back = owner.get(f"/start/small?{first}")  # the same browser still gets back in
    assert back.status_code == 302 and back.headers["Location"].endswith(f"/task/{pid}")


def test_a_reset_lock_lets_a_sessionless_participant_resume_with_a_new_session_once(
        small_experiment, tmp_path, source_app):
    served = source_app(spec_with(small_experiment, tmp_path / "panel", PANEL))
    pid, token = enter(served.test_client(), "pid=X2")
    with served.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        resume.reset_lock(row)
        db.session.commit()
    again, token2 = enter(served.test_client(), "pid=X2&sid=S-NEW")
    assert again == pid and token2 != token
    assert served.test_client().get("/start/small?pid=X2&sid=S-OTHER").status_code == 409


# --- 8: a study admits only its declared source (and the researcher's own preview) -----------

MTURK = 'platform = "mturk"\n'
LINKS = {  # a link of each kind a stranger may try: (source, query)
    "plain": ("local", ""),
    "prolific": ("prolific", "PROLIFIC_PID=PX&STUDY_ID=S&SESSION_ID=X"),
    "mturk": ("mturk", "workerId=W1&assignmentId=A1&hitId=H1"),
    "mturk preview": ("mturk", "assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1"),
}


def served_with(small_experiment, tmp_path, source_app, table):
    """An app serving the small experiment (Prolific) or a copy declaring ``table``."""
    if table is None:
        return source_app(small_experiment)
    return source_app(spec_with(small_experiment, tmp_path / "declared", table))


@pytest.mark.parametrize(("table", "own_source", "own", "source_words"), [
    (None, "prolific", "PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1", "only through Prolific"),
    (MTURK, "mturk", "workerId=W9&assignmentId=A9&hitId=H9", "only through the MTurk-format"),
    (SONA, "sona", "survey_code=12345", "SONA"),
    (PANEL, "panel", "pid=P1&sid=S1", "panel"),
    (LAB, "lab", None, "lab"),
])
def test_a_study_refuses_links_of_sources_its_spec_does_not_declare(
        small_experiment, tmp_path, source_app, table, own_source, own, source_words):
    served = served_with(small_experiment, tmp_path, source_app, table)
    foreign = [query for source, query in LINKS.values() if source != own_source]
    assert len(foreign) == (2 if own_source == "mturk" else 3 if own_source == "prolific" else 4)
    for query in foreign:
        resp = served.test_client().get(f"/start/small?{query}")
        text = resp.get_data(as_text=True)
        assert resp.status_code == 403, (query, text)
        assert "not for this study" in text and source_words in text
    assert n_participants(served) == 0
    if own is not None:
        enter(served.test_client(), own)
        assert n_participants(served) == 1


def test_a_study_without_a_platform_takes_plain_prolific_and_mturk_links(
        small_experiment, tmp_path, source_app):
    served = source_app(spec_with(small_experiment, tmp_path / "local", ""))
    for _, query in LINKS.values():
        resp = served.test_client().get(f"/start/small?{query}")
        assert resp.status_code in (200, 302), (query, resp.get_data(as_text=True))
    with served.app_context():
        rows = db.session.execute(sa.select(Participant.platform, Participant.simulated)).all()
    assert sorted(rows) == [("local", False), ("mturk", False), ("prolific", False)]


def _people(app):
    with app.app_context():
        frames = export.export_frames("small")
    return frames["participants"].set_index("platform"), frames["events"]


@pytest.mark.parametrize(("table", "link"), [
    (None, "plain"), (None, "mturk"), (MTURK, "prolific"), (SONA, "plain"), (SONA, "prolific"),
])
def test_the_researchers_preview_gets_in_with_any_link_and_is_not_analysed(
        small_experiment, tmp_path, source_app, table, link):
    served = served_with(small_experiment, tmp_path, source_app, table)
    source, query = LINKS[link]
    assert served.test_client().get(f"/start/small?{query}").status_code == 403  # not logged in
    researcher = served.test_client()
    login(served, researcher)
    pid, token = enter(researcher, query)
    run_participant(researcher, pid, token, np.random.default_rng(0))  # catch trials right
    people, events = _people(served)
    assert people.loc[source, ["status", "simulated", "analysed", "analysed_reason"]].tolist() == [
        "completed", True, False, "simulated"]
    [preview] = events[events["type"] == "preview"].to_dict("records")
    assert preview["participant"] == pid and '"link": "' + source + '"' in str(preview["value"])


def test_a_participant_of_the_declared_source_is_analysed_beside_a_preview(
        small_experiment, tmp_path, source_app):
    served = source_app(small_experiment)
    browser, researcher = served.test_client(), served.test_client()
    login(served, researcher)
    for client, query in ((browser, LINKS["prolific"][1]), (researcher, "")):
        pid, token = enter(client, query)
        run_participant(client, pid, token, np.random.default_rng(0))
    people, events = _people(served)
    assert people["analysed"].to_dict() == {"prolific": True, "local": False}
    assert people["simulated"].to_dict() == {"prolific": False, "local": True}
    assert events["type"].tolist().count("preview") == 1


@pytest.mark.parametrize(("table", "link"), [
    (SONA, "prolific"),  # as humanlike simulate sends
    (None, "plain"), (None, "mturk"), (MTURK, "prolific"),
])
def test_a_rehearsal_with_the_researchers_key_may_arrive_with_any_link(
        small_experiment, tmp_path, source_app, table, link):
    served = served_with(small_experiment, tmp_path, source_app, table)
    source, query = LINKS[link]
    url = f"/start/small?{query}"
    forged = served.test_client().get(url, headers={REHEARSAL_HEADER: "0" * 64})
    assert forged.status_code == 403
    key = rehearsal_key("test-secret", "small")
    rehearsed = served.test_client().get(url, headers={REHEARSAL_HEADER: key})
    assert rehearsed.status_code == 302, rehearsed.get_data(as_text=True)
    with served.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.platform, row.simulated) == (source, True)
        # the platform's own id is kept, as the rehearsal sent it (humanlike simulate's PROLIFIC_PID)
        sent = {"prolific": "PX", "mturk": "W1"}.get(source)
        assert sent is None or row.platform_id == sent
        assert db.session.execute(sa.select(sa.func.count()).select_from(Event)
                                  .where(Event.type == "preview")).scalar_one() == 0


# --- 9: completion codes are unguessable and shown only once every trial is stored ----------

def test_a_local_completion_code_is_an_hmac_shown_only_after_every_trial(
        small_experiment, tmp_path, source_app):
    app = source_app(spec_with(small_experiment, tmp_path / "local", ""))  # plain links: local
    browser = app.test_client()
    pid, token = enter(browser, "")
    code = expected_code("test-secret", pid)
    assert code != pid[:8].upper()
    n = answer(browser, pid, token, upto=3)
    pages = [browser.get(f"/task/{pid}"), browser.get(f"/run/{pid}"), browser.get(f"/done/{pid}"),
             browser.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token))]
    assert pages[2].status_code == 404
    early = browser.post(f"/api/v1/participants/{pid}/complete", headers=auth(token))
    assert early.status_code == 409
    for page in [*pages, early]:
        assert code not in page.get_data(as_text=True)
    assert answer(browser, pid, token) == n
    done = browser.post(f"/api/v1/participants/{pid}/complete", headers=auth(token))
    assert done.status_code == 200
    assert f'id="completion-code">{code}<' in browser.get(f"/done/{pid}").get_data(as_text=True)
    with app.app_context():  # the researcher checks a code against the export
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert export.participant_table(exp)["completion_code"].tolist() == [code]


def test_a_panel_without_a_fixed_code_sends_the_participants_hmac_code(
        small_experiment, tmp_path, source_app):
    served = source_app(spec_with(small_experiment, tmp_path / "panel", PANEL))
    browser = served.test_client()
    pid, token = enter(browser, "pid=C1&sid=S1")
    answer(browser, pid, token)
    done = browser.post(f"/api/v1/participants/{pid}/complete", headers=auth(token))
    assert done.get_json()["next"] == {
        "kind": "redirect",
        "url": f"https://panel.example/done?code={expected_code('test-secret', pid)}"}


# --- 13: a reload while /start is still running resumes the winner's participant ------------

LINK = "PROLIFIC_PID=R1&STUDY_ID=S1&SESSION_ID=X1"


@pytest.mark.parametrize("policy", [None, "refuse"])
def test_the_request_losing_the_insert_race_resumes_the_winners_participant(
        small_experiment, tmp_path, source_app, monkeypatch, policy):
    spec = small_experiment
    if policy is not None:  # a policy for participants who come back: the loser never left
        spec = spec_with(small_experiment, tmp_path / "policy", f'[resume]\npolicy = "{policy}"\n')
        spec.write_text('platform = "prolific"\n' + spec.read_text())
    app = source_app(spec)
    winner, _ = enter(app.test_client(), LINK)
    real = allocation.existing_participant
    calls = []

    def not_yet_committed(exp, entry):  # the loser looked before the winner committed
        calls.append(entry)
        return None if len(calls) == 1 else real(exp, entry)

    monkeypatch.setattr(allocation, "existing_participant", not_yet_committed)
    reloaded = app.test_client()
    pid, token = enter(reloaded, LINK)
    assert pid == winner and token_works(reloaded, pid, token)
    assert n_participants(app) == 1


def test_simultaneous_requests_of_one_link_all_reach_the_same_participant(app):
    links = [f"PROLIFIC_PID=R{i}&STUDY_ID=S1&SESSION_ID=X{i}" for i in range(4)]
    barrier = threading.Barrier(2 * len(links))
    results: dict[tuple[int, int], int] = {}

    def arrive(i: int, j: int) -> None:
        client = app.test_client()
        barrier.wait()
        results[i, j] = client.get(f"/start/small?{links[i]}").status_code

    threads = [threading.Thread(target=arrive, args=(i, j)) for i in range(len(links))
               for j in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [302] * 2 * len(links), results
    assert n_participants(app) == len(links)
