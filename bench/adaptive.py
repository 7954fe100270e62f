"""Benchmark: participants to the stopping rule under adaptive against uniform stimulus allocation.

4 candidate models; a pool of controversial stimuli for every model pair (model a rates class c1
high and c2 low, model b the reverse, each other model mostly siding with model a) plus natural images (every
model near a shared truth, each with its own error); the generating observer is one of the models
(studies cycle through the four) plus human-like noise (SD ``--noise``, 5-point scale). Each
simulated participant rates ``--trials`` stimuli; participants arrive in batches of ``--batch``;
after each batch the study is analysed as the report does (``analysis.planning.decide``: mean
participant r, participant x stratified stimulus bootstrap, Holm-Sidak at alpha) and stops when
every pairwise comparison is decided (or at ``--max-n``). Adaptive allocation draws each new
participant's stimuli with ``analysis.planning.adaptive.discrimination_weights`` (undecided pairs,
the side each leans to once its Holm-Sidak p is below ``--lean``, the human's mean and noise per
stimulus estimated from the ratings so far; ``--criterion disagreement``: the earlier
``allocation_weights``) for all but ``--random-share`` of the trials, which stay uniformly random. Same seeds for both designs. Studies run in lockstep, so each
look is one vectorised analysis of every study still running.

Ends with one JSON line: participants_adaptive, participants_uniform (medians), ratio,
correct_adaptive, correct_uniform, false_decisions_adaptive, false_decisions_uniform,
stopped_adaptive, stopped_uniform, alpha, studies, seconds.
Run: ``.venv/bin/python bench/adaptive.py`` (``--studies 50``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from itertools import combinations

import numpy as np

from humanlike.analysis.planning.adaptive import (
    LEAN_P,
    allocation_weights,
    discrimination_weights,
    human_means,
    stimulus_noise,
)
from humanlike.analysis.planning.decide import decide
from humanlike.analysis.planning.recovery import PlanInputs, true_differences
from humanlike.analysis.planning.simulate import draw_subsets, simulate_ratings

MODELS = ("m0", "m1", "m2", "m3")


def stimulus_pool(n_natural: int, n_per_pair: int, n_categories: int, seed: int) -> PlanInputs:
    """The models' probabilities (4, S, K) on natural images and each pair's controversial ones."""
    rng = np.random.default_rng(seed)
    n_models = len(MODELS)
    truth = rng.beta(0.5, 6.0, (n_natural, n_categories))
    truth[np.arange(n_natural), rng.integers(n_categories, size=n_natural)] = rng.uniform(
        0.7, 0.95, n_natural)
    error = np.array([0.05, 0.15, 0.25, 0.35])[:, None, None]  # each model its own accuracy
    natural = np.clip(truth + error * rng.standard_normal((n_models, *truth.shape)), 0.01, 0.99)
    blocks, strata = [natural], ["natural"] * n_natural
    for a, b in combinations(range(n_models), 2):
        c = np.stack([rng.choice(n_categories, 2, replace=False) for _ in range(n_per_pair)])
        base = rng.beta(0.5, 8.0, (n_per_pair, n_categories))
        favour_a, favour_b = base.copy(), base.copy()
        rows = np.arange(n_per_pair)
        favour_a[rows, c[:, 0]], favour_a[rows, c[:, 1]] = 0.9, 0.05
        favour_b[rows, c[:, 0]], favour_b[rows, c[:, 1]] = 0.05, 0.9
        # the other models mostly side with the pair's first model
        t = 0.85 + rng.normal(0, 0.05, (n_models, n_per_pair, 1))
        t[a], t[b] = 1.0, 0.0
        y = t * favour_a + (1 - t) * favour_b
        blocks.append(np.clip(y + rng.normal(0, 0.03, y.shape), 0.01, 0.99))
        strata += [f"{MODELS[a]} vs {MODELS[b]}"] * n_per_pair
    y = np.concatenate(blocks, axis=1)
    return PlanInputs(y, MODELS, tuple(f"s{i:03d}" for i in range(y.shape[1])), tuple(strata),
                      0, 0.0)


def run_design(pool: PlanInputs, adaptive: bool, args: argparse.Namespace) -> dict[str, np.ndarray]:
    """Sequential studies in lockstep: stopping N, declared winner, any wrong decision, stopped."""
    n_studies, n_stimuli = args.studies, len(pool.stimuli)
    generator = np.arange(n_studies) % len(MODELS)
    noisy = replace(pool, noise_sd=args.noise)
    truth = {g: np.sign(true_differences(noisy, g, args.seed)) for g in range(len(MODELS))}
    rng = np.random.default_rng([args.seed, 1])  # the same participants' noise for both designs
    alloc_rng = np.random.default_rng([args.seed, 2])
    analysis_rng = np.random.default_rng([args.seed, 3])
    n_pairs = len(truth[0])
    x = np.full((n_studies, args.max_n, n_stimuli, pool.probabilities.shape[2]), np.nan)
    undecided = np.ones((n_studies, n_pairs), dtype=bool)
    direction = np.zeros((n_studies, n_pairs))  # the sign of each pair's latest difference
    weights = np.full((n_studies, n_stimuli), 1.0 / n_stimuli)
    stop_n = np.full(n_studies, args.max_n)
    winner = np.full(n_studies, -1)
    wrong = np.zeros(n_studies, dtype=bool)
    running = np.ones(n_studies, dtype=bool)
    n = 0
    while n < args.max_n and running.any():
        batch = min(args.batch, args.max_n - n)
        if adaptive and n > 0:
            noise = stimulus_noise(x[:, :n])
            if args.criterion == "disagreement":
                weights = allocation_weights(pool.probabilities, undecided, noise)
            else:
                weights = discrimination_weights(
                    pool.probabilities, undecided, direction,
                    human_means(x[:, :n], pool.probabilities, noise), noise)
        shown = draw_subsets(weights[:, None, :], args.trials, (n_studies, batch), alloc_rng,
                             random_share=args.random_share if adaptive else 1.0)
        for g in range(len(MODELS)):
            rows = generator == g
            x[rows, n:n + batch] = simulate_ratings(pool.probabilities[g], int(rows.sum()), batch,
                                                    args.noise, rng, shown[rows])
        n += batch
        if n < args.min_n:
            continue
        live = np.flatnonzero(running)
        d = decide(x[live, :n], pool.probabilities, pool.strata, args.n_resamples, args.alpha,
                   analysis_rng)
        undecided[live] = ~d.significant
        direction[live] = np.where(d.p_holm_sidak < args.lean, np.sign(np.nan_to_num(d.differences)), 0)
        done = d.significant.all(1) | (n >= args.max_n)
        for j, study in enumerate(live):
            if done[j]:
                running[study] = False
                stop_n[study] = n
                winner[study] = d.winners()[j]
                sign = np.sign(d.differences[j])
                wrong[study] = bool((d.significant[j] & (sign == -truth[generator[study]])).any())
        print(f"  {'adaptive' if adaptive else 'uniform'}: N = {n}, {running.sum()} of "
              f"{n_studies} studies still running", file=sys.stderr)
    for g in range(len(MODELS)):
        print(f"  {'adaptive' if adaptive else 'uniform'}: generated by {MODELS[g]}: median N "
              f"{np.median(stop_n[generator == g]):.0f}", file=sys.stderr)
    return {"n": stop_n, "correct": winner == generator, "wrong": wrong,
            "stopped": stop_n < args.max_n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=50)
    parser.add_argument("--trials", type=int, default=10, help="stimuli per participant")
    parser.add_argument("--batch", type=int, default=2, help="participants between two looks")
    parser.add_argument("--min-n", type=int, default=4)
    parser.add_argument("--max-n", type=int, default=120)
    parser.add_argument("--noise", type=float, default=0.4, help="human rating noise SD")
    parser.add_argument("--random-share", type=float, default=0.25)
    parser.add_argument("--n-natural", type=int, default=24)
    parser.add_argument("--n-per-pair", type=int, default=8)
    parser.add_argument("--n-resamples", type=int, default=500)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lean", type=float, default=LEAN_P,
                        help="Holm-Sidak p below which a comparison's direction counts")
    parser.add_argument("--criterion", choices=("discrimination", "disagreement"),
                        default="discrimination", help="the adaptive weights (docs/adaptive.md)")
    args = parser.parse_args()
    start = time.perf_counter()
    pool = stimulus_pool(args.n_natural, args.n_per_pair, 10, args.seed)
    result = {name: run_design(pool, name == "adaptive", args) for name in ("adaptive", "uniform")}
    a, u = result["adaptive"], result["uniform"]
    out = {
        "participants_adaptive": float(np.median(a["n"])),
        "participants_uniform": float(np.median(u["n"])),
        "ratio": round(float(np.median(a["n"]) / np.median(u["n"])), 3),
        "correct_adaptive": float(a["correct"].mean()),
        "correct_uniform": float(u["correct"].mean()),
        "false_decisions_adaptive": float(a["wrong"].mean()),
        "false_decisions_uniform": float(u["wrong"].mean()),
        "stopped_adaptive": float(a["stopped"].mean()),
        "stopped_uniform": float(u["stopped"].mean()),
        "alpha": args.alpha,
        "studies": args.studies,
        "trials": args.trials,
        "random_share": args.random_share,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
