"""Hostile input: one JSON policy on both backends (NUL, NaN/Infinity, lone surrogates, deep
nesting are 4xx and write nothing), chunked bodies, the Bearer scheme, unknown vs foreign ids, and
a replayed trial index with a different body (409 trial_conflict, the first version stays)."""

from __future__ import annotations

import http.client
import io
import json
import threading

import pytest
import sqlalchemy as sa
from werkzeug.serving import make_server

from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Participant, Trial
from tests.server.conftest import auth, enter
from tests.server.test_api_trials import consent, count_rows, first_rating_index, rating_body

JSON = {"Content-Type": "application/json"}
RATINGS = json.dumps({str(d): 0.75 if d == 3 else 0.0 for d in range(10)})


def _trial(i: int, ratings: str = RATINGS, rt: str = "1234.5", extra: str = "") -> str:
    return (f'{{"trial_index": {i}, "trial_type": "rating", "response": {{"ratings": {ratings}{extra}}}, '
            f'"rt_ms": {rt}}}')


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# raw JSON texts: each is valid for Python's json module (or nearly), and each must be refused
HOSTILE_TRIALS = {
    "nul_in_value": lambda i: _trial(i, extra=', "note": "a\\u0000b"'),
    "nul_in_key": lambda i: _trial(i, extra=', "a\\u0000": 1'),
    "raw_nul_byte": lambda i: _trial(i, extra=', "note": "a\x00b"'),
    "nan": lambda i: _trial(i, rt="NaN"),
    "infinity": lambda i: _trial(i, rt="Infinity"),
    "minus_infinity": lambda i: _trial(i, rt="-Infinity"),
    "overflow_to_infinity": lambda i: _trial(i, rt="1e999"),
    "nan_in_response": lambda i: _trial(i, extra=', "x": NaN'),
    "lone_surrogate": lambda i: _trial(i, extra=', "note": "\\ud800"'),
    "lone_surrogate_key": lambda i: _trial(i, extra=', "\\udfff": 1'),
    "nested_40": lambda i: _trial(i, extra=', "deep": ' + _nested(40)),
    "nested_20000": lambda i: _trial(i, extra=', "deep": ' + _nested(20000)),
    "nested_20000_top": lambda i: _nested(20000),
}


def _assert_refused(resp, *codes: int) -> dict:
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.get_data(as_text=True)[:300])
    if codes:
        assert resp.status_code in codes, resp.status_code
    body = resp.get_json()
    assert set(body) == {"error", "detail"} and body["error"] and body["detail"], body
    return body


@pytest.mark.parametrize("case", sorted(HOSTILE_TRIALS))
def test_hostile_trial_json_gets_a_4xx_and_writes_nothing(app, client, case):
    pid, token = enter(client)
    consent(client, pid, token)
    i = first_rating_index(client, pid, token)
    resp = client.post(f"/api/v1/participants/{pid}/trials", data=HOSTILE_TRIALS[case](i),
                       headers=auth(token) | JSON)
    _assert_refused(resp, 400, 422)
    assert count_rows(app, Trial) == 0


HOSTILE_EVENTS = {
    "nul": '{"type": "error", "value": "boom\\u0000"}',
    "nul_in_key": '{"type": "environment", "value": {"w\\u0000": 1}}',
    "nan": '{"type": "resize", "value": NaN}',
    "infinity_time": '{"type": "blur", "client_time": Infinity}',
    "lone_surrogate": '{"type": "error", "value": "\\udbff"}',
    "nested_40": '{"type": "error", "value": {"a": ' + _nested(40) + "}}",
    "nested_20000": '{"type": "error", "value": ' + _nested(20000) + "}",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_EVENTS))
def test_hostile_event_json_gets_a_4xx_and_writes_nothing(app, client, case):
    pid, token = enter(client)
    resp = client.post(f"/api/v1/participants/{pid}/events", data=HOSTILE_EVENTS[case],
                       headers=auth(token) | JSON)
    _assert_refused(resp, 400, 422)
    assert count_rows(app, Event) == 0


