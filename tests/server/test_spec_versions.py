"""Versioned specs: each participant keeps the version it was allocated under; an edited spec is
refused while participants exist (unless allowed); a broken file never takes the server down."""

from __future__ import annotations

import pandas as pd
import pytest
import sqlalchemy as sa
from flask_migrate import upgrade as alembic_upgrade

from humanlike.server import create_app, database
from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.study.spec import SpecError
from humanlike.server.tables.core import AuditEntry, Experiment, JSONType, Participant, SpecVersion
from tests.server.conftest import auth, enter, write_small_experiment


@pytest.fixture
def spec_path(tmp_path):
    """A private copy of the small experiment (these tests edit it)."""
    return write_small_experiment(tmp_path / "exp")


@pytest.fixture
def make(database_url, monkeypatch):
    """Build apps (workers) on one database; disposes them all at the end."""
    monkeypatch.setattr(experiments, "CURRENT_TTL_S", 0.0)
    apps = []

    def build(spec, **config):
        application = create_app({"TESTING": True, "SECRET_KEY": "s",
                                  "SQLALCHEMY_DATABASE_URI": database_url,
                                  "EXPERIMENT_PATHS": [str(spec)], **config})
        apps.append(application)
        return application

    yield build
    for application in apps:
        database.dispose(application)


def edit(spec, consent: str = "# Consent v2\n\nNew text.\n") -> None:
    """Retitle the study, drop condition B and rewrite the consent file."""
    text = spec.read_text().replace('title = "Small rating test"', 'title = "Edited"')
    spec.write_text(text.replace('[[conditions]]\nname = "B"\n', ""))
    (spec.parent / "consent.md").write_text(consent)


def timeline(application, pid, token):
    return application.test_client().get(f"/api/v1/participants/{pid}/timeline",
                                         headers=auth(token))


def rows(application, model):
    with application.app_context():
        return db.session.execute(sa.select(model).order_by(model.id)).scalars().all()


def first_worker_with_a_participant_in_b(make, spec):
    app1 = make(spec)
    database.upgrade(app1)
    assert experiments.sync_all(app1) == []
    client = app1.test_client()
    pid, token = enter(client, "PROLIFIC_PID=old1")
    with app1.app_context():  # as if counterbalancing had put them in B
        db.session.execute(sa.update(Participant).values(condition="B"))
        db.session.commit()
    return app1, client, pid, token


def test_a_participant_records_the_version_it_was_allocated_under(make, spec_path):
    app1, _, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    (version,) = rows(app1, SpecVersion)
    (participant,) = rows(app1, Participant)
    (exp,) = rows(app1, Experiment)
    assert participant.spec_version_id == version.id and version.hash == exp.spec_hash
    assert "Consent" in version.texts["consent"] and "&lt;script&gt;" in version.texts["consent"]
    assert len(version.stimuli) == 20 and version.source == str(spec_path.resolve())
    assert version.spec["title"] == "Small rating test"


def test_a_restart_with_the_same_spec_keeps_one_version(make, spec_path):
    _app1, _, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    app2 = make(spec_path)
    assert experiments.sync_all(app2) == []
    assert len(rows(app2, SpecVersion)) == 1 and rows(app2, AuditEntry) == []


def test_an_edited_spec_is_refused_while_participants_exist(make, spec_path):
    _app1, _, pid, token = first_worker_with_a_participant_in_b(make, spec_path)
    edit(spec_path)
    app2 = make(spec_path)  # a worker booting after the edit
    problems = experiments.sync_all(app2)
    assert len(problems) == 1 and "--allow-spec-change" in problems[0]
    assert str(spec_path.resolve()) in problems[0]
    assert len(rows(app2, SpecVersion)) == 1
    # the new worker keeps serving the stored version, to old and new participants alike
    old = timeline(app2, pid, token)
    assert old.status_code == 200 and old.get_json()["title"] == "Small rating test"
    assert "You agree" in old.get_json()["consent_html"]
    newcomer_pid, newcomer_token = enter(app2.test_client(), "PROLIFIC_PID=new1")
    new = timeline(app2, newcomer_pid, newcomer_token).get_json()
    assert new["title"] == "Small rating test" and "You agree" in new["consent_html"]
    assert len({p.spec_version_id for p in rows(app2, Participant)}) == 1


def test_an_allowed_change_serves_new_participants_the_new_version_and_old_ones_theirs(
        make, spec_path):
    app1, _, pid, token = first_worker_with_a_participant_in_b(make, spec_path)
    edit(spec_path)
    app2 = make(spec_path, ALLOW_SPEC_CHANGE=True)
    assert experiments.sync_all(app2) == []
    versions = rows(app2, SpecVersion)
    assert [v.spec["title"] for v in versions] == ["Small rating test", "Edited"]
    # condition B no longer exists on disk; its participant is still served it, in full
    for worker in (app1, app2):
        old = timeline(worker, pid, token)
        assert old.status_code == 200, old.get_data(as_text=True)
        body = old.get_json()
        assert body["condition"] == "B" and body["title"] == "Small rating test"
        assert "You agree" in body["consent_html"]
    # new participants get the new version from either worker (the DB decides, not the file)
    for worker, platform_id in ((app1, "new1"), (app2, "new2")):
        new_pid, new_token = enter(worker.test_client(), f"PROLIFIC_PID={platform_id}")
        body = timeline(worker, new_pid, new_token).get_json()
        assert body["title"] == "Edited" and "New text" in body["consent_html"]
        assert body["condition"] == "A"
    assert [p.spec_version_id for p in rows(app2, Participant)] == [versions[0].id] + [
        versions[1].id] * 2
    (entry,) = rows(app2, AuditEntry)
    assert entry.action == "spec_change" and entry.detail["to"] == versions[1].hash
    assert entry.detail["participants"] == 1


