"""Ingest benchmark: simulated participants send trials one request each through the real HTTP API.

    python bench/ingest.py --participants 50 --trials 200 --concurrency 25 [--url URL] [--database-url URL]
        [--server {gunicorn,granian}] [--instances N] [--proxy {none,caddy}]

Without --url it builds a bench experiment, prepares the database (a temporary SQLite file, or
--database-url) and starts N app server instances (the shipped deploy/ configuration through
humanlike.deploy.stack; 2 worker processes each, 1 thread each on SQLite, 4 on PostgreSQL), behind
Caddy (the shipped Caddyfile, on loopback) with --proxy caddy, then stops them afterwards.
Every participant follows a browser's path: entry link -> task page (token) -> consent -> timeline ->
one POST per trial, sequentially -> complete. At the end every trial is checked to be stored exactly
once, and one JSON line is printed: trials_per_s, p50_ms, p99_ms, bytes_sent, stored_ok.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from humanlike.deploy.stack import (
    DEFAULT_SERVER,
    LOOPBACK,
    SERVERS,
    AppServer,
    Caddy,
    log_tail,
    running,
)

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


def start_servers(spec: Path, database_url: str, instance: Path, server: str = DEFAULT_SERVER,
                  instances: int = 1, proxy: str = "none") -> tuple[contextlib.ExitStack, str]:
    """Prepare the database and start the app servers (and Caddy); return their stack and base URL."""
    env = dict(HUMANLIKE_EXPERIMENTS=str(spec), DATABASE_URL=database_url,
               SECRET_KEY=secrets.token_hex(16), HUMANLIKE_INSTANCE=str(instance),
               HUMANLIKE_RATE_LIMITS="off")  # every simulated participant arrives from 127.0.0.1
    prepare = (
        "from humanlike.server import create_app, database\nfrom humanlike.server.study import experiments\n"
        "app = create_app(); database.upgrade(app); experiments.sync_all(app)\n"
    )
    subprocess.run([sys.executable, "-c", prepare], env=dict(os.environ, **env), check=True,
                   capture_output=True)
    if proxy != "none":
        env["HUMANLIKE_PROXY_COUNT"] = "1"
    # SQLite has one writer at a time, so extra threads only contend for it (and the GIL); with
    # PostgreSQL a thread waiting on a round trip leaves the GIL to another
    threads = 1 if database_url.startswith("sqlite") else 4
    apps = [AppServer(env, server, workers=2, threads=threads) for _ in range(instances)]
    parts: list[AppServer | Caddy] = list(apps)
    if proxy == "caddy":
        parts.append(Caddy([f"{LOOPBACK}:{a.port}" for a in apps]))
    elif instances > 1:
        raise SystemExit("--instances > 1 needs --proxy caddy (one URL for the participants)")
    stack = contextlib.ExitStack()
    stack.enter_context(running(*parts))
    stack.parts = parts  # type: ignore[attr-defined]  # for server_logs()
    return stack, parts[-1].url


def server_logs(stack: contextlib.ExitStack) -> str:
    """What the servers of ``start_servers`` wrote to stderr (for a run that failed)."""
    return "\n".join(f"--- {type(p).__name__} {p.url} ---\n{log_tail(p.proc)}"
                     for p in getattr(stack, "parts", []) if p.proc is not None)


class KeepAliveConnection:
    """A minimal HTTP/1.1 keep-alive client over asyncio streams, one request in flight at a time.

    The benchmark measures the server, so the load generator must cost far less than it: a general
    client (httpx) spends more CPU per request than the server does on this 2-core machine. Cookies
    are kept only for the entry pages; API calls send none, as the task page's fetch() does."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.cookie = ""
        self.bytes_sent = 0

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                 f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        self.bytes_sent += len(raw)
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        resp_headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                resp_headers[key] = (resp_headers[key] + "; " if key in resp_headers else "") + value.strip()
        content = await self.reader.readexactly(int(resp_headers.get("content-length", 0)))
        if "set-cookie" in resp_headers:
            self.cookie = resp_headers["set-cookie"].split(";", 1)[0]
        if resp_headers.get("connection", "").lower() == "close":
            self.writer.close()
            self.reader = self.writer = None
        return status, resp_headers, content

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class Participant:
    """One simulated browser with its own connection."""

    def __init__(self, base: str, slug: str, n: int, rng: np.random.Generator):
        self.base, self.slug, self.n, self.rng = base, slug, n, rng
        self.platform_id = f"bench-{secrets.token_hex(6)}"
        self.latencies: list[float] = []
        self.bytes_sent = 0
        self.pid = self.token = ""
        self.first_trial_at = self.last_trial_at = 0.0

    async def run(self) -> None:
        host, port = self.base.removeprefix("http://").split(":")
        conn = KeepAliveConnection(host, int(port))
        try:
            await self._run(conn)
        finally:
            self.bytes_sent = conn.bytes_sent
            await conn.close()

    async def _run(self, conn: KeepAliveConnection) -> None:
        status, headers, _ = await conn.request(
            "GET", f"/start/{self.slug}?PROLIFIC_PID={self.platform_id}&STUDY_ID=bench&SESSION_ID=s")
        assert status == 302, status
        self.pid = headers["location"].split("#")[0].rstrip("/").split("/")[-1]
        _, _, page = await conn.request("GET", f"/task/{self.pid}", headers={"Cookie": conn.cookie})
        self.token = re.search(r'"token": ?"([^"]+)"', page.decode()).group(1)
        auth = {"Authorization": f"Bearer {self.token}"}
        post = auth | {"Content-Type": "application/json"}
        api = f"/api/v1/participants/{self.pid}"
        status, _, _ = await conn.request("POST", api + "/consent", b'{"agree": true}', post)
        assert status == 200, status
        status, _, raw = await conn.request("GET", api + "/timeline", headers=auth)
        timeline = json.loads(raw)
        assert timeline["n_trials"] == self.n, timeline["n_trials"]
        levels = self.rng.integers(0, 5, size=(self.n, len(LABELS))) / 4
        self.first_trial_at = time.perf_counter()
        for t in timeline["trials"]:
            body = json.dumps({
                "trial_index": t["index"], "trial_type": "rating",
                "response": {"ratings": dict(zip(LABELS, levels[t["index"]].tolist()))},
                "rt_ms": float(self.rng.uniform(400, 3000)), "first_rt_ms": 350.0,
                "presented_ms": 1000.0, "frames": 60, "client_time": time.time() * 1000,
            }).encode()
            start = time.perf_counter()
            while True:
                status, _, _ = await conn.request("POST", api + "/trials", body, post)
                if status in (200, 201):
                    break
                assert status >= 500, status
                await asyncio.sleep(0.05)  # a 5xx: retry as the browser would
            self.latencies.append((time.perf_counter() - start) * 1000)
        self.last_trial_at = time.perf_counter()
        status, _, _ = await conn.request("POST", api + "/complete", b"{}", post)
        assert status == 200, status


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
    parser.add_argument("--server", choices=SERVERS, default=DEFAULT_SERVER,
                        help="WSGI server of the started instances")
    parser.add_argument("--instances", type=int, default=1,
                        help="app server instances (2 worker processes each)")
    parser.add_argument("--proxy", choices=("none", "caddy"), default="none",
                        help="put Caddy (deploy/Caddyfile) in front, balancing over the instances")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="humanlike-bench-"))
    stack = None
    database_url = args.database_url
    base = args.url
    if base is None:
        spec = build_bench_experiment(tmp / "bench", args.trials)
        if database_url is None:
            database_url = f"sqlite:///{tmp / 'bench.sqlite'}"
        stack, base = start_servers(spec, database_url, tmp / "instance", args.server,
                                    args.instances, args.proxy)
    try:
        people, seconds = asyncio.run(
            drive(base, args.participants, args.trials, args.concurrency, args.seed))
        ok = asyncio.run(verify(base, people, args.trials))
        if database_url:
            ok = ok and count_rows(database_url, people, args.trials)
    finally:
        if stack is not None:
            stack.close()
    lat = np.concatenate([p.latencies for p in people])
    total = len(lat)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    trial_phase = max(p.last_trial_at for p in people) - min(p.first_trial_at for p in people)
    print(f"trial phase alone: {total / trial_phase:.0f} trials/s over {trial_phase:.1f} s", file=sys.stderr)
    print(f"wall {seconds:.1f} s; CPU: client {me.ru_utime + me.ru_stime:.1f} s, "
          f"server + set-up {kids.ru_utime + kids.ru_stime:.1f} s; {os.cpu_count()} cores",
          file=sys.stderr)
    print(json.dumps({
        "trials_per_s": round(total / seconds, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "bytes_sent": int(sum(p.bytes_sent for p in people)),
        "stored_ok": bool(ok and total == args.participants * args.trials),
        "server": None if args.url else args.server,
        "instances": None if args.url else args.instances,
        "proxy": None if args.url else args.proxy,
        "database": (database_url or "").split(":", 1)[0] or None,
    }))


if __name__ == "__main__":
    main()
