"""Retention with a moved clock: ``humanlike retention --now`` past ``[privacy] retention_days``
replaces every platform id (PROLIFIC_PID, SESSION_ID, STUDY_ID on the participant's row) by its
keyed hash everywhere: no id (nor psiTurk's stored IP address) is left in any column of any table
of the database (read back column by column; a payment's reply, psiTurk's assignment and records
and an audit entry hold them before), nor in any export file; analyses give the same numbers; audited; a
participant still active inside the period keeps their ids; a second run changes nothing."""

from __future__ import annotations

import datetime as dt
import json
import re

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.analysis.ratings.ceilings import upper_bound_closed_form
from humanlike.analysis.ratings.data import (
    clean_ratings,
    load_participants,
    load_ratings,
    participant_qc,
    rating_array,
)
from humanlike.cli import main
from humanlike.server import audit, create_app, database
from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.rights.pseudonyms import key_from_secret, pseudonym
from humanlike.server.study import experiments
from humanlike.server.tables.core import AuditEntry, Participant, Payment
from humanlike.server.tables.platform_events import PlatformEvent
from humanlike.server.tables.psiturk import PsiturkAssignment, PsiturkTrial
from humanlike.server.tables.sona import SonaGrant
from tests.server.conftest import auth, enter, write_small_experiment
from tests.server.fake_sona import RunningSona
from tests.server.sources import answer, app_factory, spec_with
from tests.server.test_export import run_participant
from tests.server.test_sona import sona_table

SECRET = "test-secret"
DONE = [(f"RETAINPID{i:04d}", f"RETAINSESSION{i:04d}") for i in range(4)]
RECENT = ("RECENTPID9999", "RECENTSESSION9999")
STUDY = "RETAINSTUDY77"
IP = "203.0.113.77"


@pytest.fixture
def spec(tmp_path):
    path = write_small_experiment(tmp_path / "exp")
    path.write_text(path.read_text() + "\n[privacy]\nretention_days = 30\n")
    return path


@pytest.fixture
def other_spec(tmp_path):
    """A second study that excludes the first one's participants."""
    path = write_small_experiment(tmp_path / "other")
    text = path.read_text().replace('slug = "small"', 'slug = "other"')
    path.write_text(text.replace('title = "Small rating test"',
                                 'title = "Other"\nexclude_participants_from = ["small"]'))
    return path


@pytest.fixture
def rapp(database_url, spec, other_spec, monkeypatch, tmp_path):
    monkeypatch.setenv("SECRET_KEY", SECRET)
    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    application = create_app({"TESTING": True, "SECRET_KEY": SECRET,
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(spec), str(other_spec)]})
    database.upgrade(application)
    experiments.sync_all(application)
    yield application
    database.dispose(application)


def cli(database_url, spec, *args):
    served = ["--experiment", str(spec)] if args[0] == "retention" else []
    return CliRunner().invoke(main, [*args, *served, "--database-url", database_url])


def every_text(app) -> str:
    """Every value of every column of every table, as text (the database read back, not the models)."""
    with app.app_context():
        inspector = sa.inspect(db.engine)
        parts = []
        for table in inspector.get_table_names():
            rows = db.session.execute(sa.text(f'SELECT * FROM "{table}"')).all()
            parts.extend(json.dumps([str(v) for v in row]) for row in rows)
    return "\n".join(parts)


def holds(text: str, value: str) -> bool:
    """True when ``value`` occurs in ``text`` as a whole token (not inside a longer number or word,
    so a 5-digit SONA code is not found inside a timestamp's microseconds)."""
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(value)}(?![0-9A-Za-z])", text) is not None


def webhook_event(app, resource_id: str, event_id: str, outcome: str = "applied") -> None:
    """A Prolific webhook event about this submission, as ``/hooks/prolific`` keeps it."""
    with app.app_context():
        db.session.add(PlatformEvent(
            platform="prolific", event_id=event_id, event_type="submission.status.change",
            resource_id=resource_id, status="AWAITING REVIEW", outcome=outcome,
            received_at=dt.datetime.now(dt.UTC), detail={"resource_id": resource_id}))
        db.session.commit()


