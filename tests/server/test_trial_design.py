"""Each trial stores its design once (from the timeline, never from the browser); migration 0002
backfills it; the API answers JSON under /api/v1 and at /healthz."""

from __future__ import annotations

import json

import pandas as pd
import sqlalchemy as sa
from flask_migrate import upgrade
from sqlalchemy.dialects import postgresql

from humanlike.server import create_app, database
from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.tables.core import Participant, Trial
from tests.server.conftest import auth, enter
from tests.server.test_export import run_participant


def _rating(index: int, **response) -> dict:
    ratings = {str(d): 0.0 for d in range(10)}
    return {"trial_index": index, "trial_type": "rating",
            "response": {"ratings": ratings, **response}}


def test_a_trial_stores_its_timeline_entry_as_design_whatever_the_browser_sends(app, client):
    pid, token = enter(client)
    client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    practice = tl["trials"][0]
    assert practice["practice"] and practice["block"] == "ratings"  # no "-practice" suffix
    resp = client.post(f"/api/v1/participants/{pid}/trials", headers=auth(token),
                       json=_rating(0, swapped=True, block="forged"))
    assert resp.status_code == 201
    with app.app_context():
        row = db.session.execute(sa.select(Trial)).scalar_one()
        entry = db.session.execute(sa.select(Participant.timeline)).scalar_one()["trials"][0]
    assert row.design == {k: v for k, v in entry.items() if k != "stimulus_id"}
    assert "stimulus_id" in entry and "swapped" not in row.design
    assert (row.block, row.is_repeat, row.repeat_of) == ("ratings", False, None)
    assert row.design["practice"] is True and row.design["index"] == 0


def test_the_export_reads_the_design_from_the_trial_not_the_timeline(app, tmp_path):
    import numpy as np

    c = app.test_client()
    pid, token = enter(c, "PROLIFIC_PID=D1")
    run_participant(c, pid, token, np.random.default_rng(1))
    with app.app_context():
        p = db.session.execute(sa.select(Participant)).scalar_one()
        p.timeline = {**p.timeline, "trials": [dict(t, practice=False, block="changed")
                                                for t in p.timeline["trials"]]}
        db.session.commit()
        write_export("small", tmp_path)
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert trials["practice"].sum() == 1 and trials.loc[trials["trial_index"] == 0, "practice"].item()
    assert set(trials["block"]) == {"ratings"}


JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
EXPERIMENT = sa.table("experiment", *(sa.column(c) for c in (
    "id", "slug", "title", "spec_hash", "root", "status", "platform", "created_at")),
    sa.column("spec", JSON))
PARTICIPANT = sa.table("participant", *(sa.column(c) for c in (
    "id", "public_id", "experiment_id", "platform", "platform_id", "condition", "token_hash",
    "seed", "n_trials", "status", "created_at")), sa.column("timeline", JSON))
TRIAL = sa.table("trial", *(sa.column(c) for c in (
    "id", "participant_id", "trial_index", "trial_type", "block", "is_repeat", "repeat_of",
    "server_time")), sa.column("response", JSON), sa.column("stimuli", JSON))
OLD_TIMELINE = {"version": 1, "seed": 3, "condition": "A", "categories": [], "trials": [
    {"type": "rating", "block": "ratings-practice", "stimulus": "a.png", "kind": "catch",
     "practice": True, "is_repeat": False, "repeat_of": None, "index": 0, "stimulus_id": 7},
    {"type": "triad", "block": "mlds", "kind": "mlds", "sequence": "s0", "s1": 1, "s2": 3, "s3": 4,
     "stimuli": ["x1.png", "x3.png", "x4.png"], "swapped": True, "practice": False,
     "is_repeat": False, "repeat_of": None, "index": 1, "stimulus_id": 8},
    {"type": "triad", "block": "mlds", "kind": "mlds", "sequence": "s0", "s1": 1, "s2": 3, "s3": 4,
     "stimuli": ["x1.png", "x3.png", "x4.png"], "swapped": True, "practice": False,
     "is_repeat": True, "repeat_of": 1, "index": 2, "stimulus_id": 8},
]}


def test_migration_0002_backfills_each_design_from_the_stored_timeline(database_url, tmp_path):
    application = create_app({"TESTING": True, "SECRET_KEY": "t",
                              "SQLALCHEMY_DATABASE_URI": database_url, "EXPERIMENT_PATHS": []})
    try:
        with application.app_context():
            upgrade(revision="0001")
            now = pd.Timestamp.now(tz="UTC").to_pydatetime()
            with db.engine.begin() as conn:
                conn.execute(sa.insert(EXPERIMENT).values(
                    id=1, slug="old", title="Old", spec={}, spec_hash="h", root="/", status="live",
                    platform="local", created_at=now))
                conn.execute(sa.insert(PARTICIPANT).values(
                    id=1, public_id="p1", experiment_id=1, platform="local", platform_id="local-p1",
                    condition="A", token_hash="t", seed=3, n_trials=3, status="started",
                    created_at=now, timeline=OLD_TIMELINE))
                for i, entry in enumerate(OLD_TIMELINE["trials"][:2]):  # trial 2 not answered yet
                    conn.execute(sa.insert(TRIAL).values(
                        participant_id=1, trial_index=i, trial_type=entry["type"],
                        block=entry["block"], is_repeat=False, repeat_of=None, server_time=now,
                        response={"choice": "left"}, stimuli=entry.get("stimuli")))
            upgrade()
            rows = db.session.execute(
                sa.select(Trial.trial_index, Trial.design, Trial.block).order_by(Trial.trial_index)
            ).all()
            timeline = db.session.execute(sa.select(Participant.timeline)).scalar_one()
            nullable = {c["name"]: c["nullable"] for c in sa.inspect(db.engine).get_columns("trial")}
    finally:
        database.dispose(application)
    practice, triad = OLD_TIMELINE["trials"][0], OLD_TIMELINE["trials"][1]
    assert [r.trial_index for r in rows] == [0, 1]
    assert rows[0].design == {k: v for k, v in practice.items() if k != "stimulus_id"} | {
        "block": "ratings"}
    assert rows[0].block == "ratings"
    assert rows[1].design == {k: v for k, v in triad.items() if k != "stimulus_id"}
    assert rows[1].block == "mlds"
    assert [t["block"] for t in timeline["trials"]] == ["ratings", "mlds", "mlds"]
    assert timeline["trials"][0]["stimulus_id"] == 7  # the stored timeline keeps its internal ids
    assert nullable["design"] is False


def test_api_errors_are_json_under_the_prefix_and_pages_elsewhere(client):
    unknown = client.get("/api/v1/nothing/here")
    assert unknown.status_code == 404 and unknown.get_json()["error"] == "not_found"
    wrong_method = client.get("/api/v1/participants/abc/trials")
    assert wrong_method.status_code == 405
    assert wrong_method.get_json()["error"] == "method_not_allowed"
    assert "POST" in wrong_method.headers["Allow"]
    page = client.get("/nothing/here")
    assert page.status_code == 404 and page.mimetype == "text/html"
    health = client.get("/healthz")
    assert health.status_code == 200 and json.loads(health.data) == {"status": "ok", "db": "ok"}