HOSTILE_SMALL = {
    "nul_key": '{"agree": true, "a\\u0000": 1}',
    "nan": '{"agree": true, "x": NaN}',
    "lone_surrogate": '{"agree": true, "x": "\\ud800"}',
    "nested_20000": '{"agree": true, "x": ' + _nested(20000) + "}",
}


def _status(app) -> str:
    with app.app_context():
        return db.session.execute(sa.select(Participant.status)).scalar_one()


@pytest.mark.parametrize("case", sorted(HOSTILE_SMALL))
def test_hostile_consent_json_gets_a_4xx_and_changes_nothing(app, client, case):
    pid, token = enter(client)
    resp = client.post(f"/api/v1/participants/{pid}/consent", data=HOSTILE_SMALL[case],
                       headers=auth(token) | JSON)
    _assert_refused(resp, 400, 422)
    assert _status(app) == "allocated"


@pytest.mark.parametrize("case", sorted(HOSTILE_SMALL))
def test_hostile_complete_json_gets_a_4xx_and_changes_nothing(app, client, case):
    pid, token = enter(client)
    consent(client, pid, token)
    resp = client.post(f"/api/v1/participants/{pid}/complete", data=HOSTILE_SMALL[case],
                       headers=auth(token) | JSON)
    _assert_refused(resp, 400, 422)
    assert _status(app) == "consented"


def test_complete_still_takes_an_empty_or_empty_object_body(app, client):
    pid, token = enter(client)
    consent(client, pid, token)
    for kwargs in ({}, {"json": {}}):
        resp = client.post(f"/api/v1/participants/{pid}/complete", headers=auth(token), **kwargs)
        assert resp.status_code == 409 and resp.get_json()["error"] != "malformed_json"


def test_a_chunked_trial_is_stored_and_an_oversized_chunked_body_is_refused(app, client):
    pid, token = enter(client)
    consent(client, pid, token)
    i = first_rating_index(client, pid, token)
    url = f"/api/v1/participants/{pid}/trials"
    chunked = auth(token) | JSON | {"Transfer-Encoding": "chunked"}
    terminated = {"wsgi.input_terminated": True}
    ok = client.post(url, input_stream=io.BytesIO(_trial(i).encode()), headers=chunked,
                     environ_overrides=terminated)
    assert ok.status_code == 201, ok.get_data(as_text=True)
    big = _trial(i + 1, extra=', "pad": "%s"' % ("x" * 70000)).encode()
    resp = client.post(url, input_stream=io.BytesIO(big), headers=chunked, environ_overrides=terminated)
    assert _assert_refused(resp, 413)["error"] == "body_too_large"
    assert count_rows(app, Trial) == 1


def test_a_chunked_body_over_a_real_socket_is_read_within_the_limit(app, client):
    pid, token = enter(client)
    consent(client, pid, token)
    i = first_rating_index(client, pid, token)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        def send(body: bytes) -> tuple[int, dict]:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("POST", f"/api/v1/participants/{pid}/trials", body=iter([body[:50], body[50:]]),
                         headers=auth(token) | JSON, encode_chunked=True)
            resp = conn.getresponse()
            result = resp.status, json.loads(resp.read())
            conn.close()
            return result

        status, body = send(_trial(i).encode())
        assert status == 201 and body == {"trial_index": i}
        status, body = send(_trial(i + 1, extra=', "pad": "%s"' % ("x" * 70000)).encode())
        assert status == 413 and body["error"] == "body_too_large"
        status, body = send(_trial(i + 1, rt="NaN").encode())
        assert status in (400, 422) and set(body) == {"error", "detail"}
    finally:
        server.shutdown()
        thread.join(5)
    assert count_rows(app, Trial) == 1


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer", "bEaReR"])
def test_the_bearer_scheme_is_matched_case_insensitively(app, client, scheme):
    pid, token = enter(client)
    resp = client.get(f"/api/v1/participants/{pid}/timeline",
                      headers={"Authorization": f"{scheme} {token}"})
    assert resp.status_code == 200


