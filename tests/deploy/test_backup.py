"""Backups (docs/deploy.md): deploy/backup.sh dumps a live database with participants and trials,
deploy/restore.sh restores the archive into a new, empty database, and the copy holds the same rows,
migrations and all, and serves the participants where they left off. A withdrawal made after the
backup is re-applied by the restore (the withdrawal ledger outside the database): the participant's
rows and ids stay gone and their platform id is still refused; on SQLite (a file copy) the same
through ``humanlike withdrawals reapply``."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database
from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.live import breaker
from humanlike.server.study import experiments
from tests.conftest import ON_CI, PG_URL
from tests.server.conftest import auth, enter, write_small_experiment
from tests.server.test_retention import every_text, holds

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


SECRET = "backup-test"


def make_app(url: str, spec: Path):
    app = create_app({"TESTING": True, "SECRET_KEY": SECRET, "EXPERIMENT_PATHS": [str(spec)],
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
    with live.app_context():  # the breaker's tally writes its counts every few seconds: now
        breaker.TALLY.flush()
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
    server_env = dict(os.environ, SECRET_KEY=SECRET, HUMANLIKE_INSTANCE=str(tmp_path / "instance"),
                      HUMANLIKE_WITHDRAWALS=str(tmp_path / "withdrawals.jsonl"))  # none made
    restored = subprocess.run([str(DEPLOY / "restore.sh"), str(archive), copy_url],
                              capture_output=True, text=True, env=server_env)
    assert restored.returncode == 0, restored.stderr
    assert "no withdrawal journal at" in restored.stdout

    copy = make_app(copy_url, spec)
    assert snapshot(copy) == before
    # the restored server takes the participant on where they left off, with the same token
    pid, token = people[0]
    timeline = copy.test_client().get(f"/api/v1/participants/{pid}/timeline", headers=auth(token))
    assert timeline.status_code == 200 and timeline.get_json()["acknowledged"] == [0, 1, 2]
    with copy.app_context():  # that answer is counted by the breaker's tally (written now)
        breaker.TALLY.flush()
    served = snapshot(copy)
    database.dispose(copy)

    # restoring into a database that is not empty fails as a whole and changes nothing
    again = subprocess.run([str(DEPLOY / "restore.sh"), str(archive), copy_url],
                           capture_output=True, text=True, env=server_env)
    assert again.returncode != 0
    assert snapshot(make_app(copy_url, spec)) == served


def take_part(app, platform_id: str) -> tuple[str, str, object]:
    """A consented participant with three stored trials; (pid, token, client)."""
    client = app.test_client()
    pid, token = enter(client, f"PROLIFIC_PID={platform_id}&STUDY_ID=s&SESSION_ID=S-{platform_id}")
    assert client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                       headers=auth(token)).status_code == 200
    trials = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    for trial in trials["trials"][:3]:
        body = {"trial_index": trial["index"], "trial_type": trial["type"], "rt_ms": 640.5,
                "response": {"ratings": {str(d): (d % 5) / 4 for d in range(10)}}}
        assert client.post(f"/api/v1/participants/{pid}/trials", json=body,
                           headers=auth(token)).status_code == 201
    return pid, token, client


def withdraw(client, pid: str, token: str) -> None:
    """The participant's own withdrawal through its pages."""
    page = client.get(f"/withdraw/{pid}").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    done = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf, "token": token,
                                                  "confirm": "yes"})
    assert done.status_code == 200 and "Your data have been deleted" in done.get_data(as_text=True)


def participant_rows(app) -> list[str]:
    with app.app_context():
        return sorted(db.session.execute(sa.text("SELECT platform_id FROM participant")).scalars())


def withdrawn_is_gone(app, tmp_path: Path, platform_id: str, kept: str) -> None:
    """No row and no id of the withdrawn participant, anywhere, nor in the export; refused again."""
    assert participant_rows(app) == [kept]
    held = every_text(app)
    assert not holds(held, platform_id) and not holds(held, f"S-{platform_id}")
    with app.app_context():
        assert db.session.execute(sa.text("SELECT count(*) FROM trial")).scalar_one() == 3
        write_export("small", tmp_path)
    exported = "\n".join(p.read_text() for p in tmp_path.glob("*.csv"))
    assert platform_id not in exported and kept in exported
    back = app.test_client().get(f"/start/small?PROLIFIC_PID={platform_id}&STUDY_ID=s&SESSION_ID=n")
    assert back.status_code == 409 and "You withdrew from this study" in back.get_data(as_text=True)


