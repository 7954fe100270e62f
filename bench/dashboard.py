"""Dashboard benchmark: a study of 2,000 participants x 820 rating trials (10 categories) in the
database; p50/p99 of the experiments page, the experiment page (first page sorted by a QC column) and
a participant page; the live panel's background refresh time; and participants' trial latency
(the shipped app server, granian unless --server gunicorn) without and while the panel is
computed in another process.

The panel worker runs as in production (``humanlike panel-worker``, at nice 10): its first pass
reads every trial (``panel_seconds``, ``trial_*_during_panel``); the live participants' trials
change the data meanwhile, and its next pass reads only theirs (``*_next_pass``).

The experiment is listed on Prolific (a study id, its numbers as a sync leaves them, bonuses paid
to a tenth of the participants), so the experiment page carries the listing panel (issue 27).

Ends with one JSON line: {"pages_p99_ms": <worst page p99>, "panel_seconds": ...,
"trial_p99_ms_during_panel": ..., ...}. Targets: pages p99 <= 200 ms, panel <= 60 s, trial
requests no slower while it runs. ``--pages-only`` stops after the page timings.

``--sizes`` measures instead what a browser downloads (issue 45: at 300 participants the panel
was 9 MB, nearly all one kappa-matrix SVG, embedded in the experiment page and fetched again every
5 s even when folded): a 300 x 200 rating study (60,000 trials, so the panel also scores the
rating trials as decisions: a 300-observer kappa matrix), the panel computed once in process with
``--n-resamples``; the experiment page's bytes, the panel fragment's, a poll of the unchanged
panel (a 304) and the panel pass's seconds. Targets, what a browser tab handles without stalling:
experiment page <= 200 kB, panel <= 1 MB, poll of an unchanged panel 0 bytes.

    .venv/bin/python bench/dashboard.py [--participants 2000] [--trials 820] [--database-url URL]
                                        [--pages-only]
    .venv/bin/python bench/dashboard.py --sizes [--participants 300] [--trials 200]
                                        [--n-resamples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export import drop_schema, fill_database, private_schema  # the export bench's builders
from ingest import build_bench_experiment, drive, start_servers

from humanlike.deploy.stack import DEFAULT_SERVER, SERVERS


def percentiles(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(samples, 50)), 1),
            "p99_ms": round(float(np.percentile(samples, 99)), 1), "n": len(samples)}


def time_authenticity(app: Any) -> None:
    """The authenticity screen's passes, printed: the first (every trial read), a second with no
    new trials (the kept rows screened again), and the size of the rows kept between passes."""
    import sqlalchemy as sa

    from humanlike.server.extensions import db
    from humanlike.server.live import authenticity
    from humanlike.server.tables.core import Experiment

    with app.app_context():
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "bench")).scalar_one()
        for which in ("first", "unchanged"):
            start = time.perf_counter()
            authenticity.refresh_authenticity(exp)
            print(f"authenticity screen, {which} pass: {time.perf_counter() - start:.1f} s", flush=True)
        kept = sum(a.nbytes for rows in authenticity._ROWS.values() for person in rows.rows.values()
                   for a in person.values())
        print(f"authenticity rows kept between passes: {kept / 2**20:.0f} MB", flush=True)


def time_pages(url: str, spec: Path, repeats: int) -> tuple[dict[str, dict[str, float]], float]:
    """Page latencies through the Flask app (in process, logged in); the initial QC pass's time;
    then the authenticity screen's passes (``time_authenticity``)."""
    import sqlalchemy as sa

    from humanlike.server import create_app
    from humanlike.server.extensions import db
    from humanlike.server.live.qc import refresh_qc
    from humanlike.server.tables.core import AdminUser, Experiment, Participant

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench",
                      "EXPERIMENT_PATHS": [str(spec)], "WTF_CSRF_ENABLED": False})
    with app.app_context():
        user = AdminUser(username="bench")
        user.set_password("bench password")
        db.session.add(user)
        db.session.commit()
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "bench")).scalar_one()
        list_on_prolific(exp)
        start = time.perf_counter()
        refresh_qc(exp)  # first pass: every participant's QC (later passes only the changed ones)
        qc_seconds = time.perf_counter() - start
        n = db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar_one()
        public_id = db.session.execute(sa.select(Participant.public_id).order_by(Participant.id)
                                       .offset(n // 2).limit(1)).scalar_one()
    client = app.test_client()
    assert client.post("/admin/login", data={"username": "bench",
                                             "password": "bench password"}).status_code == 302
    pages = {"experiments": "/admin/",
             "experiment_sorted_by_qc": "/admin/experiments/bench?sort=catch_accuracy&order=desc",
             "experiment_with_listing": "/admin/experiments/bench",
             "experiment_rows_fragment": "/admin/experiments/bench/rows?sort=median_rt_ms",
             "participant": f"/admin/participants/{public_id}"}
    out = {}
    for name, path in pages.items():
        assert client.get(path).status_code == 200  # warm
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            resp = client.get(path)
            samples.append((time.perf_counter() - start) * 1000)
            assert resp.status_code == 200
        out[name] = percentiles(samples)
        print(f"{name:28s} {out[name]}", flush=True)
    time_authenticity(app)
    listed, unlisted = listing_cost(app, client, repeats)
    print(f"{'listing panel: with':28s} {listed}\n{'listing panel: without':28s} {unlisted}",
          flush=True)
    out["experiment_listed_interleaved"], out["experiment_unlisted_interleaved"] = listed, unlisted
    return out, qc_seconds


def listing_cost(app, client, repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """The experiment page with and without its Prolific listing, sampled alternately (the same
    machine load for both): what the listing panel adds."""
    import sqlalchemy as sa

    from humanlike.server.extensions import db
    from humanlike.server.tables.core import Experiment

    def listed(on: bool) -> None:
        with app.app_context():
            db.session.execute(sa.update(Experiment).where(Experiment.slug == "bench").values(
                recruitment_ref="6000000000000000000bench" if on else None))
            db.session.commit()

    samples: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for on in (True, False):
            listed(on)
            start = time.perf_counter()
            assert client.get("/admin/experiments/bench").status_code == 200
            samples[on].append((time.perf_counter() - start) * 1000)
    listed(True)
    return percentiles(samples[True]), percentiles(samples[False])


def list_on_prolific(exp) -> None:
    """Make the bench experiment a Prolific one with a listing, as ``recruit prolific create``,
    ``publish`` and a sync leave it, and bonuses paid to every tenth participant."""
    import datetime as dt

    import sqlalchemy as sa

    from humanlike.server.extensions import db
    from humanlike.server.tables.core import Participant, Payment

    exp.platform = "prolific"
    exp.recruitment_ref = "6000000000000000000bench"
    exp.recruitment_meta = {"status": "ACTIVE", "platform_status": "ACTIVE",
                            "synced_at": dt.datetime.now(dt.UTC).isoformat(),
                            "study_places_taken": 2000, "study_total_available_places": 2000,
                            "study_reward": 150, "study_estimated_completion_time": 10,
                            "hooks": {"subscriptions": {}}}
    ids = db.session.execute(sa.select(Participant.id).order_by(Participant.id)).scalars().all()
    now = dt.datetime.now(dt.UTC)
    db.session.execute(sa.insert(Payment), [
        {"participant_id": pid, "reason": "accuracy", "amount": 0.5, "idempotency_key": f"bench{pid}",
         "status": "paid", "actor": "bench", "created_at": now, "paid_at": now,
         "reply": {"created": {"fees": 16.67}}} for pid in ids[::10]])
    db.session.execute(sa.update(Participant).where(Participant.id.in_(ids[::10]))
                       .values(bonus=0.5))
    db.session.commit()


SIZE_LIMITS = {"experiment_page_kb": 200, "panel_kb": 1024, "panel_poll_bytes": 0}
"""What a browser tab handles without stalling (see the module's docstring)."""


def sizes(url: str, spec: Path) -> dict[str, object]:
    """Bytes of the experiment page, the panel fragment and a poll of the unchanged panel, after
    one in-process panel pass (its seconds)."""
    import sqlalchemy as sa

    from humanlike.server import create_app
    from humanlike.server.extensions import db
    from humanlike.server.live.panel import refresh
    from humanlike.server.tables.core import AdminUser, Experiment

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench",
                      "EXPERIMENT_PATHS": [str(spec)], "WTF_CSRF_ENABLED": False})
    with app.app_context():
        user = AdminUser(username="bench")
        user.set_password("bench password")
        db.session.add(user)
        db.session.commit()
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "bench")).scalar_one()
        start = time.perf_counter()
        assert refresh(exp, force=True)
        seconds = time.perf_counter() - start
    client = app.test_client()
    assert client.post("/admin/login", data={"username": "bench",
                                             "password": "bench password"}).status_code == 302
    page = client.get("/admin/experiments/bench")
    fragment = client.get("/admin/experiments/bench/panel")
    poll = client.get("/admin/experiments/bench/panel",
                      headers={"If-None-Match": fragment.headers["ETag"]})
    assert page.status_code == fragment.status_code == 200 and poll.status_code == 304
    html = fragment.get_data(as_text=True)
    out: dict[str, object] = {
        "experiment_page_kb": round(len(page.get_data()) / 1024, 1),
        "panel_kb": round(len(fragment.get_data()) / 1024, 1),
        "panel_poll_bytes": len(poll.get_data()), "panel_seconds": round(seconds, 1),
        "kappa_matrix_drawn": 'data-section="ec"' in html and "<image" in html}
    out["within_limits"] = all(float(out[k]) <= v for k, v in SIZE_LIMITS.items())  # type: ignore[arg-type]
    out["limits"] = SIZE_LIMITS
    return out


