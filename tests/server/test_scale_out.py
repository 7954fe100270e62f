"""Scale-out: several app processes on one database behave as one server.

Two app server instances (one worker process each, so each holds its own participant cache) share
one database: a status change, a token reissue or a deletion made through one is honoured by the
other at once. Behind Caddy (deploy/Caddyfile) on PostgreSQL, simultaneous arrivals stay balanced
and the same platform id arriving many times at once yields one participant."""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy as sa

from humanlike.deploy.stack import AppServer, Caddy, caddy_binary, running
from humanlike.server.extensions import db
from humanlike.server.rights.deletion import delete_participant
from humanlike.server.tables.core import Event, Participant, Trial
from tests.conftest import ON_CI
from tests.server.test_allocation import (  # noqa: F401 (fixtures)
    arrive_together,
    assert_balanced,
    conditions_of,
    four_app,
    four_conditions,
)
from tests.server.test_faults import app_env

pytestmark = pytest.mark.slow


@pytest.fixture
def two_instances(app, small_experiment, database_url, tmp_path):
    """Two app server instances (the default server, one process each) on the test database, as
    two hosts would run them."""
    env = app_env(small_experiment, database_url, tmp_path / "instance")
    one, two = AppServer(env, workers=1, threads=4), AppServer(env, workers=1, threads=4)
    with running(one, two):
        yield one, two


class Browser:
    """One participant's browser, able to send its requests to either instance."""

    def __init__(self, client: httpx.Client, pid: str, token: str, home: AppServer):
        self.client, self.pid, self.token, self.home = client, pid, token, home

    def api(self, server: AppServer, path: str) -> str:
        return f"{server.url}/api/v1/participants/{self.pid}/{path}"

    def headers(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}

    def timeline(self, server: AppServer, token: str | None = None) -> httpx.Response:
        return self.client.get(self.api(server, "timeline"), headers=self.headers(token))

    def consent(self, server: AppServer, agree: bool) -> httpx.Response:
        return self.client.post(self.api(server, "consent"), json={"agree": agree},
                                headers=self.headers())

    def trial(self, server: AppServer, index: int, token: str | None = None) -> httpx.Response:
        trial = self.trials[index]
        response = ({"ratings": {str(d): 0.25 for d in range(10)}} if trial["type"] == "rating"
                    else {"answers": {"strategy": "-"}})
        return self.client.post(self.api(server, "trials"), headers=self.headers(token), json={
            "trial_index": index, "trial_type": trial["type"], "rt_ms": 500.0, "response": response})

    def event(self, server: AppServer, token: str | None = None) -> httpx.Response:
        return self.client.post(self.api(server, "events"), headers=self.headers(token),
                                json={"type": "blur", "value": None})

    def complete(self, server: AppServer, token: str | None = None) -> httpx.Response:
        return self.client.post(self.api(server, "complete"), headers=self.headers(token), json={})

    @property
    def trials(self) -> list[dict]:
        if not hasattr(self, "_trials"):
            self._trials = self.client.get(self.api(self.home, "timeline"),
                                           headers=self.headers()).json()["trials"]
        return self._trials


def arrive(server: AppServer, platform_id: str, session: str = "x") -> Browser:
    client = httpx.Client(timeout=10)
    resp = client.get(f"{server.url}/start/small?PROLIFIC_PID={platform_id}&STUDY_ID=s&SESSION_ID={session}")
    assert resp.status_code == 302, resp.text
    location = resp.headers["location"]  # the task page, with the token in the URL fragment
    return Browser(client, location.split("#")[0].rstrip("/").split("/")[-1],
                   location.split("#token=")[1], server)


def stored(app, browser: Browser) -> tuple[str | None, int, int]:
    """(status, trials, events) of the participant in the database."""
    with app.app_context():
        row = db.session.execute(sa.select(Participant).where(
            Participant.public_id == browser.pid)).scalar_one_or_none()
        if row is None:
            return None, 0, 0
        n_trials = db.session.execute(sa.select(sa.func.count()).select_from(Trial).where(
            Trial.participant_id == row.id)).scalar_one()
        n_events = db.session.execute(sa.select(sa.func.count()).select_from(Event).where(
            Event.participant_id == row.id, Event.type == "blur")).scalar_one()
        return row.status, n_trials, n_events


def set_status(app, browser: Browser, status: str) -> None:
    """A status change made elsewhere (the platform sync, the time-out sweep, an admin)."""
    with app.app_context():
        db.session.execute(sa.update(Participant).where(Participant.public_id == browser.pid)
                           .values(status=status))
        db.session.commit()


def declined_elsewhere(app, one: AppServer, two: AppServer) -> None:
    """The issue's case: a trial sent to one process after declining consent in the other."""
    browser = arrive(one, "DECLINER")
    assert browser.timeline(two).status_code == 200  # the second process now caches the participant
    assert browser.consent(one, agree=False).json()["status"] == "returned"
    resp = browser.trial(two, 0)
    assert resp.status_code == 409 and resp.json()["detail"]["status"] == "returned"
    assert browser.event(two).status_code == 409
    assert stored(app, browser) == ("returned", 0, 0)


def returned_elsewhere(app, one: AppServer, two: AppServer) -> None:
    """Started, then returned (the platform sync): no more trials, events or completion."""
    browser = arrive(one, "RETURNER")
    assert browser.consent(one, agree=True).status_code == 200
    assert browser.trial(two, 0).status_code == 201  # cached as started in the second process
    assert browser.trial(one, 1).status_code == 201
    set_status(app, browser, "returned")  # e.g. the platform's RETURNED, synced by another process
    for server in (one, two):
        resp = browser.trial(server, 2)
        assert resp.status_code == 409 and resp.json()["detail"]["status"] == "returned"
        assert browser.event(server).status_code == 409
        assert browser.complete(server).status_code == 409
    assert stored(app, browser) == ("returned", 2, 0)


