"""Benchmark: fit 1,450 MLDS triad scales of 1,860 responses each in one batched fit.

Simulated observers (seed 0): 7 levels, triads drawn uniformly from the 35, standard scale
psi = (level / 6) ** g with g ~ U(0.5, 2.5) per sequence, decision noise sigma = 0.15. The timed
part is ``fit_many(df, by="sequence")`` on the tidy frame (2.7 million rows: validation,
canonical order, collapsing to counts, batched Newton fit); best of 3 runs. ``peak_mb`` is the
peak of memory allocated during one fit (tracemalloc). Outside the timed part, 20 scales are
refitted one at a time with statsmodels' probit GLM and must agree to 1e-8. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc

import numpy as np
import pandas as pd

from humanlike.analysis.mlds.batch import fit_many
from humanlike.analysis.mlds.estimator import MLDS
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.stimuli.mlds_design import all_triads

N_SEQUENCES, N_TRIALS, N_LEVELS, SIGMA = 1450, 1860, 7, 0.15


def simulate(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    gamma = rng.uniform(0.5, 2.5, N_SEQUENCES)
    psi = (np.arange(N_LEVELS) / (N_LEVELS - 1))[None, :] ** gamma[:, None]
    triads = all_triads(N_LEVELS)
    levels = triads[rng.integers(0, len(triads), N_SEQUENCES * N_TRIALS)]
    sequence = np.repeat(np.arange(N_SEQUENCES), N_TRIALS)
    response = simulate_responses(levels, psi, SIGMA, group=sequence, random_state=rng)
    return pd.DataFrame({"sequence": sequence, "s1": levels[:, 0], "s2": levels[:, 1],
                         "s3": levels[:, 2], "response": response})


def main() -> None:
    df = simulate(0)
    fit_many(df.iloc[:N_TRIALS * 4])  # warm-up (imports, first-touch allocations)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fits = fit_many(df, by="sequence")
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    fit_many(df, by="sequence")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    assert fits.converged.all() and len(fits.keys) == N_SEQUENCES
    sample = np.random.default_rng(1).choice(N_SEQUENCES, 20, replace=False)
    worst = 0.0
    for i in sample:  # one-at-a-time reference, outside the timed part
        one = MLDS("triads", method="glm").fit(df[df["sequence"] == fits.keys["sequence"][i]])
        worst = max(worst, float(np.max(np.abs(one.scale_ - fits.scale[i]))))
    if worst > 1e-8:
        raise SystemExit(f"batched and one-at-a-time scales differ by {worst:.3g} > 1e-8")
    print(f"checked {len(sample)} scales against statsmodels GLM: max |diff| = {worst:.2e}; "
          f"runs: {', '.join(f'{t:.3f}' for t in times)} s", file=sys.stderr)
    print(json.dumps({"seconds": round(min(times), 4), "peak_mb": round(peak / 2**20, 1),
                      "n_scales": len(fits.keys)}))


if __name__ == "__main__":
    main()