def vacuum(url: str) -> None:
    """What autovacuum does within a minute of the bulk load (migration 0010 has it visit the
    trial table after every 1% of inserted rows): mark the rows all-visible, for index-only counts."""
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE trial")
        conn.execute("VACUUM ANALYZE participant")


def trial_latencies(base: str, participants: int, trials: int, seed: int) -> list[float]:
    people, _ = asyncio.run(drive(base, participants, trials, participants, seed))
    return [x for p in people for x in p.latencies]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--participants", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=820)
    parser.add_argument("--repeats", type=int, default=30, help="requests per page")
    parser.add_argument("--live", type=int, default=2, help="participants posting trials at once")
    parser.add_argument("--database-url", default=None, help="default: a SQLite file in a temp dir")
    parser.add_argument("--pages-only", action="store_true",
                        help="stop after the page timings (no app server, no panel worker)")
    parser.add_argument("--server", choices=SERVERS, default=DEFAULT_SERVER,
                        help="app server the participants post to (the shipped deploy/ config)")
    parser.add_argument("--sizes", action="store_true",
                        help="measure the bytes a browser downloads instead (defaults: 300 "
                             "participants x 200 trials) and stop")
    parser.add_argument("--n-resamples", type=int, default=200,
                        help="the panel's bootstrap resamples with --sizes")
    args = parser.parse_args()
    if args.sizes:
        participants = 300 if args.participants == 2000 else args.participants
        trials = 200 if args.trials == 820 else args.trials
        with tempfile.TemporaryDirectory(prefix="humanlike-bench-sizes-") as tmp:
            spec = build_bench_experiment(Path(tmp) / "exp", trials)
            spec.write_text(spec.read_text() + f"\n[panel]\nn_resamples = {args.n_resamples}\n")
            url = f"sqlite:///{Path(tmp) / 'bench.sqlite'}"
            fill_database(url, spec, participants, trials)
            result = sizes(url, spec)
        print(json.dumps({**result, "participants": participants, "trials": trials,
                          "n_resamples": args.n_resamples}))
        return

    from humanlike.server.config import normalise_database_url

    with tempfile.TemporaryDirectory(prefix="humanlike-bench-dash-") as tmp:
        folder = Path(tmp)
        spec = build_bench_experiment(folder / "exp", args.trials)
        schema = None
        if args.database_url:
            url, schema = private_schema(normalise_database_url(args.database_url))
        else:
            url = f"sqlite:///{folder / 'bench.sqlite'}"
        try:
            start = time.perf_counter()
            fill_database(url, spec, args.participants, args.trials)
            if schema is not None:
                vacuum(url)
            print(f"filled {args.participants} x {args.trials} in {time.perf_counter() - start:.0f} s",
                  flush=True)
            pages, qc_seconds = time_pages(url, spec, args.repeats)
            print(f"initial QC of every participant: {qc_seconds:.1f} s", flush=True)
            if args.pages_only:
                print(json.dumps({"pages_p99_ms": max(p["p99_ms"] for p in pages.values()),
                                  "pages": pages, "participants": args.participants,
                                  "trials": args.trials, "database": url.split(":")[0]}))
                return

            servers, base = start_servers(spec, url, folder / "instance", args.server)
            try:
                quiet = trial_latencies(base, args.live, args.trials, 1)
                env = dict(os.environ, DATABASE_URL=url, HUMANLIKE_EXPERIMENTS=str(spec),
                           SECRET_KEY="bench", HUMANLIKE_INSTANCE=str(folder / "instance"))
                code = "import sys; from humanlike.cli import main; sys.exit(main())"
                start = time.perf_counter()
                worker = subprocess.Popen([sys.executable, "-c", code, "panel-worker",
                                           "--interval", "1"], env=env)
                try:
                    # the first pass reads every trial; the live participants' trials meanwhile
                    # change the data, so the worker's next pass reads only theirs
                    during, cold = drive_until_pass(base, args, url, worker, None)
                    panel_wall = time.perf_counter() - start
                    during_warm, warm = drive_until_pass(base, args, url, worker, cold)
                finally:
                    worker.terminate()
                    worker.wait(30)
            finally:
                servers.close()
            panel_seconds, warm_seconds = cold[1], warm[1]
        finally:
            if schema is not None:
                drop_schema(url, schema)
    result = {
        "pages_p99_ms": max(p["p99_ms"] for p in pages.values()),
        "panel_seconds": round(panel_seconds, 1),
        "trial_p99_ms_during_panel": percentiles(during)["p99_ms"],
        "trial_p99_ms_quiet": percentiles(quiet)["p99_ms"],
        "trial_p50_ms_quiet": percentiles(quiet)["p50_ms"],
        "trial_p50_ms_during_panel": percentiles(during)["p50_ms"],
        "panel_seconds_next_pass": round(warm_seconds, 1),
        "trial_p99_ms_during_next_pass": percentiles(during_warm)["p99_ms"],
        "trial_p50_ms_during_next_pass": percentiles(during_warm)["p50_ms"],
        "panel_wall_seconds": round(panel_wall, 1), "initial_qc_seconds": round(qc_seconds, 1),
        "pages": pages, "participants": args.participants, "trials": args.trials,
        "database": url.split(":")[0], "server": args.server,
    }
    print(json.dumps(result))


def stored_pass(url: str) -> tuple[str, float] | None:
    """The stored panel's (computed_at, seconds), None before the first pass."""
    import sqlalchemy as sa

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT computed_at, seconds FROM panel_result")).first()
    engine.dispose()
    return None if row is None or row[0] is None else (str(row[0]), float(row[1]))


def drive_until_pass(base: str, args: argparse.Namespace, url: str, worker: subprocess.Popen,
                     after: tuple[str, float] | None) -> tuple[list[float], tuple[str, float]]:
    """Trial latencies of the live participants until the worker stores a pass newer than
    ``after``; that pass."""
    during: list[float] = []
    while (done := stored_pass(url)) is None or done == after:
        assert worker.poll() is None, f"the panel worker exited with {worker.returncode}"
        during += trial_latencies(base, args.live, args.trials, len(during) + 2)
    return during, done


if __name__ == "__main__":
    main()
