"""Ingest benchmark: simulated participants send trials one request each through the real HTTP API.

    python bench/ingest.py --participants 50 --trials 200 --concurrency 25 [--url URL] [--database-url URL]

Without --url it builds a bench experiment, prepares the database (a temporary SQLite file, or
--database-url) and starts gunicorn (2 gthread workers) on a free port, then stops it afterwards.
Every participant follows a browser's path: entry link -> task page (token) -> consent -> timeline ->
one POST per trial, sequentially -> complete. At the end every trial is checked to be stored exactly
once, and one JSON line is printed: trials_per_s, p50_ms, p99_ms, bytes_sent, stored_ok.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

LABELS = [str(d) for d in range(10)]
SPEC = """\
slug = "bench"
title = "Ingest benchmark"
platform = "prolific"
consent = "consent.md"
instructions = "instructions.md"
manifest = "stimuli/manifest.csv"
[completion]
prolific_code = "BENCH001"
{categories}
[[blocks]]
name = "ratings"
trial_type = "rating"
kinds = ["natural"]
"""


def build_bench_experiment(folder: Path, n_trials: int) -> Path:
    """A rating experiment with exactly ``n_trials`` trials (tiny PNG stimuli)."""
    from PIL import Image

    stim = folder / "stimuli"
    stim.mkdir(parents=True, exist_ok=True)
    rows = ["file,kind,true_class"]
    for i in range(n_trials):
        Image.new("L", (8, 8), color=i % 256).save(stim / f"s{i:05d}.png")
        rows.append(f"s{i:05d}.png,natural,{i % 10}")
    (stim / "manifest.csv").write_text("\n".join(rows) + "\n")
    cats = "".join(f'[[categories]]\nlabel = "{d}"\nkey = "{d}"\n' for d in LABELS)
    (folder / "experiment.toml").write_text(SPEC.format(categories=cats))
    (folder / "consent.md").write_text("consent\n")
    (folder / "instructions.md").write_text("instructions\n")
    return folder / "experiment.toml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(spec: Path, database_url: str, instance: Path) -> tuple[subprocess.Popen, str]:
    """Prepare the database and start gunicorn; return the process and its base URL."""
    env = dict(os.environ, HUMANLIKE_EXPERIMENTS=str(spec), DATABASE_URL=database_url,
               SECRET_KEY=secrets.token_hex(16), HUMANLIKE_INSTANCE=str(instance))
    prepare = (
        "from humanlike.server import create_app, database, experiments\n"
        "app = create_app(); database.upgrade(app); experiments.sync_all(app)\n"
    )
    subprocess.run([sys.executable, "-c", prepare], env=env, check=True, capture_output=True)
    port = free_port()
    gunicorn = Path(sys.executable).with_name("gunicorn")
    proc = subprocess.Popen(
        [str(gunicorn), "--workers", "2", "--worker-class", "gthread", "--threads", "8",
         "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "--keep-alive", "30",
         "humanlike.server:create_app()"],
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gunicorn did not start")


def _request_bytes(request: httpx.Request) -> int:
    head = f"{request.method} {request.url.raw_path.decode()} HTTP/1.1\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in request.headers.items()) + "\r\n"
    return len(head.encode()) + len(request.content or b"")


class Participant:
    """One simulated browser: its own cookie jar and connection."""

    def __init__(self, base: str, slug: str, n: int, rng: np.random.Generator):
        self.base, self.slug, self.n, self.rng = base, slug, n, rng
        self.platform_id = f"bench-{secrets.token_hex(6)}"
        self.latencies: list[float] = []
        self.bytes_sent = 0
        self.pid = self.token = ""

    async def _send(self, client: httpx.AsyncClient, method: str, url: str, **kw) -> httpx.Response:
        request = client.build_request(method, url, **kw)
        self.bytes_sent += _request_bytes(request)
        return await client.send(request)

    async def run(self) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(base_url=self.base, limits=limits, timeout=30) as client:
            entry = await self._send(client, "GET", f"/start/{self.slug}?PROLIFIC_PID={self.platform_id}"
                                     "&STUDY_ID=bench&SESSION_ID=s")
            self.pid = entry.headers["location"].rstrip("/").split("/")[-1]
            page = await self._send(client, "GET", f"/task/{self.pid}")
            self.token = re.search(r'"token": ?"([^"]+)"', page.text).group(1)
            client.cookies.clear()  # the task page's fetch() calls send no cookies (credentials: omit)
            headers = {"Authorization": f"Bearer {self.token}"}
            api = f"/api/v1/participants/{self.pid}"
            await self._send(client, "POST", api + "/consent", json={"agree": True}, headers=headers)
            timeline = (await self._send(client, "GET", api + "/timeline", headers=headers)).json()
            assert timeline["n_trials"] == self.n, timeline["n_trials"]
            levels = self.rng.integers(0, 5, size=(self.n, len(LABELS))) / 4
            for t in timeline["trials"]:
                body = {"trial_index": t["index"], "trial_type": "rating",
                        "response": {"ratings": dict(zip(LABELS, levels[t["index"]].tolist()))},
                        "rt_ms": float(self.rng.uniform(400, 3000)), "first_rt_ms": 350.0,
                        "presented_ms": 1000.0, "frames": 60, "client_time": time.time() * 1000}
                start = time.perf_counter()
                while True:
                    resp = await self._send(client, "POST", api + "/trials", json=body, headers=headers)
                    if resp.status_code in (200, 201):
                        break
                    await asyncio.sleep(0.05)  # 5xx: retry as the browser would
                self.latencies.append((time.perf_counter() - start) * 1000)
            done = await self._send(client, "POST", api + "/complete", headers=headers)
            assert done.status_code == 200, done.text


async def drive(base: str, participants: int, trials: int, concurrency: int, seed: int):
    rng = np.random.default_rng(seed)
    people = [Participant(base, "bench", trials, np.random.default_rng(rng.integers(2**32)))
              for _ in range(participants)]
    gate = asyncio.Semaphore(concurrency)

    async def one(p: Participant) -> None:
        async with gate:
            await p.run()

    start = time.perf_counter()
    await asyncio.gather(*(one(p) for p in people))
    return people, time.perf_counter() - start


async def verify(base: str, people: list[Participant], trials: int) -> bool:
    """Every participant's timeline reports exactly trials 0..n-1 stored."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for p in people:
            tl = (await client.get(f"/api/v1/participants/{p.pid}/timeline",
                                   headers={"Authorization": f"Bearer {p.token}"})).json()
            if tl["acknowledged"] != list(range(trials)):
                return False
    return True


