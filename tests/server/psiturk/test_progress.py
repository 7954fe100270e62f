"""psiTurk participants' progress from their stored records: the dashboard's participant list and
page show records stored and the psiTurk mode, the participants table gets them
(``psiturk_columns``), and the live panel of a psiTurk study shows its own numbers per mode."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.core import Experiment, PanelResult, Participant
from tests.server.psiturk.test_protocol import blob, start

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def admin(app):
    from tests.server.admin.dashboard_helpers import login

    client = app.test_client()
    login(app, client)
    return client


def psiturk_experiment() -> Experiment:
    return db.session.execute(sa.select(Experiment).where(
        Experiment.slug == "psiturk-psiturk-example")).scalar_one()


@SQLITE
def test_records_mode_and_panel_of_psiturk_participants(psiturk_app, database_url):
    from humanlike.server.export.writer import participant_table
    from humanlike.server.live import panel
    from humanlike.server.psiturk.progress import psiturk_columns

    done, busy, debug = (psiturk_app.test_client() for _ in range(3))
    uid = start(done, "hitId=H1&assignmentId=A1&workerId=W1", mode="sandbox")
    done.put(f"/sync/{uid}", json=blob(uid, 12))
    assert done.get(f"/complete?uniqueId={uid}&mode=sandbox").status_code == 200
    uid2 = start(busy, "hitId=H1&assignmentId=A2&workerId=W2", mode="sandbox")
    busy.post("/inexp", data={"uniqueId": uid2})
    busy.put(f"/sync/{uid2}", json=blob(uid2, 5))
    start(debug, "hitId=debugH&assignmentId=debugA&workerId=debugW", mode="debug")

    with psiturk_app.app_context():
        exp = psiturk_experiment()
        table = psiturk_columns(exp, participant_table(exp)).set_index("platform_id")
        assert table.loc["W1", "n_trials"] == 12 and table.loc["W2", "n_trials"] == 5
        assert table.loc["debugW", "n_trials"] == 0
        assert table["psiturk_mode"].to_dict() == {"W1": "sandbox", "W2": "sandbox",
                                                   "debugW": "debug"}
        w1 = db.session.execute(sa.select(Participant.public_id).where(
            Participant.platform_id == "W1")).scalar_one()
        assert panel.refresh_all()["psiturk-psiturk-example"] is True
        result = db.session.get(PanelResult, exp.id).result
    assert result["kind"] == "psiturk" and not result["errors"]
    assert result["n_participants"] == 3 and result["n_completed"] == 1
    modes = {m["mode"]: m for m in result["modes"]}
    assert modes["sandbox"]["n"] == 2 and modes["sandbox"]["completed"] == 1
    assert modes["sandbox"]["in_progress"] == 1 and modes["sandbox"]["records_median"] == 8.5
    assert (modes["sandbox"]["records_min"], modes["sandbox"]["records_max"]) == (5, 12)
    assert 0 <= modes["sandbox"]["minutes_median"] < 5
    assert modes["debug"] == {**modes["debug"], "n": 1, "completed": 0, "records_median": 0.0,
                              "minutes_median": None}

    client = admin(psiturk_app)
    page = client.get(f"/admin/participants/{w1}").get_data(as_text=True)
    assert 'data-psiturk-records="12"' in page and 'data-psiturk-mode="sandbox"' in page
    assert "/0 trials" not in page
    listing = client.get("/admin/experiments/psiturk-psiturk-example").get_data(as_text=True)
    assert sorted(re.findall(r'data-stored="(\d+)"', listing)) == ["0", "12", "5"]
    fragment = client.get("/admin/experiments/psiturk-psiturk-example/panel").get_data(
        as_text=True)
    assert 'data-section="psiturk"' in fragment and 'data-mode="sandbox"' in fragment
    assert 'data-completed="1"' in fragment


@SQLITE
def test_participants_csv_has_the_records_and_the_mode_of_psiturk_participants(
        psiturk_app, tmp_path):
    import json

    import pandas as pd

    from humanlike.server.export.writer import write_export

    client = psiturk_app.test_client()
    uid = start(client, "hitId=H1&assignmentId=A1&workerId=W1", mode="sandbox")
    client.put(f"/sync/{uid}", json=blob(uid, 7))
    with psiturk_app.app_context():
        write_export("psiturk-psiturk-example", tmp_path)
    people = pd.read_csv(tmp_path / "participants.csv")
    assert people["n_trials"].tolist() == [7] and people["psiturk_mode"].tolist() == ["sandbox"]
    book = json.loads((tmp_path / "codebook.json").read_text())
    assert set(people.columns) <= set(book["participants"])