def export_files(app, folder) -> str:
    with app.app_context():
        write_export("small", folder)
    texts = [p.read_text(errors="replace") for p in sorted(folder.glob("*.csv"))]
    texts += [pd.read_parquet(p).astype(str).to_csv() for p in sorted(folder.glob("*.parquet"))]
    return "\n".join([*texts, (folder / "codebook.json").read_text()])


def numbers(folder) -> tuple:
    """An analysis of the export: per-participant QC and the noise ceiling of the rating matrix."""
    frame = clean_ratings(load_ratings(folder))
    qc = participant_qc(frame, load_participants(folder)).sort_values("participant")
    ceiling = upper_bound_closed_form(rating_array(frame))
    numeric = qc.select_dtypes("number").to_numpy()
    return qc["participant"].tolist(), numeric, ceiling.value, ceiling.per_participant


def test_retention_replaces_every_platform_id_and_leaves_the_analyses_unchanged(
        rapp, spec, database_url, tmp_path):
    for i, (pid, session) in enumerate(DONE):
        client = rapp.test_client()
        public, token = enter(client, f"PROLIFIC_PID={pid}&STUDY_ID={STUDY}&SESSION_ID={session}")
        run_participant(client, public, token, np.random.default_rng(i))
    with rapp.app_context():  # a lock reset's audit entry and a platform reply naming the ids
        audit.record("cli:someone", "reset_lock", experiment="small", target=DONE[0][0], detail={
            "reason": "crash", "cleared": {"session_id": DONE[0][1], "assignment_id": None}})
        first = db.session.execute(sa.select(Participant).where(
            Participant.platform_id == DONE[1][0])).scalar_one()
        db.session.add(Payment(participant_id=first.id, reason="bonus", amount=1, status="paid",
                               idempotency_key="k1", actor="t", reply={"participant_id": DONE[1][0]}))
        # psiTurk's assignment and a record of its data blob, as its compatibility layer keeps them
        uniqueid = f"{DONE[1][0]}:{DONE[1][1]}"
        assignment = PsiturkAssignment(
            participant_id=first.id, experiment_id=first.experiment_id, uniqueid=uniqueid,
            assignmentid=DONE[1][1], workerid=DONE[1][0], hitid=STUDY, ipaddress=IP,
            meta={"uniqueid": uniqueid, "useragent": "x"})
        db.session.add(assignment)
        db.session.flush()
        db.session.add(PsiturkTrial(assignment_id=assignment.id, position=0,
                                    record=json.dumps({"uniqueid": uniqueid, "trialdata": {}})))
        db.session.commit()
    webhook_event(rapp, DONE[2][1], "evt-retain-1")  # the webhook table keeps submission ids
    before = tmp_path / "before"
    with rapp.app_context():
        write_export("small", tmp_path / "pseudo_before", pseudonym_key=key_from_secret(SECRET))
    assert DONE[0][0] in export_files(rapp, before) and DONE[0][1] in every_text(rapp)
    ids = [v for pair in DONE for v in pair]
    held = every_text(rapp)
    assert all(v in held for v in [*ids, IP])  # the check below can fail

    # inside the period nothing changes
    soon = cli(database_url, spec, "retention", "small", "--now",
               (dt.datetime.now(dt.UTC) + dt.timedelta(days=29)).strftime("%Y-%m-%dT%H:%M:%S"))
    assert soon.exit_code == 0 and "0 participants" in soon.output
    # a participant arriving now is active inside the period when the clock moves 31 days on
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(days=31)).strftime("%Y-%m-%dT%H:%M:%S")
    client = rapp.test_client()
    recent, _ = enter(client, f"PROLIFIC_PID={RECENT[0]}&STUDY_ID={STUDY}&SESSION_ID={RECENT[1]}")
    with rapp.app_context():
        row = db.session.execute(sa.select(Participant).where(Participant.public_id == recent)).scalar_one()
        row.created_at = dt.datetime.now(dt.UTC) + dt.timedelta(days=20)
        db.session.commit()

    result = cli(database_url, spec, "retention", "--now", later)
    assert result.exit_code == 0, result.output
    assert "small: 4 participants' platform ids replaced" in result.output
    held = every_text(rapp)
    assert [v for v in [*ids, IP] if v in held] == []
    assert RECENT[0] in held  # still inside its period
    exported = export_files(rapp, tmp_path / "after")
    book = json.loads((tmp_path / "after" / "codebook.json").read_text())
    assert book["stored"]["platform_ids"].startswith("kept in clear for 30 days")
    assert book["stored"]["ip_address"] == "never stored"
    assert book["stored"]["user_agent"].startswith("not stored")
    agents = pd.read_csv(tmp_path / "after" / "participants.csv")["user_agent"]
    assert agents.isna().all()  # the test client sends a User-Agent; none is stored
    assert [v for v in ids if v in exported] == []
    key = key_from_secret(SECRET)
    with rapp.app_context():
        stored = set(db.session.execute(sa.select(Participant.platform_id)).scalars())
        entries = db.session.execute(sa.select(AuditEntry).order_by(AuditEntry.id)).scalars().all()
        reply = db.session.execute(sa.select(Payment.reply)).scalar_one()
    assert {pseudonym(key, "small", pid) for pid, _ in DONE} <= stored
    assert reply == {"participant_id": pseudonym(key, "small", DONE[1][0])}
    assert entries[-1].action == "retention" and entries[-1].detail["n_participants"] == 4
    assert entries[-1].actor.startswith("cli:")

    with rapp.app_context():  # a pseudonymised export names everyone as it did before
        write_export("small", tmp_path / "pseudo_after", pseudonym_key=key_from_secret(SECRET))
    pseudo = [pd.read_csv(tmp_path / f"pseudo_{when}" / "participants.csv")[
        ["participant", "platform_id", "session_id", "study_id"]].sort_values("participant")
        for when in ("before", "after")]
    pseudo[1] = pseudo[1][pseudo[1]["participant"].isin(pseudo[0]["participant"])]  # not the recent one
    pd.testing.assert_frame_equal(pseudo[0].reset_index(drop=True), pseudo[1].reset_index(drop=True))
    b, a = numbers(before), numbers(tmp_path / "after")
    assert b[0] == a[0] and len(b[0]) == 4
    np.testing.assert_array_equal(b[1], a[1])
    assert b[2] == a[2]
    np.testing.assert_array_equal(b[3], a[3])

    again = cli(database_url, spec, "retention", "small", "--now", later)
    assert again.exit_code == 0 and "0 participants" in again.output
    # the same person cannot take part again once their id is a hash
    back = rapp.test_client().get(f"/start/small?PROLIFIC_PID={DONE[2][0]}&STUDY_ID={STUDY}"
                                  f"&SESSION_ID=NEWSESSION")
    assert back.status_code == 409
    # ... nor one that excludes this study's participants
    other = rapp.test_client().get(f"/start/other?PROLIFIC_PID={DONE[2][0]}&STUDY_ID=S2"
                                   f"&SESSION_ID=NEWSESSION2")
    assert other.status_code == 403 and "closely related study" in other.get_data(as_text=True)
    fresh = rapp.test_client().get("/start/other?PROLIFIC_PID=NEVERSEEN01&STUDY_ID=S2&SESSION_ID=N1")
    assert fresh.status_code == 302


