"""A participant withdraws (mid-study and after completion): a confirmation page that writes
nothing, then a POST with the CSRF token and the participant's own token deletes every row about
them in every table (found by reflecting the database, not from the models) and in the export; an
audit entry holds an HMAC of the platform id with the server's secret; a second withdraw is harmless."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from humanlike.server import audit, create_app, database
from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.rights import withdrawal
from humanlike.server.rights.pseudonyms import key_from_secret, keyed_hash
from humanlike.server.study import experiments
from humanlike.server.tables.core import AuditEntry, Experiment, Participant, ParticipantQC, Payment
from humanlike.server.tables.psiturk import PsiturkAssignment, PsiturkTrial
from tests.server.conftest import auth, enter, write_small_experiment
from tests.server.test_api_trials import consent, first_rating_index, rating_body
from tests.server.test_export import run_participant
from tests.server.test_retention import every_text, holds, webhook_event

SECRET = "test-secret"  # the app fixture's SECRET_KEY
PID, OTHER = "WITHDRAWPID0001", "KEEPPID0002"


def link(platform_id: str) -> str:
    return f"PROLIFIC_PID={platform_id}&STUDY_ID=STUDY77&SESSION_ID=SESS-{platform_id}"


def mid_study(app, platform_id: str = PID):
    """A consented participant with one trial, one event, a QC row and a payment; (client, pid, token)."""
    client = app.test_client()
    pid, token = enter(client, link(platform_id))
    consent(client, pid, token)
    index = first_rating_index(client, pid, token)
    assert client.post(f"/api/v1/participants/{pid}/trials", json=rating_body(index),
                       headers=auth(token)).status_code == 201
    assert client.post(f"/api/v1/participants/{pid}/events", json={"type": "blur", "value": 1},
                       headers=auth(token)).status_code == 201
    with app.app_context():
        row = db.session.execute(sa.select(Participant).where(Participant.public_id == pid)).scalar_one()
        db.session.add(ParticipantQC(participant_id=row.id, experiment_id=row.experiment_id,
                                     n_stored=1, qc_failed=False, qc_reasons=""))
        db.session.add(Payment(participant_id=row.id, reason="bonus", amount=0.5,
                               idempotency_key=f"k-{pid}", status="owed", actor="test"))
        # psiTurk's assignment and a record of it: a row referring to a row referring to them
        assignment = PsiturkAssignment(participant_id=row.id, experiment_id=row.experiment_id,
                                       uniqueid=f"{platform_id}:a", assignmentid="a",
                                       workerid=platform_id, hitid="h")
        db.session.add(assignment)
        db.session.flush()
        db.session.add(PsiturkTrial(assignment_id=assignment.id, position=0, record="{}"))
        db.session.commit()
    return client, pid, token


_IDS: dict[str, int] = {}


def rows_about(app, pid: str) -> dict[str, int]:
    """Rows per table that refer to the participant (by its database id, remembered from the first
    call), every foreign key to ``participant`` found by reflecting the database itself; the
    participant's own row under ``participant``."""
    with app.app_context():
        if pid not in _IDS:
            _IDS[pid] = db.session.execute(sa.text(
                "SELECT id FROM participant WHERE public_id = :p"), {"p": pid}).scalar_one()
        ident = _IDS[pid]
        found = {"participant": db.session.execute(sa.text(
            "SELECT count(*) FROM participant WHERE id = :i"), {"i": ident}).scalar_one()}
        inspector = sa.inspect(db.engine)
        for table in inspector.get_table_names():
            for fk in inspector.get_foreign_keys(table):
                if fk["referred_table"] == "participant":
                    column = fk["constrained_columns"][0]
                    found[table] = db.session.execute(sa.text(
                        f'SELECT count(*) FROM "{table}" WHERE "{column}" = :i'), {"i": ident}).scalar_one()
    return found


def psiturk_records(app) -> int:
    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(PsiturkTrial)).scalar_one()


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def export_text(app, folder: Path) -> str:
    with app.app_context():
        write_export("small", folder)
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("*.csv")))


def audits(app) -> list[AuditEntry]:
    with app.app_context():
        return list(db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "withdraw")).scalars())


