"""Benchmark: the alignment profile of model-vs-human edge, silhouette and cue-conflict.

Times ``alignment_profile`` (10 humans, 3 models; 160 + 160 + 1,280 images; every metric for the
'all' regime and four human-difficulty regimes; 1,000 shared resamples of images and humans) and
``double_pass`` and ``variance_split`` on 13 simulated observers (400 repeated trials, 1,000
resamples). Best of ``--repeats`` runs after one warm-up, wall and CPU time; the profile's time
includes its decided differences and the metrics' agreement (``compare_profile``, issue 42 item 5).
Prints the profile table (regime 'all'), the model ranks per regime, the decided pairs and the
metrics' agreement, then one JSON line: ``{"seconds_profile": ..., ...}``. ``--figures DIR``
writes the report's figures of the profile (one per experiment, and the agreement) as PNG.
Run: ``.venv/bin/python bench/alignment.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.analysis.alignment import (
    DEFAULT_EDGES,
    alignment_profile,
    baseline_correct,
    cue_conflict_shape_image,
    double_pass,
    variance_split,
)
from humanlike.analysis.alignment.comparison import compare_profile
from humanlike.analysis.alignment.regimes import regime_labels
from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.io import read_model_vs_human

N_RESAMPLES = 1000
SHOWN = ("accuracy_difference", "error_consistency", "accuracy_distance_ceiled",
         "conditional_error_consistency_ceiled", "shape_bias")


def best_time(run: Callable[[int], object], repeats: int) -> tuple[float, float, object]:
    """Fastest wall and CPU seconds of ``repeats`` runs after one warm-up, and the last result."""
    result = run(0)
    wall, cpu = [], []
    for r in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = run(r)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu), result


def simulated_passes(seed: int, n: int = 400) -> list[tuple[np.ndarray, np.ndarray]]:
    """13 observers (noise ratios .5 to 2) seeing n trials twice."""
    rng = np.random.default_rng(seed)
    out = []
    for gamma in np.linspace(0.5, 2.0, 13):
        external = rng.normal(size=n)
        out.append(tuple(1.0 + external + gamma * rng.normal(size=n) > 0 for _ in range(2)))
    return out


def markdown(frame: pd.DataFrame) -> str:
    """A plain markdown table (no optional dependency)."""
    cells = [[str(c) for c in frame.columns]] + [[str(v) for v in row] for row in
                                                  frame.itertuples(index=False)]
    lines = ["| " + " | ".join(row) + " |" for row in cells]
    lines.insert(1, "|" + " --- |" * len(frame.columns))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--figures", type=Path, default=None,
                        help="Folder for the profile and agreement figures (PNG).")
    args = parser.parse_args()
    raw = shared_data_dir() / "model-vs-human" / "raw-data"
    trials = pd.concat([read_model_vs_human(raw / name)
                        for name in ("edge", "silhouette", "cue-conflict")], ignore_index=True)
    base = baseline_correct(trials[(trials["experiment"] == "silhouette")
                                   & (trials["group"] == "model")])
    baselines = {"edge": (base, str), "cue-conflict": (base, cue_conflict_shape_image)}

    def profile(seed: int):
        return compare_profile(alignment_profile(trials, baselines=baselines,
                                                 n_resamples=N_RESAMPLES, random_state=seed))

    seconds, cpu, comparison = best_time(profile, args.repeats)
    result = comparison.profile
    print(f"alignment_profile + compare_profile, 3 experiments, {N_RESAMPLES} resamples: "
          f"{seconds:.3f} s "
          f"(cpu {cpu:.3f} s)", file=sys.stderr)
    passes = simulated_passes(0)

    def noise(seed: int):
        return [double_pass(a, b, n_resamples=N_RESAMPLES, random_state=seed) for a, b in passes]

    seconds_dp, cpu_dp, _ = best_time(noise, args.repeats)
    print(f"double_pass, 13 observers x 400 repeats, {N_RESAMPLES} resamples: {seconds_dp:.3f} s "
          f"(cpu {cpu_dp:.3f} s)", file=sys.stderr)
    first = np.array([a for a, _ in passes])
    second = np.array([b for _, b in passes])

    def split(seed: int):
        return variance_split(first, second, n_resamples=N_RESAMPLES, random_state=seed)

    seconds_vs, cpu_vs, _ = best_time(split, args.repeats)
    print(f"variance_split, 13 observers x 400 repeats, {N_RESAMPLES} resamples: "
          f"{seconds_vs:.3f} s (cpu {cpu_vs:.3f} s)", file=sys.stderr)
    table = result.table
    shown = table[(table["regime"] == "all") & table["metric"].isin(SHOWN)].copy()
    shown["value"] = [f"{e:.3f} [{lo:.3f}, {hi:.3f}]" for e, lo, hi in
                      shown[["estimate", "ci_low", "ci_high"]].to_numpy()]
    wide = shown.pivot_table(index=["experiment", "observer"], columns="metric", values="value",
                             aggfunc="first").reindex(columns=list(SHOWN)).fillna("")
    print(markdown(wide.reset_index()))
    ranks = table[(table["metric"] == "error_consistency")
                  & ~table["observer"].isin(["humans", "ceiling"])]
    ranks = ranks.assign(rank=ranks.groupby(["experiment", "regime"])["estimate"].rank(
        ascending=False))
    print()
    order = [*regime_labels(DEFAULT_EDGES), "all"]
    print(markdown(ranks.pivot_table(index=["experiment", "observer"], columns="regime",
                                     values="rank").reindex(columns=order).reset_index()))
    decided = comparison.decided
    print()
    print(markdown(decided[decided["decided"]][["experiment", "metric", "a", "b", "difference",
                                                  "p_holm", "more_humanlike"]].round(4)))
    print(f"\n{int(decided['decided'].sum())} of {len(decided)} model differences decided")
    print()
    print(markdown(comparison.agreement.round(3)))
    if args.figures is not None:
        from humanlike.analysis.alignment.plots import plot_agreement, plot_profile
        from humanlike.analysis.figures import save_figure

        for experiment in sorted(set(result.table["experiment"])):
            save_figure(plot_profile(result, experiment), args.figures / f"{experiment}.png",
                        close=True)
        save_figure(plot_agreement(comparison.agreement), args.figures / "agreement.png",
                    close=True)
    print(json.dumps({"seconds_profile": round(seconds, 3), "cpu_profile": round(cpu, 3),
                      "seconds_double_pass": round(seconds_dp, 3), "cpu_double_pass": round(cpu_dp, 3),
                      "seconds_variance_split": round(seconds_vs, 3),
                      "cpu_variance_split": round(cpu_vs, 3)}))


if __name__ == "__main__":
    main()
