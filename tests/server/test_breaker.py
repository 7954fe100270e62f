"""The quality circuit breaker through the real API: a wave of random clickers (simulated
participants who fail every catch trial and answer in a fraction of the estimated time) trips it
exactly when the minimum count is reached; the fake Prolific (tests/server/fake_prolific.py, which
checks every request against Prolific's documentation) receives exactly one PAUSE; the study link
admits nobody new while a participant already inside can finish; the researcher's resume sends
START, is audited and restarts the window; 200 good simulated participants never trip it."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from humanlike.server import breaker, create_app, database, experiments
from humanlike.server.extensions import db
from humanlike.server.models import AuditEntry, Experiment
from humanlike.server.simulate import (
    SimulatedStudy,
    SimulationSettings,
    api_client,
    run_participant,
)
from tests.server.conftest import auth, enter, write_small_experiment
from tests.server.fake_prolific import FakeProlific, Server
from tests.server.test_export import run_participant as run_by_hand

TOKEN = "tok-breaker-secret"
BREAKER = "\n[breaker]\nmin_participants = 10\nwindow_minutes = 60\n"


@pytest.fixture
def fake(monkeypatch):
    fake = FakeProlific(TOKEN)
    with Server(fake) as server:
        monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
        monkeypatch.setenv("PROLIFIC_API_URL", server.url)
        monkeypatch.setattr("time.sleep", lambda s: None)
        yield fake


@pytest.fixture
def spec(tmp_path):
    path = write_small_experiment(tmp_path / "exp")
    path.write_text(path.read_text() + BREAKER)
    return path


@pytest.fixture
def bapp(database_url, spec, fake, monkeypatch):
    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(application)
    experiments.sync_all(application)
    study = "6" + "0" * 23
    fake.studies[study] = {"id": study, "status": "ACTIVE", "total_available_places": 500}
    with application.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        exp.recruitment_ref = study
        db.session.commit()
    monkeypatch.setattr(breaker, "TALLY", breaker.ErrorTally())
    yield application
    database.dispose(application)


def transitions(fake) -> list[str]:
    return [body["action"] for method, path, body in fake.log
            if method == "POST" and path.startswith("/api/v1/studies/") and path.endswith("/transition/")]


def state(app):
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        return breaker.notice(exp)


def test_a_wave_of_random_clickers_trips_once_at_the_minimum_count(bapp, spec, fake):
    clickers = SimulatedStudy(spec, SimulationSettings(
        n_participants=30, fail_catch=30, noise=1.0, rt_median_ms=250.0, seed=3, id_prefix="bot"))
    inside = bapp.test_client()
    pid, token = enter(inside, "PROLIFIC_PID=EARLYBIRD01&STUDY_ID=S&SESSION_ID=EARLY1")  # arrived first
    tripped_at = None
    with api_client(app=bapp) as client:
        for number in range(10):
            assert state(bapp) is None, f"tripped before the minimum, at clicker {number}"
            run_participant(client, clickers, number, fails_catch=True)
            if state(bapp) is not None and tripped_at is None:
                tripped_at = number + 1
        assert tripped_at == 10 and transitions(fake) == ["PAUSE"]
        for number in range(10, 13):  # the study link is closed to everyone new
            with pytest.raises(RuntimeError, match="(?s)entry: HTTP 503.*Study paused"):
                run_participant(client, clickers, number, fails_catch=True)
        assert client.get("/start/small?PROLIFIC_PID=HUMAN1&STUDY_ID=S&SESSION_ID=H1").status_code == 503
    # the participant already inside finishes, and no second pause is sent
    run_by_hand(inside, pid, token, np.random.default_rng(0))
    assert transitions(fake) == ["PAUSE"]
    study = next(iter(fake.studies.values()))
    assert study["status"] == "PAUSED"

    notice = state(bapp)
    assert "qc_fail_share 1.00 > 0.50" in notice["reason"]
    assert "median_time_share" in notice["reason"]
    assert notice["numbers"]["n_finished"] == 10 and notice["numbers"]["n_qc_failed"] == 10
    assert notice["platform_action"].startswith("prolific: PAUSE sent")

    with bapp.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        resumed = breaker.resume(exp, "admin:alice", "the link was posted on a forum; removed")
        assert resumed is not None and breaker.resume(exp, "admin:alice") is None  # once
        entry = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "breaker_resume")).scalar_one()
    assert entry.actor == "admin:alice" and "forum" in entry.detail["note"]
    assert transitions(fake) == ["PAUSE", "START"] and study["status"] == "ACTIVE"
    assert state(bapp) is None
    with api_client(app=bapp) as client:  # open again; the window starts at the resume
        run_participant(client, clickers, 20, fails_catch=True)
    assert state(bapp) is None and transitions(fake) == ["PAUSE", "START"]


def test_returns_trip_it_and_the_error_rate_is_counted(bapp, fake):
    for i in range(10):
        client = bapp.test_client()
        pid, token = enter(client, f"PROLIFIC_PID=RET{i:04d}&STUDY_ID=S&SESSION_ID=R{i}")
        assert client.post(f"/api/v1/participants/{pid}/consent", json={"agree": False},
                           headers=auth(token)).status_code == 200
        assert (state(bapp) is None) == (i < 9)
    assert "return_share 1.00 > 0.60" in state(bapp)["reason"]
    assert transitions(fake) == ["PAUSE"]
    tally = breaker.ErrorTally()
    for t in range(100):
        tally.add(t % 4 == 0, now=float(t))
    assert tally.rate(window_s=1000, now=100.0) == (100, 25)
    assert tally.rate(window_s=10, now=100.0) == (10, 2)  # t = 90 .. 99: 92 and 96


def test_two_hundred_good_participants_never_trip_it(bapp, spec, fake, database_url):
    if not database_url.startswith("sqlite"):
        pytest.skip("the same API and rules on PostgreSQL are covered by the wave above")
    good = SimulatedStudy(spec, SimulationSettings(
        n_participants=200, fail_catch=10, rt_median_ms=5000.0, seed=11, id_prefix="good"))
    failing = set(good.rng.permutation(200)[:10].tolist())
    with api_client(app=bapp) as client:
        for number in range(200):
            run_participant(client, good, number, fails_catch=number in failing)
            client.cookies.clear()  # each participant is their own browser
            assert state(bapp) is None, f"false trip at participant {number + 1}"
    assert transitions(fake) == []
    with bapp.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        reading = breaker.read(exp, breaker.rules_for("small"), breaker.utcnow())
    assert reading.n_finished == 200 and reading.n_qc_failed == 10  # the ten made to fail catches
    assert reading.fired == []


@pytest.mark.parametrize("cause", ["fast", "errors"])
def test_fast_answers_alone_or_server_errors_alone_trip_it(bapp, spec, fake, cause):
    """Attentive answers (every catch trial right) given far faster than the estimate; or
    ordinary participants while the API answered 5xx to a third of requests in the window."""
    fast = cause == "fast"
    study = SimulatedStudy(spec, SimulationSettings(
        n_participants=10, fail_catch=0, rt_median_ms=300.0 if fast else 5000.0, seed=5,
        id_prefix=cause))
    if not fast:
        for _ in range(150):
            breaker.TALLY.add(True)  # the 5xx answers of a failing stimulus server, say
    with api_client(app=bapp) as client:
        for number in range(10):
            run_participant(client, study, number, fails_catch=False)
            client.cookies.clear()
    notice = state(bapp)
    assert notice is not None and transitions(fake) == ["PAUSE"]
    fired = notice["reason"].split("; ")
    if fast:
        assert [f.split()[0] for f in fired] == ["median_time_share"]
    else:
        assert [f.split()[0] for f in fired] == ["error_rate"]
        answers, errors = notice["numbers"]["api_answers"], notice["numbers"]["api_errors"]
        assert errors == 150 and answers > 150


def test_two_servers_reading_a_bad_window_at_once_trip_once(bapp, fake, monkeypatch):
    """Two processes' checks that both read a window breaking a rule: the experiment's lock lets
    one trip; the other finds the trip and sends nothing (one row, one PAUSE)."""
    import threading

    both_read = threading.Barrier(2, timeout=10)
    real_read = breaker.read

    def read_together(exp, rules, now):
        reading = real_read(exp, rules, now)
        reading.fired = ["qc_fail_share 0.90 > 0.50"]  # as a bad window would
        both_read.wait()  # neither has tripped yet when both decide to
        return reading

    monkeypatch.setattr(breaker, "read", read_together)
    trips, errors = [], []

    def check():
        try:
            with bapp.app_context():
                exp = db.session.execute(sa.select(Experiment)).scalar_one()
                trips.append(breaker.check(exp))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=check) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and sum(t is not None for t in trips) == 1
    assert transitions(fake) == ["PAUSE"]
    with bapp.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(breaker.BreakerTrip)).scalar_one() == 1
