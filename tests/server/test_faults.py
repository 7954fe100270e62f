"""Fault test: gunicorn workers SIGKILLed while participants send trials; nothing acknowledged is lost.

Loopback only and bounded (a few seconds per backend). Also holds ``Gunicorn``, the real server
the allocation tests start with two processes."""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import sqlalchemy as sa

from humanlike.deploy.stack import AppServer
from humanlike.server.extensions import db
from humanlike.server.tables.core import Trial


def app_env(spec: Path, database_url: str, instance: Path) -> dict[str, str]:
    """The environment of an app server process serving ``spec`` from ``database_url``."""
    return {"HUMANLIKE_EXPERIMENTS": str(spec), "DATABASE_URL": database_url,
            "SECRET_KEY": secrets.token_hex(16), "HUMANLIKE_INSTANCE": str(instance),
            "HUMANLIKE_RATE_LIMITS": "off"}  # load from one loopback address


class Gunicorn(AppServer):
    """The shipped gunicorn config (deploy/gunicorn_conf.py) with ``workers`` gthread workers on a
    loopback port (a context manager)."""

    def __init__(self, spec: Path, database_url: str, instance: Path, workers: int = 2, threads: int = 8):
        super().__init__(app_env(spec, database_url, instance), "gunicorn", workers, threads)


def enter_over_http(client: httpx.Client, base: str, slug: str, pid: str) -> tuple[str, str]:
    """Follow a Prolific link as a browser would; return (participant id, token)."""
    resp = client.get(f"{base}/start/{slug}?PROLIFIC_PID={pid}&STUDY_ID=s&SESSION_ID=x")
    assert resp.status_code == 302, resp.text
    public_id = resp.headers["location"].split("#")[0].rstrip("/").split("/")[-1]
    page = client.get(f"{base}/task/{public_id}").text
    token = re.search(r'"token": ?"([^"]+)"', page).group(1)
    return public_id, token


def _send_until_acknowledged(client: httpx.Client, url: str, body: dict, headers: dict,
                             deadline: float) -> int:
    """Retry like the browser queue (network errors and 5xx), until a 2xx/4xx or the deadline."""
    delay = 0.05
    while time.monotonic() < deadline:
        try:
            resp = client.post(url, json=body, headers=headers, timeout=5)
            if resp.status_code < 500:
                return resp.status_code
        except httpx.HTTPError:
            pass
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    return 0


@contextlib.contextmanager
def _killing(server: Gunicorn, times: int, every_s: float) -> Iterator[list[int]]:
    """SIGKILL one worker every ``every_s`` seconds, ``times`` times, in a thread; yields the kills."""
    killed: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while len(killed) < times and not stop.wait(every_s):
            workers = server.workers()
            if workers:
                victim = random.choice(workers)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
                    killed.append(victim)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join()


def test_every_acknowledged_trial_is_stored_once_while_workers_are_killed(app, small_experiment,
                                                                          database_url, tmp_path):
    n_participants, kills = 6, 5
    with Gunicorn(small_experiment, database_url, tmp_path / "instance") as server:
        people = []
        for i in range(n_participants):
            client = httpx.Client(timeout=5)
            pid, token = enter_over_http(client, server.url, "small", f"F{i}")
            headers = {"Authorization": f"Bearer {token}"}
            api = f"{server.url}/api/v1/participants/{pid}"
            assert client.post(f"{api}/consent", json={"agree": True}, headers=headers).status_code == 200
            timeline = client.get(f"{api}/timeline", headers=headers).json()
            people.append((client, api, headers, timeline["trials"]))
        acknowledged: list[tuple[str, int]] = []
        failures: list[str] = []
        deadline = time.monotonic() + 60

        def participant(client: httpx.Client, api: str, headers: dict, trials: list[dict]) -> None:
            for trial in trials:
                body = {"trial_index": trial["index"], "trial_type": trial["type"], "rt_ms": 500.0,
                        "response": ({"ratings": {str(d): 0.25 for d in range(10)}}
                                     if trial["type"] == "rating" else {"answers": {"strategy": "-"}})}
                status = _send_until_acknowledged(client, f"{api}/trials", body, headers, deadline)
                if status in (200, 201):
                    acknowledged.append((api, trial["index"]))
                else:
                    failures.append(f"{api} trial {trial['index']}: {status}")
                time.sleep(0.4)  # a participant answers a few trials a second

        started = time.monotonic()
        with _killing(server, times=kills, every_s=1.0) as killed:
            threads = [threading.Thread(target=participant, args=person) for person in people]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        print(f"{len(people)} participants, {len(killed)} kills, {time.monotonic() - started:.1f} s")
        for client, *_ in people:
            client.close()
    assert len(killed) == kills
    assert failures == []
    expected = sum(len(p[3]) for p in people)
    assert len(acknowledged) == expected
    with app.app_context():
        rows = db.session.execute(
            sa.select(Trial.participant_id, Trial.trial_index, sa.func.count())
            .group_by(Trial.participant_id, Trial.trial_index)
        ).all()
    assert len(rows) == expected and all(n == 1 for *_, n in rows)
