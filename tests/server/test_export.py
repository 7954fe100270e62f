"""The export reproduces the database: one row per trial, ratings long form, QC and codebook."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.tables.core import Trial
from tests.server.conftest import auth, enter


def run_participant(client, pid, token, rng):
    """Answer every trial through the API: the true class at 100% on catch trials, random elsewhere."""
    client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    given = {}
    for t in tl["trials"]:
        if t["type"] == "rating":
            levels = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=10)
            ratings = {str(d): float(v) for d, v in enumerate(levels)}
            if t["kind"] == "catch":
                true = t["stimulus"].split("digit")[1][0]
                ratings = {str(d): 0.0 for d in range(10)} | {true: 1.0}
            body = {"trial_index": t["index"], "trial_type": "rating",
                    "response": {"ratings": ratings}, "rt_ms": float(rng.uniform(300, 3000)),
                    "first_rt_ms": 200.0, "presented_ms": 1000.0, "frames": 60}
            given[t["index"]] = ratings
        else:
            body = {"trial_index": t["index"], "trial_type": "debrief",
                    "response": {"answers": {"strategy": "ok, \"quoted\", commas"}}}
        assert client.post(f"/api/v1/participants/{pid}/trials", json=body,
                           headers=auth(token)).status_code == 201
    assert client.post(f"/api/v1/participants/{pid}/complete", headers=auth(token)).status_code == 200
    return tl, given


def test_exported_trials_reproduce_the_database(app, tmp_path):
    rng = np.random.default_rng(0)
    runs = {}
    for i in range(3):
        c = app.test_client()
        pid, token = enter(c, f"PROLIFIC_PID=E{i}")
        runs[pid] = run_participant(c, pid, token, rng)
    with app.app_context():
        counts = write_export("small", tmp_path)
        n_db = db.session.execute(sa.select(sa.func.count()).select_from(Trial)).scalar_one()
    n_timeline = sum(len(tl["trials"]) for tl, _ in runs.values())
    assert n_db == n_timeline
    trials = pd.read_csv(tmp_path / "trials.csv")
    assert len(trials) == n_db - 3  # the debrief answers go to debrief.csv
    assert not trials.duplicated(["participant", "trial_index"]).any()
    ratings = pd.read_parquet(tmp_path / "ratings.parquet")
    assert len(ratings) == 10 * (n_db - 3) == counts["ratings"]
    for pid, (_, given) in runs.items():
        mine = ratings[ratings["participant"] == pid]
        for index, values in given.items():
            row = mine[mine["trial_index"] == index].set_index("category")["rating"]
            assert {str(k): v for k, v in row.items()} == values
    participants = pd.read_csv(tmp_path / "participants.csv")
    assert list(participants["status"]) == ["completed"] * 3
    assert (participants["catch_accuracy"] == 1.0).all() and not participants["excluded"].any()
    assert set(pd.read_csv(tmp_path / "debrief.csv")["answer"]) == {'ok, "quoted", commas'}
    book = json.loads((tmp_path / "codebook.json").read_text())
    for name in ("trials", "ratings", "participants", "stimuli", "events"):
        frame = pd.read_csv(tmp_path / f"{name}.csv")
        assert set(frame.columns) <= set(book[name]) | {"dataset_index"}, name


def test_failing_catch_trials_excludes_with_the_reason(app, tmp_path):
    c = app.test_client()
    pid, token = enter(c, "PROLIFIC_PID=BAD")
    c.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    tl = c.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    for t in tl["trials"]:
        resp = ({"ratings": {str(d): 0.0 for d in range(10)}} if t["type"] == "rating"
                else {"answers": {}})
        c.post(f"/api/v1/participants/{pid}/trials", headers=auth(token),
               json={"trial_index": t["index"], "trial_type": t["type"], "response": resp, "rt_ms": 500.0})
    with app.app_context():
        write_export("small", tmp_path)
    row = pd.read_csv(tmp_path / "participants.csv").iloc[0]
    assert row["excluded"] and row["catch_accuracy"] == 0.0
    assert "catch_accuracy 0 < 0.5" in row["exclusion_reasons"]


def test_export_cli_names_an_unknown_experiment(app, database_url, tmp_path, monkeypatch):
    from humanlike.cli import main

    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path))
    result = CliRunner().invoke(main, ["export", "nope", "--out", str(tmp_path / "o"),
                                       "--database-url", database_url])
    assert result.exit_code != 0 and "no experiment 'nope'" in result.output
