"""Benchmark: family-wise false decisions and the price of validity of the monitoring schemes.

Data: ``analysis.sequential.simulate.score_differences``: per participant, each model's score is a
correlation r_im = tanh(atanh(rho_m) + u_i + e_im) (u_i: the participant's general agreement with
models, SD ``--participant-sd``; e_im: model-specific, SD ``--model-sd``); each pair's difference
d_i = r_ia - r_ib lies in [-2, 2]. Uniform design: every participant scores every pair.

1. Null (every model equally good: all rho = ``--null-r``, so the models are exchangeable and every
   difference is symmetric about 0; and a skewed bounded null, scale (Beta(2, 6) - 1/4)): a look
   after every participant from N = ``--min-n`` to ``--max-n``; the share of studies with any
   decision (family-wise false-decision rate) and its binomial SE, for continuous monitoring
   (betting e-process with universal-portfolio bets, the default; with aGRAPA bets; safe t-test), fixed_n at its one look N = max-n (and, for contrast, the same
   test read at every look), group_sequential (``--gs-looks`` equally spaced looks up to max-n);
   the pairs by closed testing (``analysis.sequential.closure``), fixed_n by Holm-Sidak.
2. Price of validity on an alternative (rho = ``--alt-r``: pairs differ by about 0.05, 0.10 and
   0.05 in r, 0.3-0.6 SD of d): the fixed-N design of power ``--power`` (every pair decided) needs
   N_fixed; continuous monitoring reaches the same power when it is allowed to run to the
   ``--power`` quantile of its participants-to-decision, so that quantile (the 80th percentile at
   power 0.8) is its maximum N; its mean is E[min(N_decision, that maximum)]; the group-sequential
   design's maximum N is the smallest with the same power, its mean the expected N. Also printed:
   the information bound for any e-process that is valid for every distribution on [-2, 2]
   (products of 1 + lambda d with |lambda| <= 1/2): even at closed testing's last step (one side
   of the hedge at 2/alpha) E[N] >= log(2/alpha) / g*, g* the best growth rate E log(1 + lambda d)
   of the hardest pair (Wald's identity).
Run: ``.venv/bin/python bench/sequential.py`` (``--studies 1000``)."""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import t as student_t

from humanlike.analysis.sequential import decide
from humanlike.analysis.sequential.running import holm_sidak_adjust, running_t
from humanlike.analysis.sequential.simulate import score_differences, skewed_null
from humanlike.analysis.sequential.spending import obrien_fleming_boundaries


def rate(decided: np.ndarray) -> str:
    """Share of studies with any decision, with its binomial SE."""
    p = decided.any(-1).mean()
    return f"{p:.3f} ± {np.sqrt(p * (1 - p) / decided.shape[0]):.3f}"


def fixed_power_curve(d: np.ndarray, alpha: float) -> np.ndarray:
    """(N,) share of studies whose every pair is significant (t-test, Holm-Sidak) at each N."""
    t, n = running_t(d)
    p = np.where(np.isfinite(t), 2 * student_t.sf(np.abs(t), np.maximum(n - 1, 1)), 1.0)
    return (holm_sidak_adjust(p) <= alpha).all(-1).mean(0)


def peeking(d: np.ndarray, alpha: float, looks: np.ndarray) -> np.ndarray:
    """(R, K) whether the fixed-N test, read at every look, was ever significant."""
    t, n = running_t(d)
    p = np.where(np.isfinite(t), 2 * student_t.sf(np.abs(t), np.maximum(n - 1, 1)), 1.0)
    return (holm_sidak_adjust(p)[:, looks - 1] <= alpha).any(1)


def growth_bound(d: np.ndarray, bound: float) -> float:
    """min over pairs of max_{|lambda| <= 1/bound} E log(1 + lambda d): the best growth rate."""
    rates = []
    for k in range(d.shape[-1]):  # K pairs (3): one scalar optimisation each
        x = d[..., k].ravel()
        best = minimize_scalar(lambda lam, x=x: -np.mean(np.log1p(lam * x)),
                               bounds=(-1 / bound + 1e-9, 1 / bound - 1e-9), method="bounded")
        rates.append(-best.fun)
    return float(min(rates))