@pytest.mark.slow
def test_a_restore_reapplies_the_withdrawals_made_after_the_backup(two_databases, tmp_path,
                                                                     monkeypatch):
    live_url, copy_url = two_databases
    ledger = tmp_path / "state" / "withdrawals.jsonl"
    monkeypatch.setenv("HUMANLIKE_WITHDRAWALS", str(ledger))
    spec = write_small_experiment(tmp_path / "study")
    live = make_app(live_url, spec)
    database.upgrade(live)
    experiments.sync_all(live)
    gone, token, client = take_part(live, "WDRAWN0001")
    take_part(live, "STAYS00002")
    env = dict(os.environ, DATABASE_URL=live_url, BACKUP_DIR=str(tmp_path / "backups"))
    done = subprocess.run([str(DEPLOY / "backup.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    archive = done.stdout.strip().splitlines()[-1]
    withdraw(client, gone, token)  # after the backup
    assert participant_rows(live) == ["STAYS00002"] and ledger.is_file()
    database.dispose(live)

    env = dict(os.environ, SECRET_KEY=SECRET, HUMANLIKE_WITHDRAWALS=str(ledger),
               HUMANLIKE_BIN=str(Path(sys.executable).parent / "humanlike"),
               HUMANLIKE_INSTANCE=str(tmp_path / "instance"))
    unkeyed = {k: v for k, v in env.items() if k != "SECRET_KEY"}
    refused = subprocess.run([str(DEPLOY / "restore.sh"), archive, copy_url],
                             env={**unkeyed, "HUMANLIKE_ENV_FILE": str(tmp_path / "none.env")},
                             capture_output=True, text=True)
    assert refused.returncode == 1 and "were NOT re-applied" in refused.stderr
    assert "SECRET_KEY is not set" in refused.stderr
    with psycopg.connect(copy_url, autocommit=True) as conn:  # start again from an empty database
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    restored = subprocess.run([str(DEPLOY / "restore.sh"), archive, copy_url], env=env,
                              capture_output=True, text=True)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "1 withdrawal(s) re-applied: 1 participant(s) deleted again" in restored.stdout
    copy = make_app(copy_url, spec)
    withdrawn_is_gone(copy, tmp_path / "export", "WDRAWN0001", "STAYS00002")
    database.dispose(copy)


def test_reapplying_the_ledger_to_a_restored_sqlite_file_deletes_the_withdrawn_again(
        tmp_path, monkeypatch):
    ledger = tmp_path / "withdrawals.jsonl"
    monkeypatch.setenv("HUMANLIKE_WITHDRAWALS", str(ledger))
    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    spec = write_small_experiment(tmp_path / "study")
    live_file, backup_file = tmp_path / "live.sqlite", tmp_path / "backup.sqlite"
    live = make_app(f"sqlite:///{live_file}", spec)
    database.upgrade(live)
    experiments.sync_all(live)
    gone, token, client = take_part(live, "WDRAWN0001")
    take_part(live, "STAYS00002")
    database.dispose(live)
    shutil.copy(live_file, backup_file)  # the backup
    withdraw(client, gone, token)
    database.dispose(live)
    shutil.copy(backup_file, live_file)  # the restore: the withdrawn participant is back
    restored = make_app(f"sqlite:///{live_file}", spec)
    assert participant_rows(restored) == ["STAYS00002", "WDRAWN0001"]
    database.dispose(restored)

    run = CliRunner().invoke(main, ["withdrawals", "reapply", "--database-url",
                                    f"sqlite:///{live_file}"], env={"SECRET_KEY": SECRET})
    assert run.exit_code == 0, run.output
    assert "1 withdrawal(s) re-applied: 1 participant(s) deleted again" in run.output
    withdrawn_is_gone(restored, tmp_path / "export", "WDRAWN0001", "STAYS00002")
    again = CliRunner().invoke(main, ["withdrawals", "reapply", "--database-url",
                                      f"sqlite:///{live_file}"], env={"SECRET_KEY": SECRET})
    assert again.exit_code == 0 and "0 participant(s) deleted again" in again.output
    unkeyed = CliRunner().invoke(main, ["withdrawals", "reapply", "--database-url",
                                        f"sqlite:///{live_file}"], env={"SECRET_KEY": ""})
    assert unkeyed.exit_code == 1 and "SECRET_KEY is not set" in unkeyed.output
    database.dispose(restored)