def timed_out_elsewhere(app, one: AppServer, two: AppServer) -> None:
    """Timed out by another process's sweep: the next trial is stored and resumes the participant."""
    browser = arrive(one, "SLEEPER")
    assert browser.consent(one, agree=True).status_code == 200
    assert browser.trial(two, 0).status_code == 201
    set_status(app, browser, "timed_out")  # the sweep, run by another process
    assert browser.trial(two, 1).status_code == 201
    assert stored(app, browser) == ("started", 2, 0)


def resumed_elsewhere(app, one: AppServer, two: AppServer) -> None:
    """A resume in one process reissues the token: the old one opens nothing in either process."""
    browser = arrive(one, "RESUMER", session="s1")
    assert browser.consent(one, agree=True).status_code == 200
    assert browser.trial(two, 0).status_code == 201  # the second process caches the first token
    old = browser.token
    again = arrive(one, "RESUMER", session="s1")  # the same person, after a browser restart
    assert again.pid == browser.pid and again.token != old
    for server in (two, one):
        assert browser.timeline(server, old).status_code == 403
        assert browser.trial(server, 1, old).status_code == 403
        assert browser.event(server, old).status_code == 403
        assert browser.complete(server, old).status_code == 403
    assert stored(app, browser) == ("started", 1, 0)
    assert browser.trial(two, 1, again.token).status_code == 201
    assert browser.event(two, again.token).status_code == 201
    assert stored(app, browser) == ("started", 2, 1)


def deleted_elsewhere(app, one: AppServer, two: AppServer) -> None:
    """Deleted on request: every process answers 403 (not 500) and nothing is written."""
    browser = arrive(one, "DELETED")
    assert browser.consent(one, agree=True).status_code == 200
    browser.trials  # noqa: B018 (fetch the timeline before the participant is deleted)
    assert browser.trial(two, 0).status_code == 201  # cached in the second process
    assert browser.trial(one, 1).status_code == 201  # and in the first
    with app.app_context():
        row = db.session.execute(sa.select(Participant).where(
            Participant.public_id == browser.pid)).scalar_one()
        delete_participant(row, actor="test", reason="withdrawal")
    for server in (one, two):
        for resp in (browser.trial(server, 2), browser.event(server), browser.timeline(server),
                     browser.complete(server), browser.consent(server, agree=True)):
            assert resp.status_code == 403, (server.url, resp.request.url, resp.text)
            assert resp.json()["error"] == "forbidden"
    assert stored(app, browser) == (None, 0, 0)


SCENARIOS = (declined_elsewhere, returned_elsewhere, timed_out_elsewhere, resumed_elsewhere,
             deleted_elsewhere)


def test_each_process_honours_changes_made_in_the_other(app, two_instances):
    """Every cached-state path, one participant per scenario (failures name the scenario in the
    traceback), on one pair of processes started once."""
    one, two = two_instances
    for scenario in SCENARIOS:
        scenario(app, one, two)


# --- behind the proxy, on PostgreSQL -------------------------------------------------------------

@pytest.fixture
def proxied_four(request, four_conditions, database_url, tmp_path):  # noqa: F811
    """Caddy (the shipped site block) balancing over two gunicorn instances of the ``four`` study."""
    if not database_url.startswith("postgresql"):
        pytest.skip("several app servers share one PostgreSQL (SQLite serves one host)")
    if caddy_binary() is None:
        if ON_CI:
            pytest.fail("CI needs caddy (make caddy)")
        pytest.skip("caddy is not installed (make caddy)")
    request.getfixturevalue("four_app")  # the database, migrated and synced
    env = app_env(four_conditions, database_url, tmp_path / "instance")
    env["HUMANLIKE_PROXY_COUNT"] = "1"
    one, two = (AppServer(env, "gunicorn", workers=1, threads=16) for _ in range(2))
    proxy = Caddy([f"127.0.0.1:{one.port}", f"127.0.0.1:{two.port}"])
    with running(one, two, proxy):
        yield proxy


def test_arrivals_through_the_proxy_stay_balanced_and_unique(proxied_four, four_app):  # noqa: F811
    """200 different people at once: conditions within one of each other, no duplicate; then
    one platform id 20 times at once: one participant."""
    codes = arrive_together(proxied_four.url, n=200, prefix="W")
    assert codes == [302] * 200
    assert_balanced(conditions_of(four_app), n=200)
    with four_app.app_context():
        ids = db.session.execute(sa.select(Participant.platform_id)).scalars().all()
    assert len(ids) == len(set(ids)) == 200

    n, barrier = 20, threading.Barrier(20)
    platform_id = "SAME" + secrets.token_hex(3)

    def hit(_: int) -> httpx.Response:
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            return client.get(f"{proxied_four.url}/start/four?PROLIFIC_PID={platform_id}"
                              "&STUDY_ID=s&SESSION_ID=x")

    with ThreadPoolExecutor(n) as pool:
        responses = list(pool.map(hit, range(n)))
    codes_20 = Counter(r.status_code for r in responses)
    assert set(codes_20) <= {302, 409} and codes_20[302] >= 1, codes_20
    pids = {r.headers["location"].split("#")[0].rstrip("/").split("/")[-1]
            for r in responses if r.status_code == 302}
    with four_app.app_context():
        rows = db.session.execute(sa.select(Participant.public_id).where(
            Participant.platform_id == platform_id)).scalars().all()
        total = db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar_one()
    assert rows == [pids.pop()] and not pids and total == 201
