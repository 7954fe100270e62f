"""Benchmark: the odd-one-out metric (Brain-Score hebart2023) with 1,000 triplet resamples.

Times ``odd_one_out_score`` on synthetic triplet counts (three responses per triplet, the first
item chosen with probability .6, a model choosing at random) for ``--triplets`` sizes, best of
``--repeats`` runs after one warm-up; THINGS' 4.7 million responses are about 1.5 million such
triplets. Prints one line per size and then one JSON line ``{"seconds": {size: s, ...}}``.
Run: ``.venv/bin/python bench/odd_one_out.py``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from humanlike.analysis.alignment.odd_one_out import odd_one_out_score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--triplets", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    seconds = {}
    for t in args.triplets:
        counts = rng.multinomial(3, [0.6, 0.25, 0.15], size=t)
        choice = rng.integers(0, 3, t)
        odd_one_out_score(counts[:100], choice[:100], n_resamples=10, random_state=0)  # warm-up
        best = np.inf
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = odd_one_out_score(counts, choice, n_resamples=args.resamples, random_state=1)
            best = min(best, time.perf_counter() - start)
        seconds[t] = round(best, 3)
        low, high = result.ci["score"]
        print(f"{t:>9} triplets: {best:7.2f} s  accuracy {result.accuracy:.3f}  ceiling "
              f"{result.ceiling:.3f}  score {result.score:+.3f} [{low:+.3f}, {high:+.3f}]")
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    main()
