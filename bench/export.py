"""Export benchmark: ``humanlike export`` of a large rating study, as a user runs it.

    python bench/export.py --participants 2000 --trials 820 [--database-url URL]

Builds a rating experiment with 10 categories, fills the database directly (executemany on
SQLite, COPY on PostgreSQL; every column of a stored trial, ``practice`` included; without
--database-url a temporary SQLite file, with a PostgreSQL URL a private schema that is dropped
afterwards), then runs ``humanlike export`` in a subprocess and prints one JSON line:
participants, trials, seconds (wall time of the export), peak_mb (peak resident memory of the
largest export process) and tree_peak_mb (peak proportional set size of the export process and its
QC worker together, sampled every 0.2 s: the memory the export takes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# the same tiny rating experiment as the ingest benchmark (bench/ingest.py)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import LABELS, build_bench_experiment

LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
N_STIMULI = 200
TRIAL_COLUMNS = ("participant_id", "trial_index", "trial_type", "design", "block", "stimulus_id",
                 "response", "rt_ms", "first_rt_ms", "presented_ms", "frames", "is_repeat",
                 "practice", "client_time", "server_time")



def trial_rows(participant_ids: list[int], stimuli: list[tuple[int, str]], n_trials: int, seed: int = 0):
    """Rating trials of every participant: a realistic design and random ratings (JSON as text)."""
    rng = np.random.default_rng(seed)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for pid in participant_ids:
        levels = rng.integers(0, len(LEVELS), size=(n_trials, len(LABELS)))
        rts = rng.uniform(400, 3000, size=n_trials)
        for i in range(n_trials):
            sid, key = stimuli[(pid + i) % len(stimuli)]
            design = {"index": i, "type": "rating", "block": "ratings", "practice": False,
                      "stimulus": key, "stimulus_id": sid, "kind": "natural", "is_repeat": False}
            response = {"ratings": {lab: LEVELS[v] for lab, v in zip(LABELS, levels[i])}}
            yield (pid, i, "rating", json.dumps(design), "ratings", sid, json.dumps(response),
                   float(rts[i]), float(rts[i]) * 0.6, 1000.0, 60, False, design["practice"],
                   1.767e12 + i * 3000.0, start + dt.timedelta(seconds=pid * 3000 + i * 3))


def fill_database(url: str, spec: Path, n_participants: int, n_trials: int) -> None:
    """Migrate, load the spec, then bulk-insert participants and their trials."""
    import sqlalchemy as sa

    from humanlike.server import create_app, database
    from humanlike.server.extensions import db
    from humanlike.server.study import experiments
    from humanlike.server.tables.core import Experiment, Participant, Stimulus

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench",
                      "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "bench")).scalar_one()
        stimuli = [tuple(r) for r in db.session.execute(
            sa.select(Stimulus.id, Stimulus.key).where(Stimulus.experiment_id == exp.id)).all()]
        now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        db.session.execute(sa.insert(Participant), [
            {"public_id": secrets.token_hex(8), "experiment_id": exp.id, "platform": "prolific",
             "platform_id": f"P{i:06d}", "study_id": "bench", "session_id": f"s{i}",
             "condition": "default", "token_hash": "0" * 64, "seed": i, "timeline": {},
             "n_trials": n_trials, "status": "completed", "user_agent": "bench", "refresh_hz": 60.0,
             "created_at": now, "started_at": now, "completed_at": now + dt.timedelta(minutes=40)}
            for i in range(n_participants)])
        db.session.commit()
        ids = list(db.session.execute(
            sa.select(Participant.id).where(Participant.experiment_id == exp.id)
            .order_by(Participant.id)).scalars())
        rows = trial_rows(ids, stimuli, n_trials)
        raw = db.engine.raw_connection()
        try:
            if db.engine.dialect.name == "postgresql":
                cur = raw.cursor()
                with cur.copy(f"COPY trial ({', '.join(TRIAL_COLUMNS)}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                cur = raw.cursor()
                marks = ", ".join("?" * len(TRIAL_COLUMNS))
                sql = f"INSERT INTO trial ({', '.join(TRIAL_COLUMNS)}) VALUES ({marks})"
                batch: list[tuple] = []
                for row in rows:
                    batch.append((*row[:-1], row[-1].strftime("%Y-%m-%d %H:%M:%S.%f")))
                    if len(batch) >= 50_000:
                        cur.executemany(sql, batch)
                        batch.clear()
                cur.executemany(sql, batch)
            raw.commit()
        finally:
            raw.close()
    database.dispose(app)


def _tree_pss_kb(pid: int) -> int:
    """Proportional set size (kB) of ``pid`` and its descendants (shared pages counted once)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
                break
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:  # gone, or not Linux
        return total
    return total + sum(_tree_pss_kb(int(child)) for child in children)


def run_export(url: str, out: Path, instance: Path) -> tuple[float, float]:
    """``humanlike export bench`` in a subprocess (this venv's interpreter); (wall seconds, peak
    MB of the process tree's proportional set size)."""
    code = "import sys; from humanlike.cli import main; sys.exit(main())"
    env = dict(os.environ, HUMANLIKE_INSTANCE=str(instance))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, "export", "bench", "--out", str(out),
                             "--database-url", url], env=env, stdout=sys.stderr)
    peak_kb = 0
    while proc.poll() is None:
        peak_kb = max(peak_kb, _tree_pss_kb(proc.pid))
        time.sleep(0.2)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return seconds, peak_kb / 1024


def private_schema(url: str) -> tuple[str, str]:
    """A fresh PostgreSQL schema; (the URL that uses it, the schema name)."""
    import psycopg

    base = url.split("?")[0]
    schema = "bench_export_" + secrets.token_hex(4)
    dsn = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{base}?options=-csearch_path%3D{schema}", schema


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    dsn = url.split("?")[0].replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=820, help="rating trials per participant")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (default: SQLite)")
    args = parser.parse_args()
    from humanlike.server.config import normalise_database_url

    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        folder = Path(tmp)
        spec = build_bench_experiment(folder / "exp", N_STIMULI)
        schema = None
        if args.database_url and not args.database_url.startswith("sqlite"):
            url, schema = private_schema(normalise_database_url(args.database_url))
        else:
            url = args.database_url or f"sqlite:///{folder / 'bench.sqlite'}"
        try:
            t0 = time.perf_counter()
            fill_database(url, spec, args.participants, args.trials)
            print(f"database filled in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            seconds, tree_peak_mb = run_export(url, folder / "out", folder / "instance")
        finally:
            if schema is not None:
                drop_schema(url, schema)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(json.dumps({"participants": args.participants,
                          "trials": args.participants * args.trials,
                          "seconds": round(seconds, 1), "peak_mb": round(peak_mb),
                          "tree_peak_mb": round(tree_peak_mb)}))


if __name__ == "__main__":
    main()
