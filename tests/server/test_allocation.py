"""Condition assignment: balanced under simultaneous arrivals (threads, and two processes on
PostgreSQL), every held place counted, ties drawn at random from a recorded seed."""

from __future__ import annotations

import datetime as dt
import random
import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from werkzeug.serving import make_server

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.participants.allocation import choose_condition
from humanlike.server.study import experiments
from humanlike.server.tables.core import Participant
from tests.server.conftest import auth, write_small_experiment
from tests.server.test_faults import Gunicorn

N_ARRIVALS = 100


@pytest.fixture(scope="module")
def four_conditions(tmp_path_factory) -> Path:
    """The small rating experiment with four conditions, A to D, under the slug ``four``."""
    spec = write_small_experiment(tmp_path_factory.mktemp("four"))
    text = spec.read_text().replace('slug = "small"', 'slug = "four"')
    text = text.replace('[[conditions]]\nname = "B"\n',
                        '[[conditions]]\nname = "B"\n\n[[conditions]]\nname = "C"\n\n'
                        '[[conditions]]\nname = "D"\n')
    spec.write_text(text)
    return spec


@pytest.fixture
def four_app(database_url, four_conditions):
    application = create_app({"TESTING": True, "SECRET_KEY": "t",
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(four_conditions)]})
    database.upgrade(application)
    experiments.sync_all(application)
    yield application
    database.dispose(application)


def enter(client, query: str = "PROLIFIC_PID=abc123") -> tuple[str, str]:
    """Follow the ``four`` study link to the task page; return (pid, token)."""
    resp = client.get(f"/start/four?{query}")
    assert resp.status_code == 302, resp.get_data(as_text=True)
    pid = resp.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
    page = client.get(f"/task/{pid}").get_data(as_text=True)
    return pid, re.search(r'"token": ?"([^"]+)"', page).group(1)


def conditions_of(app) -> Counter:
    with app.app_context():
        return Counter(db.session.execute(sa.select(Participant.condition)).scalars())


def arrive_together(base: str, n: int = N_ARRIVALS, prefix: str = "P") -> list[int]:
    """``n`` study-link hits released at the same moment from ``n`` threads; their status codes."""
    barrier = threading.Barrier(n)

    def hit(i: int) -> int:
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            return client.get(f"{base}/start/four?PROLIFIC_PID={prefix}{i}&STUDY_ID=s&SESSION_ID=x"
                              ).status_code

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(hit, range(n)))


def assert_balanced(counts: Counter, n: int = N_ARRIVALS) -> None:
    assert sum(counts.values()) == n
    assert set(counts) == {"A", "B", "C", "D"}
    assert all(abs(c - n / 4) <= 1 for c in counts.values()), counts


def test_simultaneous_arrivals_fill_four_conditions_evenly(four_app):
    server = make_server("127.0.0.1", 0, four_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        codes = arrive_together(f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        thread.join()
    assert codes == [302] * N_ARRIVALS
    assert_balanced(conditions_of(four_app))


def test_simultaneous_arrivals_at_two_processes_fill_conditions_evenly(four_app, four_conditions,
                                                                       database_url, tmp_path):
    if not database_url.startswith("postgresql"):
        pytest.skip("several app processes share one PostgreSQL (SQLite serves one host)")
    with Gunicorn(four_conditions, database_url, tmp_path / "instance", workers=2, threads=16) as server:
        assert len(server.workers()) == 2
        codes = arrive_together(server.url)
    assert codes == [302] * N_ARRIVALS
    assert_balanced(conditions_of(four_app))


def test_arrivals_that_have_not_started_hold_their_place(four_app):
    """40 sequential arrivals, none consenting yet: 10 per condition (not 40 in the first)."""
    for i in range(40):
        enter(four_app.test_client(), f"PROLIFIC_PID=S{i}")
    assert conditions_of(four_app) == Counter({"A": 10, "B": 10, "C": 10, "D": 10})


def _set(app, updates: dict[str, dict]) -> None:
    with app.app_context():
        for platform_id, values in updates.items():
            db.session.execute(sa.update(Participant)
                               .where(Participant.platform_id == platform_id).values(**values))
        db.session.commit()


def _condition(app, platform_id: str) -> str:
    with app.app_context():
        return db.session.execute(sa.select(Participant.condition)
                                  .where(Participant.platform_id == platform_id)).scalar_one()


def test_returned_timed_out_rejected_and_stale_arrivals_give_their_place_back(four_app):
    for i in range(4):
        enter(four_app.test_client(), f"PROLIFIC_PID=R{i}")
    by_condition = {_condition(four_app, f"R{i}"): f"R{i}" for i in range(4)}
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=31)  # the spec's cutoff is 30 minutes
    _set(four_app, {by_condition["A"]: {"status": "returned"},
                    by_condition["B"]: {"status": "timed_out"},
                    by_condition["C"]: {"status": "allocated", "created_at": long_ago}})
    newcomers = []
    for i in range(3):
        enter(four_app.test_client(), f"PROLIFIC_PID=N{i}")
        newcomers.append(_condition(four_app, f"N{i}"))
    assert sorted(newcomers) == ["A", "B", "C"]


def test_completed_and_rejected_participants_count_as_held_and_not_held(four_app):
    for i in range(4):
        enter(four_app.test_client(), f"PROLIFIC_PID=Q{i}")
    by_condition = {_condition(four_app, f"Q{i}"): f"Q{i}" for i in range(4)}
    _set(four_app, {by_condition["A"]: {"status": "completed"},
                    by_condition["B"]: {"status": "rejected"},
                    by_condition["C"]: {"status": "approved"},
                    by_condition["D"]: {"status": "started"}})
    enter(four_app.test_client(), "PROLIFIC_PID=NEW")
    assert _condition(four_app, "NEW") == "B"


def test_each_allocation_records_the_counts_and_seed_that_reproduce_it(four_app):
    for i in range(6):
        enter(four_app.test_client(), f"PROLIFIC_PID=T{i}")
    with four_app.app_context():
        rows = db.session.execute(sa.select(Participant).order_by(Participant.id)).scalars().all()
        records = [(p.condition, p.allocation) for p in rows]
    assert records[0][1]["counts"] == {"A": 0, "B": 0, "C": 0, "D": 0}
    assert records[4][1]["counts"] == {"A": 1, "B": 1, "C": 1, "D": 1}
    for condition, record in records:
        assert record["condition"] == condition
        assert choose_condition(record["counts"], record["seed"]) == condition
        fewest = min(record["counts"].values())
        assert record["counts"][condition] == fewest


def test_ties_are_drawn_at_random_not_in_spec_order():
    counts = {"A": 3, "B": 2, "C": 2, "D": 2}
    picks = Counter(choose_condition(counts, random.Random(i).getrandbits(62)) for i in range(400))
    assert set(picks) == {"B", "C", "D"}
    assert all(100 <= n <= 170 for n in picks.values()), picks
    assert choose_condition(counts, None) == "B"


def test_a_token_from_an_arrival_still_works_after_allocation(four_app):
    client = four_app.test_client()
    pid, token = enter(client)
    resp = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token))
    assert resp.status_code == 200 and resp.get_json()["condition"] in "ABCD"
