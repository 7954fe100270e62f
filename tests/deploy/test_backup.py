"""Backups (docs/deploy.md): deploy/backup.sh dumps a live database with participants and trials,
deploy/restore.sh restores the archive into a new, empty database, and the copy holds the same rows,
migrations and all, and serves the participants where they left off."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database, experiments
from humanlike.server.extensions import db
from tests.conftest import ON_CI, PG_URL
from tests.server.conftest import auth, enter, write_small_experiment

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ADMIN_DSN = PG_URL.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture
def two_databases():
    """Two new, empty PostgreSQL databases (created and dropped here): the live one and the copy."""
    try:
        conn = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if ON_CI:
            pytest.fail(f"CI needs PostgreSQL at {ADMIN_DSN}: {exc}")
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    names = [f"hl_{kind}_{secrets.token_hex(5)}" for kind in ("live", "copy")]
    with conn:
        for name in names:
            conn.execute(f"CREATE DATABASE {name}")
        base = ADMIN_DSN.rsplit("/", 1)[0]
        yield [f"{base}/{name}" for name in names]
        for name in names:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def make_app(url: str, spec: Path):
    app = create_app({"TESTING": True, "SECRET_KEY": "backup-test", "EXPERIMENT_PATHS": [str(spec)],
                      "SQLALCHEMY_DATABASE_URI": url.replace("postgresql://", "postgresql+psycopg://", 1)})
    return app


def snapshot(app) -> dict[str, list[tuple]]:
    """Every table's rows, in primary-key order (the migrations' own table included)."""
    with app.app_context():
        out = {}
        for table in db.metadata.sorted_tables:
            out[table.name] = [tuple(r) for r in db.session.execute(
                sa.select(table).order_by(*table.primary_key.columns)).all()]
        out["alembic_version"] = [tuple(r) for r in db.session.execute(
            sa.text("SELECT version_num FROM alembic_version")).all()]
        return out


@pytest.mark.slow
def test_backup_then_restore_into_a_new_database_round_trips_every_row(two_databases, tmp_path):
    live_url, copy_url = two_databases
    spec = write_small_experiment(tmp_path / "study")
    live = make_app(live_url, spec)
    database.upgrade(live)
    experiments.sync_all(live)
    people = []
    for i in range(3):  # participants in three states: started with trials, consented, arrived
        client = live.test_client()
        pid, token = enter(client, f"PROLIFIC_PID=BK{i}&STUDY_ID=s&SESSION_ID=x")
        if i < 2:
            assert client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                               headers=auth(token)).status_code == 200
        if i == 0:
            trials = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
            for trial in trials["trials"][:3]:
                body = {"trial_index": trial["index"], "trial_type": trial["type"], "rt_ms": 640.5,
                        "response": {"ratings": {str(d): (d % 5) / 4 for d in range(10)}}}
                assert client.post(f"/api/v1/participants/{pid}/trials", json=body,
                                   headers=auth(token)).status_code == 201
        people.append((pid, token))
    before = snapshot(live)
    assert len(before["participant"]) == 3 and len(before["trial"]) == 3
    database.dispose(live)

    env = dict(os.environ, DATABASE_URL=live_url, BACKUP_DIR=str(tmp_path / "backups"),
               BACKUP_KEEP_DAYS="30")
    done = subprocess.run([str(DEPLOY / "backup.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    archive = Path(done.stdout.strip().splitlines()[-1])
    assert archive.is_file() and archive.parent == tmp_path / "backups"
    assert archive.name.startswith("humanlike-") and archive.suffix == ".dump"
    assert not list(archive.parent.glob(".*partial"))

    usage = subprocess.run([str(DEPLOY / "restore.sh"), str(archive)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr
    restored = subprocess.run([str(DEPLOY / "restore.sh"), str(archive), copy_url],
                              capture_output=True, text=True)
    assert restored.returncode == 0, restored.stderr

    copy = make_app(copy_url, spec)
    assert snapshot(copy) == before
    # the restored server takes the participant on where they left off, with the same token
    pid, token = people[0]
    timeline = copy.test_client().get(f"/api/v1/participants/{pid}/timeline", headers=auth(token))
    assert timeline.status_code == 200 and timeline.get_json()["acknowledged"] == [0, 1, 2]
    database.dispose(copy)

    # restoring into a database that is not empty fails as a whole and changes nothing
    again = subprocess.run([str(DEPLOY / "restore.sh"), str(archive), copy_url],
                           capture_output=True, text=True)
    assert again.returncode != 0
    assert snapshot(make_app(copy_url, spec)) == before