def test_withdrawing_mid_study_deletes_every_row_and_audits_a_keyed_hash(app, tmp_path):
    client, pid, token = mid_study(app)
    _, kept, _ = mid_study(app, OTHER)
    before = rows_about(app, pid)
    assert before["participant"] == 1 and before["trial"] == 1 and before["event"] >= 1
    assert before["participant_qc"] == 1 and before["payment"] == 1
    assert before["psiturk_assignment"] == 1 and psiturk_records(app) == 2  # theirs and the other's
    assert PID in export_text(app, tmp_path / "before")  # the export check below can fail

    page = client.get(f"/withdraw/{pid}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "everything you have answered in this study is deleted" in text
    assert "return the study on Prolific" in text
    assert rows_about(app, pid) == before  # the confirmation page writes nothing

    done = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(text), "token": token,
                                                  "confirm": "yes"})
    assert done.status_code == 200, done.get_data(as_text=True)
    assert "Your data have been deleted" in done.get_data(as_text=True)
    assert set(rows_about(app, pid).values()) == {0}
    assert rows_about(app, kept)["trial"] == 1 and psiturk_records(app) == 1  # nobody else's
    exported = export_text(app, tmp_path / "after")
    book = json.loads((tmp_path / "after" / "codebook.json").read_text())
    assert book["stored"]["withdrawals"].startswith("1 participant(s) withdrew")
    assert pid not in exported and PID not in exported and kept in exported

    [entry] = audits(app)
    assert (entry.actor, entry.experiment, entry.target) == ("participant", "small", pid)
    assert entry.detail["phase"] == "mid_study" and entry.detail["n_trials"] == 1
    assert entry.detail["platform_id_hmac"] == keyed_hash(key_from_secret(SECRET), "small", PID)
    assert PID not in json.dumps([entry.actor, entry.target, entry.detail])
    with app.app_context():
        assert withdrawal.withdrawn_count("small") == 1

    # the old token no longer writes anything, and a second withdraw is harmless
    late = client.post(f"/api/v1/participants/{pid}/events", json={"type": "blur"}, headers=auth(token))
    assert late.status_code == 403
    again = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(text), "token": token,
                                                   "confirm": "yes"})
    assert again.status_code == 200 and "Nothing is stored" in again.get_data(as_text=True)
    assert len(audits(app)) == 1 and client.get(f"/withdraw/{pid}").status_code == 200
    # the same Prolific id is refused on the study link: they withdrew (matched by the HMAC)
    back = app.test_client().get(f"/start/small?{link(PID)}")
    assert back.status_code == 409 and "You withdrew from this study" in back.get_data(as_text=True)


def test_withdrawing_after_completion_from_the_completion_page(app, tmp_path):
    client = app.test_client()
    pid, token = enter(client, link(PID))
    run_participant(client, pid, token, np.random.default_rng(1))
    done_page = client.get(f"/done/{pid}").get_data(as_text=True)
    assert f'href="/withdraw/{pid}"' in done_page
    assert rows_about(app, pid)["trial"] > 10
    text = client.get(f"/withdraw/{pid}").get_data(as_text=True)
    assert "although you have already finished it" in text
    # this browser's session cookie holds the token: the form needs no token field
    resp = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(text), "confirm": "yes"})
    assert resp.status_code == 200 and set(rows_about(app, pid).values()) == {0}
    [entry] = audits(app)
    assert entry.detail["phase"] == "after_completion" and entry.detail["status"] == "completed"
    assert pid not in export_text(app, tmp_path / "after")
    assert client.get(f"/done/{pid}").status_code == 404


def test_withdraw_needs_the_csrf_token_the_participants_token_and_a_post(app):
    client, pid, token = mid_study(app)
    before = rows_about(app, pid)
    text = client.get(f"/withdraw/{pid}").get_data(as_text=True)
    no_csrf = client.post(f"/withdraw/{pid}", data={"token": token, "confirm": "yes"})
    assert no_csrf.status_code == 400
    stranger = app.test_client()  # another browser: its own CSRF token, not the participant's token
    page = stranger.get(f"/withdraw/{pid}").get_data(as_text=True)
    wrong = stranger.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(page), "token": "x" * 43,
                                                     "confirm": "yes"})
    no_token = stranger.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(page), "confirm": "yes"})
    assert wrong.status_code == 403 and no_token.status_code == 403
    unconfirmed = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(text), "token": token})
    assert unconfirmed.status_code == 400
    assert client.get(f"/withdraw/{pid}?confirm=yes&token={token}").status_code == 200
    assert rows_about(app, pid) == before and audits(app) == []


