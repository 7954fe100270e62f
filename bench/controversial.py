"""Benchmark: controversial stimuli for all 90 ordered digit pairs of one demo model pair.

Synthesises c(x) = min{p_i(a), 1 - p_i(b), p_j(b), 1 - p_j(a)} (Golan, Raju & Kriegeskorte 2020)
for the CNN against the class-conditional Gaussian KDE with the default settings: one batch of
90 images, Adam at beta = 1, 10, 100 to convergence, up to 5 noise restarts below c = 0.85. The
demo models are trained (or loaded from the cache) before the clock starts; the timed part is
``synthesize_controversial`` alone. Prints one JSON line:
``{"seconds": ..., "share_ge_085": ..., "n": 90}``.

    .venv/bin/python bench/controversial.py [--pair cnn:kde] [--threads 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from humanlike.stimuli.controversial import synthesize_controversial
from humanlike.stimuli.demo_models import demo_models
from humanlike.stimuli.models import torch_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="cnn:kde", help="two demo models, A:B")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    name_1, name_2 = args.pair.split(":")
    models = demo_models([name_1, name_2])
    with torch_threads(args.threads):
        start = time.perf_counter()
        result = synthesize_controversial(
            models[name_1], models[name_2], random_state=args.seed, progress=sys.stderr.isatty()
        )
        seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "seconds": round(seconds, 2),
                "share_ge_085": round(result.share_at_least(0.85), 4),
                "n": len(result.controversiality),
            }
        )
    )


if __name__ == "__main__":
    main()
