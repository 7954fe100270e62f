"""Report benchmark: ``humanlike report`` on a 300 participants x 820 rating-trial study plus a
1,450-sequence MLDS export, as a user runs it.

    python bench/report.py [--participants 300] [--trials 820] [--n-resamples 1000]

The rating study is the export benchmark's (bench/export.py: a database filled directly, then
``humanlike export``); two models with seeded random probabilities score it. The triads are the MLDS
benchmark's 1,450 simulated sequences (bench/mlds.py), each given to one of the participants and
written as the export's triads table. The timed part is ``humanlike report`` in a subprocess;
prints one JSON line {"seconds": ..., "peak_mb": ..., "report_mb": ...} (peak resident memory of
that process; the report's size). Target: the report stays under ``BROWSER_MB`` (5 MB), what a
browser opens without stalling (issue 45: the 300-observer kappa matrix alone made it 22.7 MB).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export import N_STIMULI, fill_database, run_export
from ingest import LABELS, build_bench_experiment
from mlds import simulate as simulate_triads

BROWSER_MB = 5.0
"""The largest report a browser opens without stalling (the bench's target)."""

_REPORT = """
import json, resource, sys
from humanlike.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
      file=sys.stderr)
sys.exit(code)
"""


def model_responses(stimuli: pd.Series, seed: int = 0) -> pd.DataFrame:
    """Two models' random probabilities for every stimulus and category."""
    rng = np.random.default_rng(seed)
    frames = []
    for model in ("model_a", "model_b"):
        p = rng.dirichlet(np.ones(len(LABELS)), size=len(stimuli))
        frames.append(pd.DataFrame({
            "model": model, "stimulus": np.repeat(stimuli.to_numpy(), len(LABELS)),
            "category": np.tile(LABELS, len(stimuli)), "probability": p.ravel()}))
    return pd.concat(frames, ignore_index=True)


def add_triads(out: Path) -> int:
    """The MLDS benchmark's sequences as the export's triads table (one participant each)."""
    people = pd.read_csv(out / "participants.csv", dtype={"participant": str})["participant"]
    triads = simulate_triads(0)
    triads["sequence"] = "seq" + triads["sequence"].astype(str).str.zfill(4)
    codes = triads["sequence"].str[3:].astype(int) % len(people)
    triads.insert(0, "participant", people.to_numpy()[codes.to_numpy()])
    triads["trial_type"] = "triad"
    triads.to_parquet(out / "triads.parquet", index=False)
    return len(triads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=300)
    parser.add_argument("--trials", type=int, default=820)
    parser.add_argument("--n-resamples", type=int, default=1000)
    parser.add_argument("--keep", type=Path, default=None,
                        help="build the export in this folder and keep it (reused when present)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        folder = args.keep or Path(tmp)
        spec = folder / "exp" / "experiment.toml"
        if not (folder / "models.csv").is_file():
            spec = build_bench_experiment(folder / "exp", N_STIMULI)
            url = f"sqlite:///{folder / 'bench.sqlite'}"
            fill_database(url, spec, args.participants, args.trials)
            run_export(url, folder / "out", folder / "instance")
            for stale in (folder / "out").glob("triads.*"):
                stale.unlink()
            n_triads = add_triads(folder / "out")
            stimuli = pd.read_parquet(folder / "out" / "stimuli.parquet")["stimulus"]
            model_responses(stimuli).to_csv(folder / "models.csv", index=False)
            print(f"export ready: {n_triads} triads", file=sys.stderr)
        t0 = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", _REPORT, "report", str(folder / "out"), "--models",
             str(folder / "models.csv"), "--spec", str(spec), "--out",
             str(folder / "report.html"), "--n-resamples", str(args.n_resamples)],
            check=True, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - t0
        sys.stderr.write(run.stderr[-3000:])
        peak = json.loads(run.stderr.strip().splitlines()[-1])["peak_mb"]
        size_mb = (folder / "report.html").stat().st_size / 2**20
        print(json.dumps({"participants": args.participants, "rating_trials":
                          args.participants * args.trials, "mlds_sequences": 1450,
                          "report_mb": round(size_mb, 1), "under_browser_limit":
                          size_mb <= BROWSER_MB, "seconds": round(seconds, 1),
                          "peak_mb": round(peak)}))


if __name__ == "__main__":
    main()