def count_rows(database_url: str, people: list[Participant], trials: int) -> bool:
    """Directly in the database: exactly ``trials`` rows per participant, no duplicates."""
    import sqlalchemy as sa

    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT p.public_id, count(*), count(DISTINCT t.trial_index) FROM trial t "
            "JOIN participant p ON p.id = t.participant_id GROUP BY p.public_id")).all()
    engine.dispose()
    got = {pid: (n, distinct) for pid, n, distinct in rows}
    return all(got.get(p.pid) == (trials, trials) for p in people)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--participants", type=int, default=50)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--url", help="an already running server (with the bench experiment)")
    parser.add_argument("--database-url", help="database for the started server (default: temp SQLite)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="humanlike-bench-"))
    proc = None
    database_url = args.database_url
    base = args.url
    if base is None:
        spec = build_bench_experiment(tmp / "bench", args.trials)
        if database_url is None:
            database_url = f"sqlite:///{tmp / 'bench.sqlite'}"
        proc, base = start_server(spec, database_url, tmp / "instance")
    try:
        people, seconds = asyncio.run(
            drive(base, args.participants, args.trials, args.concurrency, args.seed))
        ok = asyncio.run(verify(base, people, args.trials))
        if database_url:
            ok = ok and count_rows(database_url, people, args.trials)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    lat = np.concatenate([p.latencies for p in people])
    total = len(lat)
    print(json.dumps({
        "trials_per_s": round(total / seconds, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "bytes_sent": int(sum(p.bytes_sent for p in people)),
        "stored_ok": bool(ok and total == args.participants * args.trials),
    }))


if __name__ == "__main__":
    main()
