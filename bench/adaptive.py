"""Benchmark: participants to decision under adaptive against uniform stimulus allocation, both
valid: design-weighted (Horvitz-Thompson) scores, the anytime-valid test with a look after every
participant (``analysis.planning.sequential_study``), on a grid of pools the allocation was never
tuned on.

Each pool (``make_pool``): ``models`` candidate models over 10 categories; natural images (every
model near a shared truth, each with its own error) and ``per_pair`` controversial images per
model pair (model a rates one class high and another low, model b the reverse; every other model
sides with a or b at random per image, so bystanders do not all side with one model); a
generating human who is none of the models, with a random ranking of them (on natural images the
truth with its own deviations, the better-ranked models with smaller errors; on a pair's
controversial images a per-image mixture of the two sides, Beta-distributed around 0.7-0.95
towards the better-ranked model); rating noise ``noise`` on the 5-point scale. ``near_equal``: the last model is a copy of
another with small perturbations (a nearly equal pair). ``null``: every model exactly equally good
for the human (each model's deviations from the human's expected rating are the same values on
permuted stimuli, so every pool-wide difference is exactly 0): any decision is false.

Per pool, ``--studies`` studies per design with the same participants' noise (paired); a study
stops when every pair is decided (``--max-n``: censored there). Reported per pool: mean N per
design, the mean-N ratio adaptive / uniform with a 95% paired-bootstrap CI (studies resampled,
ratio of means), the information bound (``information_bound``: the best ratio any design of
inclusion probabilities could reach for the hardest pair), the share stopped, the correct-winner share, and the false-decision share with
its binomial SE. Pools, seeds and settings are arguments; nothing is tuned to the defaults.
Ends with one JSON line per pool.
Run: ``.venv/bin/python bench/adaptive.py`` (``--pools`` to choose, ``--studies 100``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import fields
from itertools import combinations

import numpy as np
from tqdm import tqdm

from humanlike.analysis.planning.adaptive import pair_moments
from humanlike.analysis.planning.design import inclusion_probabilities
from humanlike.analysis.planning.sequential_study import (
    SimulatedStudies,
    level_probabilities,
    simulate_studies,
)
from humanlike.analysis.planning.simulate import SCALE
from humanlike.analysis.ratings.weighted import pair_bounds
from humanlike.analysis.sequential.decide import DEFAULT_METHOD, METHODS

POOLS = {  # name: (models, controversial images per pair, rating noise SD, kind)
    "m3-p8-n0.2": (3, 8, 0.2, "grid"),
    "m4-p16-n0.4": (4, 16, 0.4, "grid"),
    "m5-p32-n0.6": (5, 32, 0.6, "grid"),
    "m6-p8-n0.4": (6, 8, 0.4, "grid"),
    "m4-p16-n0.4-near": (4, 16, 0.4, "near_equal"),
    "m4-p16-n0.4-null": (4, 16, 0.4, "null"),
}
N_CATEGORIES = 10
N_NATURAL = 24


def make_pool(n_models: int, per_pair: int, noise: float, kind: str,
              seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The models' probabilities (M, S, K) and the generating human's mean ratings (S, K)."""
    rng = np.random.default_rng(seed)
    k = N_CATEGORIES
    truth = rng.beta(0.5, 6.0, (N_NATURAL, k))
    truth[np.arange(N_NATURAL), rng.integers(k, size=N_NATURAL)] = rng.uniform(0.7, 0.95, N_NATURAL)
    rank = rng.permutation(n_models)  # the models' quality for this human: 0 best
    error = np.linspace(0.05, 0.35, n_models)[rank][:, None, None]
    natural = np.clip(truth + error * rng.standard_normal((n_models, *truth.shape)), 0.01, 0.99)
    human_natural = np.clip(truth + 0.1 * rng.standard_normal(truth.shape), 0.0, 1.0)
    blocks, human = [natural], [human_natural]
    for a, b in combinations(range(n_models), 2):
        c = np.stack([rng.choice(k, 2, replace=False) for _ in range(per_pair)])
        base = rng.beta(0.5, 8.0, (per_pair, k))
        rows = np.arange(per_pair)
        favour_a, favour_b = base.copy(), base.copy()
        favour_a[rows, c[:, 0]], favour_a[rows, c[:, 1]] = 0.9, 0.05
        favour_b[rows, c[:, 0]], favour_b[rows, c[:, 1]] = 0.05, 0.9
        side = rng.integers(0, 2, (n_models, per_pair, 1)).astype(float)  # bystanders: a or b
        side[a], side[b] = 1.0, 0.0
        lean = rng.uniform(0.7, 0.95) if rank[a] < rank[b] else rng.uniform(0.05, 0.3)
        w = rng.beta(8 * lean, 8 * (1 - lean), (per_pair, 1))  # the human's side, per image
        y = side * favour_a + (1 - side) * favour_b
        blocks.append(np.clip(y + rng.normal(0, 0.03, y.shape), 0.01, 0.99))
        human.append(np.clip(w * favour_a + (1 - w) * favour_b
                             + rng.normal(0, 0.05, favour_a.shape), 0.0, 1.0))
    y = np.concatenate(blocks, axis=1)
    h = np.concatenate(human, axis=0)
    if kind == "near_equal":  # the last model: the one before it, slightly perturbed
        y[-1] = np.clip(y[-2] + rng.normal(0, 0.02, y[-2].shape), 0.01, 0.99)
    if kind == "null":  # the same deviations from E[x] on permuted stimuli: equal expected fits
        h = np.clip(h, 0.3, 0.7)
        mean = (level_probabilities(h, noise) * np.asarray(SCALE)).sum(-1)
        deviation = y[0] - mean  # a real model's pattern of errors
        shift = np.clip(mean + deviation, 0, 1) - mean  # keep every probability on [0, 1]
        y = np.stack([mean + shift[rng.permutation(len(h))] for _ in range(n_models)])
        y = np.clip(y, 0.0, 1.0)
    return y, h


