"""psiTurk sync benchmark: simulated psiTurk participants save after every trial through PUT /sync,
sending the whole data blob each time, as psiturk.js does.

    python bench/psiturk_sync.py --participants 50 --trials 200 --concurrency 25 [--database-url URL]

It serves psiTurk 3.3.1's own example project (from the wheel `make psiturk-example` downloads) with
the default app server as bench/ingest.py does (its server start and keep-alive client are reused). Each
participant: GET /exp (condition, write cookie) -> GET /sync -> one PUT /sync per trial with the
whole blob -> GET /complete. At the end every participant must hold exactly its trials, once each,
and one JSON line is printed: trials_per_s, p99_ms, bytes_stored (the stored records, in bytes),
stored_ok. psiTurk 3.3.1 on this machine: 158 trials/s, p99 618 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from urllib.parse import quote

import numpy as np
from ingest import DEFAULT_SERVER, KeepAliveConnection, server_logs, start_servers

REPO = Path(__file__).resolve().parents[1]
WHEEL = REPO / "build" / "psiturk" / "PsiTurk-3.3.1-py3-none-any.whl"
STIMS = [("SHIP", "red", "unrelated"), ("MONKEY", "green", "unrelated"), ("RED", "red", "congruent"),
         ("GREEN", "green", "congruent"), ("BLUE", "red", "incongruent")]


def example_project(dest: Path) -> Path:
    """psiTurk's example project, set up as `psiturk setup-example` does."""
    if not WHEEL.is_file():
        sys.exit(f"{WHEEL} is missing: run `make psiturk-example`")
    with zipfile.ZipFile(WHEEL) as wheel:
        wheel.extractall(dest / "wheel")
    project = dest / "psiturk-example"
    shutil.copytree(dest / "wheel" / "psiturk" / "example", project)
    (project / "config.txt.sample").rename(project / "config.txt")
    (project / "custom.py.sample").rename(project / "custom.py")
    return project


class PsiturkParticipant:
    """One simulated psiTurk browser on its own keep-alive connection."""

    def __init__(self, index: int, n: int, rng: np.random.Generator):
        self.worker, self.assignment = f"W{index:04d}", f"A{index:04d}"
        self.uid = f"{self.worker}:{self.assignment}"
        self.n, self.rng = n, rng
        self.latencies: list[float] = []

    async def run(self, host: str, port: int) -> None:
        conn = KeepAliveConnection(host, port)
        try:
            await self._run(conn)
        finally:
            await conn.close()

    async def _run(self, conn: KeepAliveConnection) -> None:
        status, _, _ = await conn.request(
            "GET", f"/exp?hitId=BENCH&assignmentId={self.assignment}&workerId={self.worker}&mode=live")
        assert status == 200, status
        cookie = {"Cookie": conn.cookie}
        sync = "/sync/" + quote(self.uid, safe="")  # psiturk.js (Backbone) percent-encodes the id
        status, _, raw = await conn.request("GET", sync)
        assert status == 200, status
        now = int(time.time() * 1000)
        blob = json.loads(raw) | {
            "currenttrial": 0, "data": [], "questiondata": {}, "useragent": "bench", "mode": "live",
            "eventdata": [{"eventtype": "initialized", "value": None, "timestamp": now, "interval": 0},
                          {"eventtype": "window_resize", "value": [1280, 720], "timestamp": now,
                           "interval": 0}]}
        headers = cookie | {"Content-Type": "application/json"}
        for i in range(self.n):
            word, color, relation = STIMS[i % len(STIMS)]
            response = ("red", "green", "blue")[int(self.rng.integers(3))]
            blob["data"].append({"uniqueid": self.uid, "current_trial": i,
                                 "dateTime": int(time.time() * 1000), "trialdata": {
                                     "phase": "TEST", "word": word, "color": color,
                                     "relation": relation, "response": response,
                                     "hit": response == color, "rt": int(self.rng.integers(350, 1500))}})
            blob["currenttrial"] = i + 1
            body = json.dumps(blob).encode()
            start = time.perf_counter()
            while True:
                status, _, _ = await conn.request("PUT", sync, body, headers)
                if status == 200:
                    break
                assert status >= 500, status
                await asyncio.sleep(0.05)
            self.latencies.append((time.perf_counter() - start) * 1000)
        status, _, _ = await conn.request("GET", f"/complete?uniqueId={quote(self.uid)}&mode=live")
        assert status == 200, status


async def drive(base: str, participants: int, trials: int, concurrency: int, seed: int):
    rng = np.random.default_rng(seed)
    people = [PsiturkParticipant(i, trials, np.random.default_rng(rng.integers(2**32)))
              for i in range(participants)]
    host, port = base.removeprefix("http://").split(":")
    gate = asyncio.Semaphore(concurrency)

    async def one(p: PsiturkParticipant) -> None:
        async with gate:
            await p.run(host, int(port))

    start = time.perf_counter()
    await asyncio.gather(*(one(p) for p in people))
    return people, time.perf_counter() - start


def check_storage(database_url: str, people: list[PsiturkParticipant], trials: int) -> tuple[bool, int]:
    """Exactly ``trials`` records per participant, positions 0..n-1; and the bytes stored."""
    import sqlalchemy as sa

    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT a.uniqueid, count(*), count(DISTINCT t.position), min(t.position), "
            "max(t.position) FROM psiturk_trial t JOIN psiturk_assignment a "
            "ON a.id = t.assignment_id GROUP BY a.uniqueid")).all()
        stored = sum(conn.execute(sa.text(f"SELECT coalesce(sum(length({col})), 0) FROM {table}"))
                     .scalar_one() for table, col in (("psiturk_trial", "record"),
                                                      ("psiturk_event", "record"),
                                                      ("psiturk_question", "value")))
    engine.dispose()
    got = {uid: tuple(rest) for uid, *rest in rows}
    ok = all(got.get(p.uid) == (trials, trials, 0, trials - 1) for p in people)
    return ok, int(stored)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--participants", type=int, default=50)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--database-url", help="database for the server (default: temp SQLite)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--server", default=DEFAULT_SERVER, choices=["granian", "gunicorn"],
                        help="app server (as bench/ingest.py)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="humanlike-psiturk-bench-"))
    database_url = args.database_url or f"sqlite:///{tmp / 'bench.sqlite'}"
    os.environ["HUMANLIKE_PSITURK"] = str(example_project(tmp))
    stack, base = start_servers("", database_url, tmp / "instance", args.server)  # type: ignore[arg-type]  # no spec
    try:
        people, seconds = asyncio.run(
            drive(base, args.participants, args.trials, args.concurrency, args.seed))
        ok, stored = check_storage(database_url, people, args.trials)
    except BaseException:
        print(server_logs(stack), file=sys.stderr)
        raise
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)
    lat = np.concatenate([p.latencies for p in people])
    total = len(lat)
    print(f"wall {seconds:.1f} s for {total} saves; {os.cpu_count()} cores; stored "
          f"{stored / total:.0f} bytes per trial", file=sys.stderr)
    print(json.dumps({
        "trials_per_s": round(total / seconds, 1),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "bytes_stored": stored,
        "stored_ok": bool(ok and total == args.participants * args.trials),
    }))


if __name__ == "__main__":
    main()