def test_retention_names_an_experiment_it_does_not_serve(rapp, spec, database_url):
    result = cli(database_url, spec, "retention", "nope")
    assert result.exit_code != 0 and "not served here" in result.output


def test_the_user_agent_is_stored_only_when_the_spec_asks(database_url, tmp_path):
    agents = []
    for store in (False, True):
        path = write_small_experiment(tmp_path / f"ua{store}")
        path.write_text(path.read_text() + f"\n[privacy]\nstore_user_agent = {str(store).lower()}\n")
        application = create_app({"TESTING": True, "SECRET_KEY": SECRET,
                                  "SQLALCHEMY_DATABASE_URI": database_url,
                                  "EXPERIMENT_PATHS": [str(path)]})
        database.upgrade(application)
        experiments.sync_all(application)
        client = application.test_client()
        client.environ_base["HTTP_USER_AGENT"] = "Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0"
        public, _ = enter(client, f"PROLIFIC_PID=UA{int(store)}&STUDY_ID=s&SESSION_ID=u")
        with application.app_context():
            agents.append(db.session.execute(sa.select(Participant.user_agent).where(
                Participant.public_id == public)).scalar_one())
            db.session.execute(sa.delete(Participant).where(Participant.public_id == public))
            db.session.commit()
        database.dispose(application)
    assert not agents[0] and agents[1] == "Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0"