def main() -> None:
    """Run both parts and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--studies", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--min-n", type=int, default=4)
    ap.add_argument("--max-n", type=int, default=200)
    ap.add_argument("--gs-looks", type=int, default=5)
    ap.add_argument("--null-r", type=float, default=0.5)
    ap.add_argument("--alt-r", type=str, default="0.5,0.45,0.4")
    ap.add_argument("--participant-sd", type=float, default=0.3)
    ap.add_argument("--model-sd", type=float, default=0.15)
    ap.add_argument("--power", type=float, default=0.8)
    ap.add_argument("--alt-max-n", type=int, default=1200)
    args = ap.parse_args()
    start = time.time()
    rng = np.random.default_rng(args.seed)
    alpha, looks = args.alpha, np.arange(args.min_n, args.max_n + 1)
    gs_looks = np.linspace(args.max_n / args.gs_looks, args.max_n, args.gs_looks).round().astype(int)
    n_models = len(args.alt_r.split(","))
    nulls = {
        "exchangeable models": score_differences(args.studies, args.max_n, [args.null_r] * n_models, rng,
                                                 args.participant_sd, args.model_sd),
        "skewed, Beta(2,6)": skewed_null(args.studies, args.max_n, n_models * (n_models - 1) // 2, rng),
    }
    print(f"## Null: family-wise false-decision rate ({args.studies} studies, "
          f"{n_models * (n_models - 1) // 2} pairs, alpha {alpha:g}, looks every participant "
          f"N = {args.min_n}..{args.max_n})\n")
    print("| scheme | looks | " + " | ".join(nulls) + " |")
    print("| --- | --- |" + " --- |" * len(nulls))
    rows = {
        "continuous, betting e-process (mixture)": ("every", lambda d: decide(d, looks=looks).decided),
        "continuous, betting e-process (aGRAPA)": ("every", lambda d: decide(d, looks=looks,
                                                                             method="betting").decided),
        "continuous, safe t-test": ("every", lambda d: decide(d, looks=looks, method="safe_t").decided),
        "group_sequential (OBF spending)": (", ".join(map(str, gs_looks)),
                                            lambda d: decide(d, "group_sequential", alpha, gs_looks).decided),
        "fixed_n": (f"{args.max_n}", lambda d: decide(d, "fixed_n", alpha, [args.max_n]).decided),
        "fixed_n test read at every look (invalid)": ("every", lambda d: peeking(d, alpha, looks)),
    }
    for name, (when, run) in rows.items():
        print(f"| {name} | {when} | " + " | ".join(rate(run(d)) for d in nulls.values()) + " |")

    alt_r = [float(v) for v in args.alt_r.split(",")]
    d = score_differences(args.studies, args.alt_max_n, alt_r, rng, args.participant_sd, args.model_sd)
    mean_d, sd_d = d.mean((0, 1)), d.std((0, 1))
    curve = fixed_power_curve(d, alpha)
    if curve.max() < args.power:
        raise SystemExit(f"--alt-max-n {args.alt_max_n}: the fixed design never reaches power {args.power}")
    n_fixed = int(np.argmax(curve >= args.power)) + 1
    print(f"\n## Price of validity: alternative rho = {args.alt_r} (pair means "
          f"{', '.join(f'{m:.3f}' for m in mean_d)}, SDs {', '.join(f'{s:.3f}' for s in sd_d)}), "
          f"power {args.power:g} (every pair decided)\n")
    print("| design | mean N | max N (power quantile) | mean / N_fixed | max / N_fixed | wrong direction |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| fixed_n | {n_fixed} | {n_fixed} | 1.00 | 1.00 | - |")
    for method in ("betting_mixture", "betting", "safe_t"):
        result = decide(d, method=method, bounds=False)
        needed = result.participants_to_decision()
        cap = float(np.quantile(needed, args.power))
        mean = float(np.minimum(needed, cap).mean())
        wrong = int((result.direction == -1).sum())
        print(f"| continuous, {method} | {mean:.1f} | {cap:.0f} | {mean / n_fixed:.2f} | "
              f"{cap / n_fixed:.2f} | {wrong} |")
    fractions = np.arange(1, args.gs_looks + 1) / args.gs_looks
    for n_max in range(n_fixed, 3 * n_fixed):  # smallest maximum N with the same power
        schedule = np.maximum((fractions * n_max).round().astype(int), 2)
        result = decide(d[:, :n_max], "group_sequential", alpha, schedule)
        needed = result.participants_to_decision()
        if np.isfinite(needed).mean() >= args.power:
            mean = float(np.where(np.isfinite(needed), needed, n_max).mean())
            print(f"| group_sequential, {args.gs_looks} looks | {mean:.1f} | {n_max} | "
                  f"{mean / n_fixed:.2f} | {n_max / n_fixed:.2f} | {int((result.direction == -1).sum())} |")
            break
    k = d.shape[-1]
    g = growth_bound(d, 2.0)
    print(f"\nInformation bound for any e-process valid for every distribution on [-2, 2]: best growth "
          f"rate of the hardest pair g* = {g:.4f} per participant, so even at the last closed-testing "
          f"step E[N] >= log(2/alpha) / g* = {np.log(2 / alpha) / g:.0f} participants (Wald's "
          f"identity), against N_fixed = {n_fixed}.")
    print(f"\nOBF boundaries at alpha/K = {alpha / k:.4f} (closed testing's first step), "
          f"{args.gs_looks} looks: "
          f"{', '.join(f'{c:.3f}' for c in obrien_fleming_boundaries(fractions, alpha / k))}")
    print(f"\n{args.studies} studies per null and alternative, seed {args.seed}; {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