def test_the_task_page_links_to_the_withdrawal(app):
    client = app.test_client()
    pid, _ = enter(client, link(PID))
    page = client.get(f"/task/{pid}").get_data(as_text=True)
    assert f'id="withdraw-link" class="withdraw-link" href="/withdraw/{pid}"' in page


@pytest.fixture
def published_app(database_url, tmp_path):
    spec = write_small_experiment(tmp_path / "published")
    spec.write_text(spec.read_text() + "\n[privacy]\nwithdraw_until = 2020-01-31\n")
    application = create_app({"TESTING": True, "SECRET_KEY": SECRET,
                               "SQLALCHEMY_DATABASE_URI": database_url,
                               "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(application)
    experiments.sync_all(application)
    yield application
    database.dispose(application)


def test_no_withdrawal_through_the_site_after_the_data_are_published(published_app):
    client, pid, token = mid_study(published_app)
    before = rows_about(published_app, pid)
    page = client.get(f"/withdraw/{pid}")
    assert page.status_code == 410 and "2020-01-31" in page.get_data(as_text=True)
    login = client.get("/admin/login").get_data(as_text=True)  # a CSRF token for this browser
    csrf = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', login).group(1)
    refused = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf, "token": token,
                                                     "confirm": "yes"})
    assert refused.status_code == 410 and rows_about(published_app, pid) == before
    assert audits(published_app) == []


def test_withdrawal_leaves_no_platform_or_session_id_in_any_table(app):
    client, pid, token = mid_study(app)
    mid_study(app, OTHER)
    session = f"SESS-{PID}"
    webhook_event(app, session, "evt-withdraw-1")  # Prolific's webhook about their submission
    webhook_event(app, f"SESS-{OTHER}", "evt-keep-1")
    with app.app_context():  # an action's audit entry holding Prolific's reply, which names both
        audit.record("admin:ann", "message", experiment="small", target=pid,
                     detail={"reply": {"submission": session, "participant_id": PID}})
        db.session.commit()
    held = every_text(app)
    assert holds(held, PID) and holds(held, session)  # the check below can fail
    text = client.get(f"/withdraw/{pid}").get_data(as_text=True)
    done = client.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(text), "token": token,
                                                  "confirm": "yes"})
    assert done.status_code == 200
    held = every_text(app)
    assert [v for v in (PID, session) if holds(held, v)] == []
    assert holds(held, OTHER) and holds(held, f"SESS-{OTHER}")  # nobody else's
    with app.app_context():
        [entry] = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "message")).scalars()
        hashed = keyed_hash(key_from_secret(SECRET), "small", PID)
        assert entry.detail["reply"]["participant_id"] == "pn-" + hashed[:16]


def test_a_webhook_event_arriving_after_the_withdrawal_is_forgotten_by_the_next_sync(
        app, monkeypatch, tmp_path):
    client, pid, token = mid_study(app)
    text = client.get(f"/withdraw/{pid}").get_data(as_text=True)
    assert client.post(f"/withdraw/{pid}", data={"csrf_token": csrf_of(text), "token": token,
                                                  "confirm": "yes"}).status_code == 200
    session = f"SESS-{PID}"
    # Prolific tells us about the submission later: nobody here has it any more (unknown)
    webhook_event(app, session, "evt-late-1", outcome="unknown")
    webhook_event(app, "SESS-SOMEONE-ELSE", "evt-other-1", outcome="unknown")
    assert holds(every_text(app), session)  # the check below can fail
    from humanlike.server.live.sync import apply
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        apply(exp, [])  # any sync (Sync now, recruit prolific sync, on a schedule)
    held = every_text(app)
    assert not holds(held, session) and holds(held, "SESS-SOMEONE-ELSE")