def test_retention_refuses_to_run_without_the_servers_secret_key(
        rapp, spec, database_url, tmp_path, monkeypatch):
    client = rapp.test_client()
    public, token = enter(client, f"PROLIFIC_PID={DONE[0][0]}&STUDY_ID={STUDY}"
                                  f"&SESSION_ID={DONE[0][1]}")
    run_participant(client, public, token, np.random.default_rng(0))
    monkeypatch.delenv("SECRET_KEY")  # cron without the server's environment
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(days=31)).strftime("%Y-%m-%dT%H:%M:%S")
    result = cli(database_url, spec, "retention", "small", "--now", later)
    assert result.exit_code == 1, result.output
    assert "SECRET_KEY is not set" in result.output and "nothing was changed" in result.output
    held = every_text(rapp)
    assert DONE[0][0] in held and DONE[0][1] in held  # still in clear: nothing hashed
    assert not (tmp_path / "instance" / "secret_key").exists()  # no new development key made
    # the same person is still refused on the study link (their id was not hashed under a new key)
    back = rapp.test_client().get(f"/start/small?PROLIFIC_PID={DONE[0][0]}&STUDY_ID={STUDY}"
                                  f"&SESSION_ID=NEWSESSION")
    assert back.status_code == 409


def test_retention_replaces_a_five_digit_sona_code_in_the_grant_url_and_reply(
        database_url, small_experiment, tmp_path, monkeypatch):
    sona = RunningSona()
    try:
        path = spec_with(small_experiment, tmp_path / "sona", sona_table(sona))
        path.write_text(path.read_text() + "\n[privacy]\nretention_days = 30\n")
        monkeypatch.setenv("SECRET_KEY", SECRET)
        with app_factory(database_url, tmp_path, monkeypatch) as make:
            app = make(path)
            code = sona.fake.sign_up()
            assert len(code) == 5
            client = app.test_client()
            pid, token = enter(client, f"survey_code={code}")
            answer(client, pid, token)
            assert client.post(f"/api/v1/participants/{pid}/complete",
                               headers=auth(token)).status_code == 200
            with app.app_context():
                grant = db.session.execute(sa.select(SonaGrant)).scalar_one()
                assert grant.state == "granted" and f"survey_code={code}" in grant.url
                assert f">{code}<" in grant.reply  # SONA's reply names the code
            assert holds(every_text(app), code)  # the check below can fail
            later = (dt.datetime.now(dt.UTC) + dt.timedelta(days=31)).strftime("%Y-%m-%dT%H:%M:%S")
            result = cli(database_url, path, "retention", "small", "--now", later)
            assert result.exit_code == 0, result.output
            assert "1 participants' platform ids replaced" in result.output
            assert not holds(every_text(app), code)
            hashed = pseudonym(key_from_secret(SECRET), "small", code)
            with app.app_context():
                grant = db.session.execute(sa.select(SonaGrant)).scalar_one()
                assert f"survey_code={hashed}" in grant.url and f">{hashed}<" in grant.reply
                assert grant.state == "granted"
    finally:
        sona.stop()
