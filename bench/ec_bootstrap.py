"""Benchmark: 10,000 bootstrap resamples of a full 13 x 13 kappa matrix.

Times ``kappa_matrix(..., n_resamples=10_000)`` (point estimates, 10,000 stimulus resamples carried
through the summaries, percentile intervals) on the 160-trial model-vs-human edge data and on
1,280 synthetic trials of 13 observers (10 humans, 3 models). Best of ``--repeats`` runs after
one warm-up. Ends with one JSON line: ``{"seconds_160": ..., "seconds_1280": ...}``.
Run: ``.venv/bin/python bench/ec_bootstrap.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import pandas as pd

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.error_consistency import kappa_matrix
from humanlike.analysis.io import read_model_vs_human

N_RESAMPLES = 10_000


def synthetic_trials(n_trials: int = 1280, seed: int = 0) -> pd.DataFrame:
    """13 observers whose correctness partly copies a shared latent difficulty (copy model)."""
    rng = np.random.default_rng(seed)
    latent = rng.random(n_trials) < 0.75
    rows = []
    specs = [(f"subject-{i:02d}", "human", 0.5) for i in range(1, 11)]
    specs += [("model-a", "model", 0.2), ("model-b", "model", 0.1), ("model-c", "model", 0.3)]
    for name, group, p_copy in specs:
        own = rng.random(n_trials) < rng.uniform(0.6, 0.85)
        correct = np.where(rng.random(n_trials) < p_copy, latent, own)
        rows.append(
            pd.DataFrame(
                {
                    "observer": name,
                    "group": group,
                    "stimulus": np.arange(n_trials),
                    "correct": correct,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def best_time(trials: pd.DataFrame, repeats: int) -> tuple[float, float]:
    """Return the fastest wall time and CPU time of ``repeats`` runs after one warm-up run.

    CPU time (all threads of this process) shows the cost of the work itself when other jobs
    compete for the two cores and inflate the wall time.
    """
    kappa_matrix(trials, group="group", n_resamples=N_RESAMPLES, random_state=0)
    wall, cpu = [], []
    for r in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = kappa_matrix(trials, group="group", n_resamples=N_RESAMPLES, random_state=r)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    assert result.pair_distribution.shape == (N_RESAMPLES, 78)
    return min(wall), min(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    edge = read_model_vs_human(shared_data_dir() / "model-vs-human" / "raw-data" / "edge")
    synthetic = synthetic_trials()
    assert edge["observer"].nunique() == 13 and edge["stimulus"].nunique() == 160
    seconds_160, cpu_160 = best_time(edge, args.repeats)
    print(f"edge, 160 trials: {seconds_160:.3f} s (cpu {cpu_160:.3f} s)", file=sys.stderr)
    seconds_1280, cpu_1280 = best_time(synthetic, args.repeats)
    print(f"synthetic, 1280 trials: {seconds_1280:.3f} s (cpu {cpu_1280:.3f} s)", file=sys.stderr)
    print(
        json.dumps({"seconds_160": round(seconds_160, 4), "seconds_1280": round(seconds_1280, 4)})
    )


if __name__ == "__main__":
    main()
