"""Benchmark: controversial stimuli for the ordered class pairs of one model pair, on a device.

Synthesises c(x) = min{p_i(a), 1 - p_i(b), p_j(b), 1 - p_j(a)} (Golan, Raju & Kriegeskorte 2020)
with the default settings: all class pairs as one batch (on a GPU, batches sized to its memory),
Adam at beta = 1, 10, 100 to convergence, up to 5 noise restarts below c = 0.85. Models are demo
names (``cnn:kde``, the 28 x 28 digit pair; ``rgb_cnn:rgb_mlp``, the 32 x 32 RGB pair) or model
TOML files; they are trained or loaded before the clock starts; the timed part is
``synthesize_controversial`` alone. Prints one JSON line:
``{"pair": ..., "device": ..., "seconds": ..., "cpu_seconds": ..., "share_ge_085": ..., "n": ...,
"optimiser_steps": ..., "ms_per_step": ...}`` (``cpu_seconds``: this process's CPU time, which on
a shared machine with ``--threads 1`` is what the wall time would be on an idle core;
``optimiser_steps``: batched steps, each one forward and backward pass per model; ``ms_per_step``:
seconds over those steps, the restarts' checks included). ``--max-steps`` / ``--max-attempts``
bound the synthesis (a timing with a known number of steps). ``--step-profile`` instead times one
optimiser step's forward and backward passes on all ``--n`` images at once for float32 and
bfloat16, each eager and replayed from CUDA graphs (median of 10 after 3 warm-ups, device events;
``host_ms``: the time to enqueue the step, which bounds it when it exceeds ``gpu_ms``), with the
peak GPU memory and the relative error of the image gradient against the eager pass at the same
precision and in float32, one JSON line each. ``--objective golan2020`` runs the paper's eq. 4
(smooth minimum of calibrated logits, uniform-noise start) instead of the default ``logsigmoid``
variant; ``--compare-objectives`` runs both on the same class pairs and seeds and prints one line
per objective (share >= .85, mean and median c, steps, time) and a last line comparing them pair
by pair (mean difference in c, pairs where each is higher, Wilcoxon signed-rank p).

    .venv/bin/python bench/controversial.py [--pair cnn:kde] [--device auto] [--threads 1]
        [--precision float32] [--parameterisation pixel] [--n 90] [--seed 0]
        [--max-steps 1000] [--max-attempts 5] [--step-profile]
        [--objective logsigmoid|golan2020] [--compare-objectives]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch
from scipy import stats

from humanlike.stimuli.controversial import (
    OBJECTIVES,
    SynthesisSettings,
    all_class_pairs,
    log_controversiality_terms,
    smooth_minimum,
    synthesize_controversial,
)
from humanlike.stimuli.device import GraphedForward, resolve_device
from humanlike.stimuli.model_registry import resolve_models
from humanlike.stimuli.models import CandidateModel, torch_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="cnn:kde", help="two models (demo names or .toml), A:B")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CPU)")
    parser.add_argument("--precision", default="float32", help="float32, bfloat16 or float16")
    parser.add_argument("--parameterisation", default="pixel", help="pixel or fourier")
    parser.add_argument("--n", type=int, default=None, help="class pairs (default: all K(K-1))")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=SynthesisSettings.max_steps)
    parser.add_argument("--max-attempts", type=int, default=SynthesisSettings.max_attempts)
    parser.add_argument("--step-profile", action="store_true", help="time one step per variant")
    parser.add_argument("--progress", action="store_true", help="progress bar on stderr")
    parser.add_argument("--objective", default="logsigmoid", choices=OBJECTIVES)
    parser.add_argument("--compare-objectives", action="store_true",
                        help="run both objectives on the same pairs and compare them")
    args = parser.parse_args()
    device = resolve_device(args.device)
    torch.manual_seed(args.seed)  # the initial weights of declared models without a weights file
    name_1, name_2 = args.pair.split(":")
    models = resolve_models([name_1, name_2], device=device)
    model_1, model_2 = models.values()
    pairs = all_class_pairs(len(model_1.classes))
    if args.n is not None:
        pairs = pairs[np.random.default_rng(args.seed).permutation(len(pairs))[: args.n]]
    if args.step_profile:
        step_profile(model_1, model_2, pairs, device)
        return
    objectives = OBJECTIVES if args.compare_objectives else (args.objective,)
    results = {}
    for objective in objectives:
        results[objective] = run_one(args, device, model_1, model_2, pairs, objective)
    if args.compare_objectives:
        c = {name: r.controversiality for name, r in results.items()}
        diff = c["golan2020"] - c["logsigmoid"]
        print(
            json.dumps(
                {
                    "pair": args.pair,
                    "n": len(diff),
                    "mean_c_golan2020_minus_logsigmoid": round(float(diff.mean()), 4),
                    "golan2020_higher": int(np.sum(diff > 1e-6)),
                    "logsigmoid_higher": int(np.sum(diff < -1e-6)),
                    "wilcoxon_p": round(float(stats.wilcoxon(diff).pvalue), 4)
                    if np.any(diff != 0)
                    else 1.0,
                }
            )
        )


def run_one(args: argparse.Namespace, device: torch.device, model_1: CandidateModel,
            model_2: CandidateModel, pairs: np.ndarray, objective: str):
    """Time one synthesis with ``objective`` and print its JSON line; return the result."""
    settings = SynthesisSettings(
        precision=args.precision,
        parameterisation=args.parameterisation,
        max_steps=args.max_steps,
        max_attempts=args.max_attempts,
        objective=objective,
    )
    with torch_threads(args.threads):
        start, cpu_start = time.perf_counter(), time.process_time()
        result = synthesize_controversial(
            model_1,
            model_2,
            pairs,
            settings=settings,
            random_state=args.seed,
            progress=args.progress or sys.stderr.isatty(),
        )
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
    print(
        json.dumps(
            {
                "pair": args.pair,
                "objective": objective,
                "device": str(device),
                "threads": args.threads,
                "precision": args.precision,
                "parameterisation": args.parameterisation,
                "seconds": round(seconds, 2),
                "cpu_seconds": round(cpu_seconds, 2),
                "share_ge_085": round(result.share_at_least(0.85), 4),
                "n": len(result.controversiality),
                "precision_gap": result.precision_gap,
                "max_steps": settings.max_steps,
                "max_attempts": settings.max_attempts,
                "optimiser_steps": result.optimiser_steps,
                "image_steps": result.image_steps,
                "ms_per_step": round(1000 * seconds / max(1, result.optimiser_steps), 2),
                "median_c": round(float(np.median(result.controversiality)), 4),
                "mean_c": round(float(np.mean(result.controversiality)), 4),
                "mean_attempts": round(float(np.mean(result.attempts)), 2),
            }
        )
    )
    return result


def step_profile(
    model_1: CandidateModel, model_2: CandidateModel, pairs: np.ndarray, device: torch.device
) -> None:
    """One optimiser step's passes (as ``controversial._optimise``) on all pairs at once, timed."""
    a = torch.from_numpy(pairs[:, 0]).to(device)
    b = torch.from_numpy(pairs[:, 1]).to(device)
    generator = torch.Generator().manual_seed(0)
    z0 = (torch.rand((len(pairs), *model_1.input_shape), generator=generator) * 4 - 2).to(device)
    if device.type == "cuda":
        print(
            json.dumps(
                {
                    "gpu": torch.cuda.get_device_name(device),
                    "torch": torch.__version__,
                    "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                    "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                }
            ),
            flush=True,
        )
    reference: dict[str, torch.Tensor] = {}
    for precision in ("float32", "bfloat16"):
        for mode in ("eager", "graphed"):
            forward_1, forward_2 = (
                GraphedForward(model, device, precision) for model in (model_1, model_2)
            )
            if mode == "eager":
                forward_1.use_graphs = forward_2.use_graphs = False
            z = z0.clone().requires_grad_(True)
            gpu, host = [], []
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
            for _ in range(13):
                if device.type == "cuda":
                    begin, end = torch.cuda.Event(True), torch.cuda.Event(True)
                    begin.record()
                t = time.perf_counter()
                z.grad = None
                x = torch.sigmoid(z)
                logits_1, logits_2 = forward_1(x), forward_2(x)
                terms = log_controversiality_terms(logits_1.float(), logits_2.float(), a, b)
                (-smooth_minimum(terms, 10.0).sum()).backward()
                host.append(1000 * (time.perf_counter() - t))
                if device.type == "cuda":
                    end.record()
                    torch.cuda.synchronize(device)
                    gpu.append(begin.elapsed_time(end))
                else:
                    gpu.append(host[-1])
            peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
            grad = z.grad.detach().double()
            reference.setdefault(precision, grad)
            reference.setdefault("float32", grad)
            row = {
                "precision": precision,
                "mode": mode,
                "graphed": forward_1.use_graphs and forward_2.use_graphs,
                "n": len(pairs),
                "gpu_ms": round(float(np.median(gpu[3:])), 2),
                "host_ms": round(float(np.median(host[3:])), 2),
                "peak_gib": round(peak / 2**30, 2),
            }
            # ||grad - grad of the eager pass|| / ||grad of the eager pass||, same precision / float32
            for key, ref in (
                ("rel_to_eager", reference[precision]),
                ("rel_to_fp32", reference["float32"]),
            ):
                row[key] = float(
                    torch.linalg.vector_norm(grad - ref) / torch.linalg.vector_norm(ref)
                )
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
