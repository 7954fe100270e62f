"""Trial sync: idempotent on the trial index, and every kind of bad input is a 4xx that writes nothing."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Participant, Trial
from tests.server.conftest import auth, enter

LABELS = [str(d) for d in range(10)]


def rating_body(index: int, **overrides):
    body = {
        "trial_index": index,
        "trial_type": "rating",
        "response": {"ratings": {label: 0.0 for label in LABELS} | {"3": 0.75}},
        "rt_ms": 1234.5,
        "first_rt_ms": 400.0,
        "presented_ms": 1230.0,
        "frames": 74,
        "client_time": 1.7e12,
    }
    body.update(overrides)
    return body


def consent(client, pid, token):
    resp = client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    assert resp.status_code == 200 and resp.get_json()["status"] == "consented"


def count_rows(app, model) -> int:
    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(model)).scalar_one()


def first_rating_index(client, pid, token) -> int:
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    return next(t["index"] for t in tl["trials"] if t["type"] == "rating")


def test_trial_is_stored_once_and_a_replay_gets_the_same_acknowledgement(app, client):
    pid, token = enter(client)
    consent(client, pid, token)
    i = first_rating_index(client, pid, token)
    first = client.post(f"/api/v1/participants/{pid}/trials", json=rating_body(i), headers=auth(token))
    assert first.status_code == 201 and first.get_json() == {"trial_index": i}
    again = client.post(f"/api/v1/participants/{pid}/trials", json=rating_body(i), headers=auth(token))
    assert again.status_code == 200 and again.get_json() == {"trial_index": i}
    assert count_rows(app, Trial) == 1
    with app.app_context():
        trial = db.session.execute(sa.select(Trial)).scalar_one()
        assert trial.response["ratings"]["3"] == 0.75
        assert trial.rt_ms == 1234.5 and trial.frames == 74
        assert db.session.execute(sa.select(Participant.status)).scalar_one() == "started"


def test_trials_before_consent_are_refused(app, client):
    pid, token = enter(client)
    i = first_rating_index(client, pid, token)
    resp = client.post(f"/api/v1/participants/{pid}/trials", json=rating_body(i), headers=auth(token))
    assert resp.status_code == 409 and resp.get_json()["error"] == "no_consent"
    assert count_rows(app, Trial) == 0


def _bad_requests(pid, token, other_pid, other_token, i, n):
    url = f"/api/v1/participants/{pid}/trials"
    good = rating_body(i)
    return {
        "malformed_json": dict(url=url, data="{not json", headers=auth(token) | {"Content-Type": "application/json"}),
        "missing_fields": dict(url=url, json={"trial_index": i}, headers=auth(token)),
        "wrong_type_index": dict(url=url, json=good | {"trial_index": "3"}, headers=auth(token)),
        "wrong_type_rt": dict(url=url, json=good | {"rt_ms": "fast"}, headers=auth(token)),
        "negative_index": dict(url=url, json=good | {"trial_index": -1}, headers=auth(token)),
        "index_out_of_range": dict(url=url, json=good | {"trial_index": n}, headers=auth(token)),
        "unknown_field": dict(url=url, json=good | {"is_admin": True}, headers=auth(token)),
        "rating_not_a_level": dict(
            url=url, json=good | {"response": {"ratings": {label: 0.3 for label in LABELS}}},
            headers=auth(token)),
        "rating_missing_category": dict(
            url=url, json=good | {"response": {"ratings": {"1": 0.5}}}, headers=auth(token)),
        "wrong_trial_type": dict(url=url, json=good | {"trial_type": "triad",
                                                       "response": {"choice": "left"}},
                                 headers=auth(token)),
        "no_token": dict(url=url, json=good, headers={}),
        "wrong_token": dict(url=url, json=good, headers=auth("x" * 43)),
        "other_participants_token": dict(url=url, json=good, headers=auth(other_token)),
        "unknown_participant": dict(url="/api/v1/participants/ffffffffffffffff/trials", json=good,
                                    headers=auth(token)),
        "body_too_large": dict(url=url, data=json.dumps(good | {"response": {"ratings": good["response"]["ratings"], "pad": "x" * 70000}}),
                               headers=auth(token) | {"Content-Type": "application/json"}),
    }


@pytest.mark.parametrize("case", [
    "malformed_json", "missing_fields", "wrong_type_index", "wrong_type_rt", "negative_index",
    "index_out_of_range", "unknown_field", "rating_not_a_level", "rating_missing_category",
    "wrong_trial_type", "no_token", "wrong_token", "other_participants_token",
    "unknown_participant", "body_too_large",
])
def test_bad_trial_input_gets_a_4xx_json_error_and_writes_nothing(app, client, case):
    pid, token = enter(client)
    other_pid, other_token = enter(client, "PROLIFIC_PID=other999&STUDY_ID=s1&SESSION_ID=x2")
    consent(client, pid, token)
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    i = next(t["index"] for t in tl["trials"] if t["type"] == "rating")
    req = _bad_requests(pid, token, other_pid, other_token, i, tl["n_trials"])[case]
    resp = client.post(req.pop("url"), **req)
    assert 400 <= resp.status_code < 500, (case, resp.status_code)
    body = resp.get_json()
    assert set(body) == {"error", "detail"} and body["error"] and body["detail"], body
    assert count_rows(app, Trial) == 0


def test_events_are_logged_and_environment_sets_the_refresh_rate(app, client):
    pid, token = enter(client)
    url = f"/api/v1/participants/{pid}/events"
    assert client.post(url, json={"type": "blur", "client_time": 1.0}, headers=auth(token)).status_code == 201
    env = {"type": "environment", "value": {"refresh_hz": 59.94, "screen_width": 1920, "webdriver": False}}
    assert client.post(url, json=env, headers=auth(token)).status_code == 201
    bad = client.post(url, json={"type": "keylogger"}, headers=auth(token))
    assert bad.status_code == 422 and bad.get_json()["error"] == "invalid_event"
    assert count_rows(app, Event) == 2
    with app.app_context():
        assert db.session.execute(sa.select(Participant.refresh_hz)).scalar_one() == pytest.approx(59.94)


INPUT = {"trusted": 12, "untrusted": 0, "pointer_moves": 40, "clicks": 2, "clicks_without_move": 1,
         "pastes": 0, "webdriver": False}


@pytest.mark.parametrize("body, field", [
    ({"value": {**INPUT, "trusted": -1}}, "value.trusted"),
    ({"value": {**INPUT, "clicks": 2.0}}, "value.clicks"),
    ({"value": {**INPUT, "webdriver": 1}}, "value.webdriver"),
    ({"value": {k: v for k, v in INPUT.items() if k != "pastes"}}, "value.pastes"),
    ({"value": {**INPUT, "keys": "hunter2"}}, "value.keys"),
    ({"value": "12 trusted"}, "value"),
    ({"value": None}, "value"),
    ({}, "value"),
])
def test_an_input_event_stores_its_counts_and_a_malformed_one_is_a_422_naming_the_field(
        app, client, body, field):
    pid, token = enter(client)
    url = f"/api/v1/participants/{pid}/events"
    ok = client.post(url, json={"type": "input", "value": INPUT, "client_time": 1.0}, headers=auth(token))
    assert ok.status_code == 201
    bad = client.post(url, json={"type": "input", **body}, headers=auth(token))
    assert bad.status_code == 422 and bad.get_json()["error"] == "invalid_event"
    assert field in {d["field"] for d in bad.get_json()["detail"]}
    with app.app_context():
        stored = db.session.execute(sa.select(Event.type, Event.value)).all()
    assert stored == [("input", INPUT)]


def test_complete_lists_missing_trials_then_redirects_to_prolific_with_the_code(app, client):
    pid, token = enter(client)
    consent(client, pid, token)
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    url = f"/api/v1/participants/{pid}/trials"
    for t in tl["trials"][:-1]:
        body = rating_body(t["index"]) if t["type"] == "rating" else None
        assert t["type"] == "rating"
        assert client.post(url, json=body, headers=auth(token)).status_code == 201
    early = client.post(f"/api/v1/participants/{pid}/complete", headers=auth(token))
    assert early.status_code == 409
    assert early.get_json()["detail"]["missing"] == [tl["n_trials"] - 1]
    last = tl["trials"][-1]
    assert last["type"] == "debrief"
    debrief = {"trial_index": last["index"], "trial_type": "debrief",
               "response": {"answers": {"strategy": "looked closely"}}}
    assert client.post(url, json=debrief, headers=auth(token)).status_code == 201
    done = client.post(f"/api/v1/participants/{pid}/complete", headers=auth(token))
    assert done.status_code == 200
    assert done.get_json()["next"] == {
        "kind": "redirect", "url": "https://app.prolific.com/submissions/complete?cc=CODE1234"}
    assert count_rows(app, Trial) == tl["n_trials"]
    # a late replay of an acknowledged trial is still acknowledged, without a new row
    again = client.post(url, json=rating_body(tl["trials"][0]["index"]), headers=auth(token))
    assert again.status_code == 200 and count_rows(app, Trial) == tl["n_trials"]


def test_healthz_reports_the_database(client):
    resp = client.get("/healthz")
    assert resp.status_code == 200 and resp.get_json() == {"status": "ok", "db": "ok"}