def information_bound(y: np.ndarray, h: np.ndarray, noise: float, n_trials: int,
                      floor_share: float, alpha: float) -> dict[str, float]:
    """What any inclusion-probability design can gain for the hardest pair (the largest
    Var / Delta^2 under uniform allocation), from the true moments (``pair_moments`` at the
    human's expected ratings): one participant's HT variance under Poisson sampling,
    (1/S^2)(sum_s a_s / pi_s - sum_s m_s^2), is (S/n) sum a - sum m^2 uniformly and at least
    (sum sqrt a)^2 / n - sum m^2 with Neyman's pi (no floor, no cap), so participants to decision
    of a test whose N scales as Var / Delta^2 (t-type) scale at best by their ratio (Neyman 1934;
    ``bound_ratio``); ``floored_ratio``: the same with Neyman's pi floored by the uniform share the
    spec requires (``inclusion_probabilities``, ``random_share`` > 0), the best such a design can do.
    For the betting tests, whose growth is capped by the bound rather than the variance:
    ``betting_min_n``, the fewest participants any design can average before its hardest pair is
    decided, and ``range_ratio``, the best ratio of that pair's bound to the uniform design's
    with the floor (inclusion probabilities proportional to the bound)."""
    mean_rating = (level_probabilities(h, noise) * np.asarray(SCALE)).sum(-1)
    m, a = pair_moments(y, mean_rating, noise)  # (P, S)
    n_stimuli = y.shape[1]
    uniform = n_stimuli / n_trials * a.sum(1) - (m**2).sum(1)
    best = np.sqrt(a).sum(1) ** 2 / n_trials - (m**2).sum(1)
    delta = m.mean(1)
    with np.errstate(divide="ignore"):
        hardest = int(np.argmax(uniform / n_stimuli**2 / np.maximum(delta**2, 1e-300)))
    pi = inclusion_probabilities(np.sqrt(a[hardest]), n_trials, floor_share)
    floored = (a[hardest] / pi).sum() - (m[hardest] ** 2).sum()
    # a betting e-process valid for every distribution within the bound B fixed before the draw
    # grows by at most E log(1 + lambda d) <= |lambda| |Delta| <= |Delta| / B a participant, so
    # (Wald's identity, one side of the hedge at 2 / alpha) E[N] >= log(2 / alpha) B / |Delta|;
    # B = (1/S) max over draws of sum b(s) / pi_s is at least (1/S) sum_s b(s) for every design
    # (the design's mean of that sum) and equals it for pi proportional to b
    b = pair_bounds(y)
    with np.errstate(divide="ignore"):
        per_pair = np.log(2.0 / alpha) * b.mean(1) / np.abs(delta)
    worst = int(np.argmax(per_pair))
    top_n = -np.sort(-b[worst])[:n_trials].sum() / n_trials  # uniform design's B
    pps = inclusion_probabilities(b[worst], n_trials, floor_share)
    range_floored = -np.sort(-b[worst] / pps)[:n_trials].sum() / n_stimuli
    return {"hardest_pair": hardest, "bound_ratio": round(float(best[hardest] / uniform[hardest]), 3),
            "floored_ratio": round(float(floored / uniform[hardest]), 3),
            "betting_min_n": round(float(per_pair[worst]), 1),
            "range_ratio": round(float(range_floored / top_n), 3)}


