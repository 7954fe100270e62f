"""Participant state is enforced: trials, events and completion only where the lifecycle allows
them (409 naming the current status); time-outs are set by the sweep and undone on return."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server.extensions import db
from humanlike.server.participants import timeouts
from humanlike.server.tables.core import Event, Participant, Trial, utcnow
from tests.server.conftest import auth, enter

LABELS = [str(d) for d in range(10)]
LATER = dt.timedelta(minutes=121)  # past the default timeout_minutes = 120


def rating(index: int) -> dict:
    return {"trial_index": index, "trial_type": "rating", "rt_ms": 800.0,
            "response": {"ratings": {label: 0.25 for label in LABELS}}}


def rating_indices(client, pid, token) -> list[int]:
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    return [t["index"] for t in tl["trials"] if t["type"] == "rating"]


def api(pid: str, what: str) -> str:
    return f"/api/v1/participants/{pid}/{what}"


def status_of(app) -> str:
    with app.app_context():
        return db.session.execute(sa.select(Participant.status)).scalar_one()


def n_rows(app, model) -> int:
    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(model)).scalar_one()


def sweep(app, at: dt.datetime) -> dict[str, int]:
    with app.app_context():
        return timeouts.sweep(now=at)


def test_a_declined_participants_trial_is_refused_and_nothing_is_stored(app, client):
    pid, token = enter(client)
    i = rating_indices(client, pid, token)[0]
    assert client.post(api(pid, "consent"), json={"agree": False}, headers=auth(token)).status_code == 200
    resp = client.post(api(pid, "trials"), json=rating(i), headers=auth(token))
    assert resp.status_code == 409
    body = resp.get_json()
    assert body["error"] == "wrong_status" and body["detail"]["status"] == "returned"
    assert body["detail"]["action"] == "trial"
    assert n_rows(app, Trial) == 0 and status_of(app) == "returned"


def test_a_declined_participants_events_and_completion_are_refused(app, client):
    pid, token = enter(client)
    client.post(api(pid, "consent"), json={"agree": False}, headers=auth(token))
    event = client.post(api(pid, "events"), json={"type": "blur"}, headers=auth(token))
    assert event.status_code == 409 and event.get_json()["detail"]["status"] == "returned"
    done = client.post(api(pid, "complete"), json={}, headers=auth(token))
    assert done.status_code == 409 and done.get_json() == {
        "error": "wrong_status",
        "detail": {"status": "returned", "action": "complete",
                   "allowed": ["approved", "completed", "started", "submitted"]}}
    assert n_rows(app, Event) == 0 and status_of(app) == "returned"


def test_the_insert_sees_a_status_another_process_changed(app, client):
    """This process cached 'consented'; another process recorded the decline: still refused."""
    pid, token = enter(client)
    i = rating_indices(client, pid, token)[0]
    client.post(api(pid, "consent"), json={"agree": True}, headers=auth(token))
    with app.app_context():
        db.session.execute(sa.update(Participant).values(status="returned"))
        db.session.commit()
    resp = client.post(api(pid, "trials"), json=rating(i), headers=auth(token))
    assert resp.status_code == 409 and resp.get_json()["detail"]["status"] == "returned"
    assert n_rows(app, Trial) == 0


def test_events_before_consent_are_stored(app, client):
    pid, token = enter(client)
    resp = client.post(api(pid, "events"), json={"type": "blur"}, headers=auth(token))
    assert resp.status_code == 201 and n_rows(app, Event) == 1


def test_a_timed_out_participant_who_comes_back_is_resumed_and_their_trials_stored(app, client):
    pid, token = enter(client)
    first, second, *_ = rating_indices(client, pid, token)
    client.post(api(pid, "consent"), json={"agree": True}, headers=auth(token))
    assert client.post(api(pid, "trials"), json=rating(first), headers=auth(token)).status_code == 201
    assert sweep(app, utcnow() + LATER) == {"small": 1}
    assert status_of(app) == "timed_out"
    resp = client.post(api(pid, "trials"), json=rating(second), headers=auth(token))
    assert resp.status_code == 201 and resp.get_json() == {"trial_index": second}
    assert status_of(app) == "started" and n_rows(app, Trial) == 2
    again = client.post(api(pid, "trials"), json=rating(second), headers=auth(token))
    assert again.status_code == 200 and n_rows(app, Trial) == 2


def test_a_timed_out_participant_who_reloads_is_back_where_they_were(app, client):
    pid, token = enter(client)
    assert sweep(app, utcnow() + LATER) == {"small": 1}
    tl = client.get(api(pid, "timeline"), headers=auth(token)).get_json()
    assert tl["status"] == "allocated" and status_of(app) == "allocated"
    client.post(api(pid, "consent"), json={"agree": True}, headers=auth(token))
    sweep(app, utcnow() + LATER)
    assert status_of(app) == "timed_out"
    event = client.post(api(pid, "events"), json={"type": "focus"}, headers=auth(token))
    assert event.status_code == 201 and status_of(app) == "consented"


def test_a_timed_out_participant_can_still_complete(app, client):
    pid, token = enter(client)
    client.post(api(pid, "consent"), json={"agree": True}, headers=auth(token))
    tl = client.get(api(pid, "timeline"), headers=auth(token)).get_json()
    for t in tl["trials"]:
        body = rating(t["index"]) if t["type"] == "rating" else {
            "trial_index": t["index"], "trial_type": t["type"], "response": {"answers": {}}}
        assert client.post(api(pid, "trials"), json=body, headers=auth(token)).status_code == 201
    sweep(app, utcnow() + LATER)
    assert status_of(app) == "timed_out"
    done = client.post(api(pid, "complete"), json={}, headers=auth(token))
    assert done.status_code == 200 and done.get_json()["status"] == "completed"


def test_the_sweep_leaves_active_and_finished_participants_alone(app, client):
    pid, token = enter(client)
    client.post(api(pid, "consent"), json={"agree": True}, headers=auth(token))
    i = rating_indices(client, pid, token)[0]
    assert sweep(app, utcnow() + dt.timedelta(minutes=119)) == {"small": 0}
    with app.app_context():  # a trial stored just now keeps an old arrival active
        db.session.execute(sa.update(Participant).values(
            created_at=utcnow() - LATER, consented_at=utcnow() - LATER))
        db.session.commit()
    client.post(api(pid, "trials"), json=rating(i), headers=auth(token))
    assert sweep(app, utcnow()) == {"small": 0} and status_of(app) == "started"
    with app.app_context():
        db.session.execute(sa.update(Participant).values(status="completed"))
        db.session.commit()
    assert sweep(app, utcnow() + 10 * LATER) == {"small": 0} and status_of(app) == "completed"


def test_sweep_timeouts_command_times_out_idle_participants(app, client, database_url):
    enter(client)
    with app.app_context():
        db.session.execute(sa.update(Participant).values(created_at=utcnow() - LATER))
        db.session.commit()
    result = CliRunner().invoke(main, ["sweep-timeouts", "--database-url", database_url])
    assert result.exit_code == 0, result.output
    assert "small: 1 timed out" in result.output and status_of(app) == "timed_out"