def test_a_spec_change_without_participants_needs_no_permission(make, spec_path):
    app1 = make(spec_path)
    database.upgrade(app1)
    experiments.sync_all(app1)
    edit(spec_path)
    app2 = make(spec_path)
    assert experiments.sync_all(app2) == []
    assert rows(app2, Experiment)[0].title == "Edited" and len(rows(app2, SpecVersion)) == 2


def test_a_broken_spec_file_does_not_take_the_server_down(make, spec_path):
    _app1, _, pid, token = first_worker_with_a_participant_in_b(make, spec_path)
    spec_path.write_text(spec_path.read_text().replace('title = "Small', 'title = Small'))
    app2 = make(spec_path)  # a worker restarted after the typo: boots, logs, serves
    old = timeline(app2, pid, token)
    assert old.status_code == 200 and old.get_json()["title"] == "Small rating test"
    new_pid, new_token = enter(app2.test_client(), "PROLIFIC_PID=new1")
    assert timeline(app2, new_pid, new_token).get_json()["title"] == "Small rating test"
    stimulus = app2.test_client().get("/stimuli/small/" + rows(app2, SpecVersion)[0].stimuli[0]["key"])
    assert stimulus.status_code == 200
    problems = experiments.sync_all(app2)
    assert len(problems) == 1 and "not valid TOML" in problems[0]
    assert str(spec_path) in problems[0]


def test_a_broken_spec_with_no_stored_version_still_fails_at_start(make, spec_path):
    spec_path.write_text("slug = [\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        make(spec_path)


def test_files_of_an_older_version_are_still_served_to_its_participants(make, spec_path):
    app1, _, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    key = rows(app1, SpecVersion)[0].stimuli[0]["key"]
    manifest = spec_path.parent / "stimuli" / "manifest.csv"
    lines = manifest.read_text().splitlines(keepends=True)
    manifest.write_text("".join(line for line in lines if not line.startswith(key)))
    app2 = make(spec_path, ALLOW_SPEC_CHANGE=True)
    assert experiments.sync_all(app2) == []
    assert key not in {s["key"] for s in rows(app2, SpecVersion)[1].stimuli}
    assert app2.test_client().get(f"/stimuli/small/{key}").status_code == 200
    assert app2.test_client().get("/stimuli/small/nope.png").status_code == 404


def test_the_export_names_each_participants_spec_version(make, spec_path, tmp_path):
    _app1, _, _, _ = first_worker_with_a_participant_in_b(make, spec_path)
    edit(spec_path)
    app2 = make(spec_path, ALLOW_SPEC_CHANGE=True)
    experiments.sync_all(app2)
    enter(app2.test_client(), "PROLIFIC_PID=new1")
    with app2.app_context():
        write_export("small", tmp_path / "out")
    frame = pd.read_csv(tmp_path / "out" / "participants.csv")
    hashes = [v.hash for v in rows(app2, SpecVersion)]
    assert frame.set_index("platform_id")["spec_version"].to_dict() == {
        "old1": hashes[0], "new1": hashes[1]}


def test_migration_0004_gives_existing_participants_their_experiments_version(database_url):
    application = create_app({"TESTING": True, "SECRET_KEY": "t",
                              "SQLALCHEMY_DATABASE_URI": database_url, "EXPERIMENT_PATHS": []})
    experiment = sa.table("experiment", *(sa.column(c) for c in (
        "id", "slug", "title", "spec_hash", "root", "status", "platform", "created_at")),
        sa.column("spec", JSONType))
    participant = sa.table("participant", *(sa.column(c) for c in (
        "id", "public_id", "experiment_id", "platform", "platform_id", "condition", "token_hash",
        "seed", "n_trials", "status", "created_at")), sa.column("timeline", JSONType))
    try:
        with application.app_context():
            alembic_upgrade(revision="0003")
            now = pd.Timestamp.now(tz="UTC").to_pydatetime()
            with db.engine.begin() as conn:
                conn.execute(sa.insert(experiment).values(
                    id=1, slug="old", title="Old", spec={"title": "Old"}, spec_hash="h" * 64,
                    root="/", status="live", platform="local", created_at=now))
                conn.execute(sa.insert(participant).values(
                    id=1, public_id="p1", experiment_id=1, platform="local", platform_id="l-p1",
                    condition="A", token_hash="t", seed=3, n_trials=0, status="started",
                    created_at=now, timeline={"trials": []}))
            alembic_upgrade()
            version = db.session.execute(sa.select(SpecVersion)).scalar_one()
            assert (version.hash, version.spec, version.texts) == ("h" * 64, {"title": "Old"}, None)
            assert db.session.execute(sa.select(Participant.spec_version_id)).scalar_one() == version.id
    finally:
        database.dispose(application)
