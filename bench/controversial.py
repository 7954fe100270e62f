"""Benchmark: controversial stimuli for the ordered class pairs of one model pair, on a device.

Synthesises c(x) = min{p_i(a), 1 - p_i(b), p_j(b), 1 - p_j(a)} (Golan, Raju & Kriegeskorte 2020)
with the default settings: all class pairs as one batch (on a GPU, batches sized to its memory),
Adam at beta = 1, 10, 100 to convergence, up to 5 noise restarts below c = 0.85. Models are demo
names (``cnn:kde``, the 28 x 28 digit pair; ``rgb_cnn:rgb_mlp``, the 32 x 32 RGB pair) or model
TOML files; they are trained or loaded before the clock starts; the timed part is
``synthesize_controversial`` alone. Prints one JSON line:
``{"pair": ..., "device": ..., "seconds": ..., "cpu_seconds": ..., "share_ge_085": ..., "n": ...}``
(``cpu_seconds``: this process's CPU time, which on a shared machine with ``--threads 1`` is
what the wall time would be on an idle core).

    .venv/bin/python bench/controversial.py [--pair cnn:kde] [--device auto] [--threads 1]
        [--precision float32] [--parameterisation pixel] [--n 90] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from humanlike.stimuli.controversial import (
    SynthesisSettings,
    all_class_pairs,
    synthesize_controversial,
)
from humanlike.stimuli.device import resolve_device
from humanlike.stimuli.model_registry import resolve_models
from humanlike.stimuli.models import torch_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="cnn:kde", help="two models (demo names or .toml), A:B")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CPU)")
    parser.add_argument("--precision", default="float32", help="float32, bfloat16 or float16")
    parser.add_argument("--parameterisation", default="pixel", help="pixel or fourier")
    parser.add_argument("--n", type=int, default=None, help="class pairs (default: all K(K-1))")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    device = resolve_device(args.device)
    name_1, name_2 = args.pair.split(":")
    models = resolve_models([name_1, name_2], device=device)
    model_1, model_2 = models.values()
    pairs = all_class_pairs(len(model_1.classes))
    if args.n is not None:
        pairs = pairs[np.random.default_rng(args.seed).permutation(len(pairs))[: args.n]]
    settings = SynthesisSettings(precision=args.precision, parameterisation=args.parameterisation)
    with torch_threads(args.threads):
        start, cpu_start = time.perf_counter(), time.process_time()
        result = synthesize_controversial(
            model_1,
            model_2,
            pairs,
            settings=settings,
            random_state=args.seed,
            progress=sys.stderr.isatty(),
        )
        if device.type == "cuda":
            import torch

            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
    print(
        json.dumps(
            {
                "pair": args.pair,
                "device": str(device),
                "threads": args.threads,
                "precision": args.precision,
                "parameterisation": args.parameterisation,
                "seconds": round(seconds, 2),
                "cpu_seconds": round(cpu_seconds, 2),
                "share_ge_085": round(result.share_at_least(0.85), 4),
                "n": len(result.controversiality),
                "precision_gap": result.precision_gap,
            }
        )
    )


if __name__ == "__main__":
    main()