def paired_ratio(adaptive: np.ndarray, uniform: np.ndarray, rng: np.random.Generator,
                 n_boot: int = 10_000) -> tuple[float, float, float]:
    """Mean-N ratio adaptive / uniform and its 95% paired-bootstrap percentile interval."""
    index = rng.integers(0, len(adaptive), (n_boot, len(adaptive)))
    ratios = adaptive[index].mean(1) / uniform[index].mean(1)
    return (float(adaptive.mean() / uniform.mean()),
            *map(float, np.quantile(ratios, [0.025, 0.975])))


def run_pool(name: str, args: argparse.Namespace) -> dict[str, object]:
    n_models, per_pair, noise, kind = POOLS[name]
    y, h = make_pool(n_models, per_pair, noise, kind, args.seed)
    parts: dict[str, list] = {"uniform": [], "adaptive": []}
    for chunk, start in enumerate(range(0, args.studies, args.chunk)):  # bounded memory
        size = min(args.chunk, args.studies - start)
        rng = np.random.default_rng([args.seed, 1, chunk])
        standard = rng.standard_normal((size, args.max_n, *h.shape)).astype(np.float32)
        for design in parts:
            parts[design].append(simulate_studies(
                y, h, noise, args.trials, args.max_n, design == "adaptive", standard,
                np.random.default_rng([args.seed, 2, chunk]), floor_share=args.random_share,
                refresh=args.refresh, alpha=args.alpha, method=args.method))
    out = {design: SimulatedStudies(*(np.concatenate([getattr(r, f.name) for r in runs])
                                      for f in fields(SimulatedStudies)))
           for design, runs in parts.items()}
    a, u = out["adaptive"], out["uniform"]
    ratio, low, high = paired_ratio(a.stop_n.astype(float), u.stop_n.astype(float),
                                    np.random.default_rng([args.seed, 3]))

    def share(v: np.ndarray) -> dict[str, float]:
        return {"share": round(float(v.mean()), 3),
                "se": round(float(np.sqrt(v.mean() * (1 - v.mean()) / len(v))), 3)}

    return {"pool": name, "method": args.method, "models": n_models, "per_pair": per_pair, "noise": noise,
            "stimuli": int(y.shape[1]), "studies": args.studies, "max_n": args.max_n,
            "mean_n_uniform": round(float(u.stop_n.mean()), 1),
            "mean_n_adaptive": round(float(a.stop_n.mean()), 1),
            "ratio": round(ratio, 3), "ratio_ci": [round(low, 3), round(high, 3)],
            "information_bound": information_bound(y, h, noise, args.trials, args.random_share,
                                                   args.alpha),
            "stopped_uniform": round(float(u.stopped.mean()), 3),
            "stopped_adaptive": round(float(a.stopped.mean()), 3),
            "correct_winner_uniform": round(float(u.correct_winner.mean()), 3),
            "correct_winner_adaptive": round(float(a.correct_winner.mean()), 3),
            "false_uniform": share(u.wrong), "false_adaptive": share(a.wrong)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pools", nargs="+", default=list(POOLS), choices=list(POOLS))
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--trials", type=int, default=10, help="stimuli per participant")
    parser.add_argument("--max-n", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=100, help="studies simulated at once")
    parser.add_argument("--refresh", type=int, default=4,
                        help="participants between two recomputations of the allocation")
    parser.add_argument("--random-share", type=float, default=0.25, help="the uniform floor")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--method", choices=METHODS, default=DEFAULT_METHOD,
                        help="the continuous test (analysis.sequential.decide)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in tqdm(args.pools, desc="pools", file=sys.stderr):
        start = time.perf_counter()
        row = run_pool(name, args)
        row["seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