@pytest.mark.parametrize("header", ["", "Basic abc", "Bearer", "Bearer ", "Token " + "x" * 43])
def test_a_missing_or_foreign_scheme_is_401(app, client, header):
    pid, _token = enter(client)
    resp = client.get(f"/api/v1/participants/{pid}/timeline", headers={"Authorization": header})
    assert _assert_refused(resp, 401)["error"] == "missing_token"


@pytest.mark.parametrize("path, method", [("timeline", "get"), ("trials", "post"), ("events", "post"),
                                          ("consent", "post"), ("complete", "post")])
def test_unknown_and_foreign_participant_ids_get_the_same_answer(app, client, path, method):
    _pid, token = enter(client)
    other_pid, _other_token = enter(app.test_client(), "PROLIFIC_PID=other999&STUDY_ID=s1&SESSION_ID=x2")
    call = getattr(client, method)
    kwargs = {} if method == "get" else {"json": {"agree": True}}
    foreign = call(f"/api/v1/participants/{other_pid}/{path}", headers=auth(token), **kwargs)
    unknown = call(f"/api/v1/participants/ffffffffffffffff/{path}", headers=auth(token), **kwargs)
    assert foreign.status_code == unknown.status_code == 403
    assert foreign.get_json() == unknown.get_json()
    assert _assert_refused(foreign, 403)["error"] == "forbidden"


def _stored_trial(app) -> Trial:
    with app.app_context():
        trial = db.session.execute(sa.select(Trial)).scalar_one()
        db.session.expunge(trial)
        return trial


@pytest.mark.parametrize("change", [
    {"rt_ms": 999.0},
    {"frames": 75},
    {"client_time": 1.8e12},
    {"response": {"ratings": {str(d): 0.0 for d in range(10)} | {"3": 0.5}}},
    {"first_rt_ms": None},
])
def test_a_replay_with_a_different_body_is_a_409_conflict_and_the_first_version_stays(
        app, client, change):
    pid, token = enter(client)
    consent(client, pid, token)
    i = first_rating_index(client, pid, token)
    url = f"/api/v1/participants/{pid}/trials"
    assert client.post(url, json=rating_body(i), headers=auth(token)).status_code == 201
    resp = client.post(url, json=rating_body(i, **change), headers=auth(token))
    body = _assert_refused(resp, 409)
    assert body["error"] == "trial_conflict" and body["detail"]["trial_index"] == i
    assert body["detail"]["fields"] == sorted(change)
    trial = _stored_trial(app)
    assert trial.rt_ms == 1234.5 and trial.frames == 74 and trial.first_rt_ms == 400.0
    assert trial.client_time == 1.7e12 and trial.response["ratings"]["3"] == 0.75
    same = client.post(url, json=rating_body(i), headers=auth(token))
    assert same.status_code == 200 and same.get_json() == {"trial_index": i}
    assert count_rows(app, Trial) == 1


def test_an_identical_replay_with_reordered_keys_and_int_floats_is_still_200(app, client):
    pid, token = enter(client)
    consent(client, pid, token)
    i = first_rating_index(client, pid, token)
    url = f"/api/v1/participants/{pid}/trials"
    first = rating_body(i, rt_ms=1234.0, client_time=1.7e12 + 0.123)
    assert client.post(url, json=first, headers=auth(token)).status_code == 201
    ratings = dict(reversed(list(first["response"]["ratings"].items())))
    again = dict(reversed(list((first | {"rt_ms": 1234, "response": {"ratings": ratings}}).items())))
    resp = client.post(url, data=json.dumps(again), headers=auth(token) | JSON)
    assert resp.status_code == 200 and resp.get_json() == {"trial_index": i}
