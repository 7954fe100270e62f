"""Significance tests for error consistency (Klein, Meyen, Brendel, Wichmann & Meding 2025).

* :func:`independence_test`: is kappa different from what two independent observers with the
  same accuracies would show? Accuracies are drawn from their Beta posteriors (uniform prior:
  ``Beta(k + 1, n - k + 1)`` for ``k`` correct of ``n``), each simulated experiment is a
  multinomial 2x2 table of independent Bernoulli trials, and the two-sided p-value is
  ``(1 + #{|kappa_null| >= |kappa|}) / (1 + n_sim)``.
* :func:`equal_ec_test`: do two candidates have the same EC to a reference? Trials are
  bootstrapped and, per drawn trial, the candidates' responses are swapped with probability
  .5; that builds the null distribution of the EC difference under exchangeable candidates
  (a t-test over bootstrap deltas is anti-conservative, Klein et al. 2025).

Everything is vectorised over simulations / resamples (and over pairs in
:func:`independence_pvalues`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from humanlike.analysis._resampling import (
    ConfidenceInterval,
    as_rng,
    batch_size,
    check_confidence_level,
    check_n_resamples,
    confidence_interval,
    counts_from_indices,
    holm_sidak,
    iter_batches,
    null_p_value,
    quiet_nan_warnings,
    resample_indices,
)
from humanlike.analysis.error_consistency.kappa import (
    DEFAULT_DEGENERATE,
    Degenerate,
    as_correctness,
    check_degenerate,
    kappa_from_rates,
)
from humanlike.analysis.error_consistency.matrix import HUMAN, MODEL, condition_tables

#: Upper bound on pairs x simulations held in memory at once by the independence test.
_MAX_SIM_ELEMENTS = 2**22


@dataclass(frozen=True)
class IndependenceTestResult:
    """Kappa of two observers and its p-value against independent observers (Klein et al. 2025)."""

    kappa: float
    p_value: float
    n: int
    n_sim: int
    null_distribution: np.ndarray


@dataclass(frozen=True)
class EqualECTestResult:
    """Difference ``delta = kappa_a - kappa_b`` of two candidates' EC to the same reference.

    ``kappa_a``/``kappa_b`` are mean kappas over reference observers (and over strata);
    ``ci`` is the percentile bootstrap interval of ``delta``; ``p_value`` comes from the swap
    null of Klein et al. (2025): ``(1 + #{|delta_null| >= |delta|}) / (1 + n_resamples)``.
    """

    kappa_a: float
    kappa_b: float
    delta: float
    ci: ConfidenceInterval[float]
    p_value: float
    n: int
    n_resamples: int
    null_distribution: np.ndarray
    bootstrap_distribution: np.ndarray


def independence_pvalues(
    kappa: ArrayLike,
    n_correct_a: ArrayLike,
    n_correct_b: ArrayLike,
    n: ArrayLike,
    *,
    n_sim: int = 10_000,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
    random_state: int | np.random.Generator | None = None,
    return_null: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Return independence-test p-values for many pairs at once (Klein et al. 2025).

    Per pair, ``n_sim`` accuracy pairs are drawn from ``Beta(k + 1, n - k + 1)`` posteriors and
    each gives a multinomial 2x2 table of ``n`` independent trials; the p-value is
    ``(1 + #{|kappa_null| >= |kappa|}) / (1 + n_sim)``. Inputs broadcast to one shape.
    """
    check_degenerate(degenerate)
    n_sim = check_n_resamples(n_sim, "n_sim")
    rng = as_rng(random_state)
    kap, ka, kb, nn = np.broadcast_arrays(
        np.asarray(kappa, dtype=float),
        np.asarray(n_correct_a),
        np.asarray(n_correct_b),
        np.asarray(n),
    )
    shape = kap.shape
    kap, ka, kb, nn = (x.ravel() for x in (kap, ka, kb, nn))
    if np.any(nn < 1) or np.any((ka < 0) | (ka > nn)) or np.any((kb < 0) | (kb > nn)):
        raise ValueError("need n >= 1 and 0 <= n_correct <= n for every pair")
    nn = nn.astype(np.int64)
    p_values: np.ndarray = np.empty(kap.size)
    null_all: np.ndarray | None = np.empty((kap.size, n_sim)) if return_null else None
    step = max(1, _MAX_SIM_ELEMENTS // n_sim)
    for sl in iter_batches(kap.size, step):
        m = sl.stop - sl.start
        pa = rng.beta(ka[sl, None] + 1.0, nn[sl, None] - ka[sl, None] + 1.0, size=(m, n_sim))
        pb = rng.beta(kb[sl, None] + 1.0, nn[sl, None] - kb[sl, None] + 1.0, size=(m, n_sim))
        cells = np.stack([pa * pb, pa * (1 - pb), (1 - pa) * pb, (1 - pa) * (1 - pb)], axis=-1)
        table = rng.multinomial(nn[sl, None], cells)  # m x n_sim x (11, 10, 01, 00)
        n_f = nn[sl, None].astype(float)
        null = kappa_from_rates(
            (table[..., 0] + table[..., 3]) / n_f,
            (table[..., 0] + table[..., 1]) / n_f,
            (table[..., 0] + table[..., 2]) / n_f,
            n_f,
            degenerate=degenerate,
            unbiased=unbiased,
        )
        p_values[sl] = null_p_value(null, kap[sl])
        if null_all is not None:
            null_all[sl] = null
    p_values = p_values.reshape(shape)
    if return_null:
        assert null_all is not None
        return p_values, null_all.reshape(*shape, n_sim)
    return p_values


def independence_test(
    a: ArrayLike,
    b: ArrayLike,
    *,
    n_sim: int = 10_000,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
    random_state: int | np.random.Generator | None = None,
) -> IndependenceTestResult:
    """Test kappa of correctness vectors ``a, b`` against independent observers (Klein et al. 2025)."""
    a = as_correctness(a, "a")
    b = as_correctness(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    n = a.size
    kap = kappa_from_rates(
        np.mean(a == b), a.mean(), b.mean(), n, degenerate=degenerate, unbiased=unbiased
    )
    p, null = independence_pvalues(
        kap,
        a.sum(),
        b.sum(),
        n,
        n_sim=n_sim,
        degenerate=degenerate,
        unbiased=unbiased,
        random_state=random_state,
        return_null=True,
    )
    return IndependenceTestResult(
        kappa=float(kap), p_value=float(p), n=n, n_sim=n_sim, null_distribution=null
    )


@dataclass(frozen=True)
class _Stratum:
    """One stratum of the equal-EC test: references (trials x R) and the two candidates."""

    reference: np.ndarray
    a: np.ndarray
    b: np.ndarray

    def design(self) -> np.ndarray:
        """Return the (2 n) x (2 (2 + 3 R)) float32 design of kept/swapped draws (see module doc).

        Rows ``[:n]`` are drawn trials kept as they are, rows ``[n:]`` drawn trials whose two
        candidates are swapped. Columns ``[:k]`` give the swap null, ``[k:]`` the plain bootstrap;
        each half is ``[a, b, ref == a (R), ref == b (R), ref (R)]`` sums.
        """
        ref = self.reference
        a, b = self.a[:, None], self.b[:, None]
        keep = np.hstack([a, b, ref == a, ref == b, ref]).astype(np.float32)
        swap = np.hstack([b, a, ref == b, ref == a, ref]).astype(np.float32)
        return np.vstack([np.hstack([keep, keep]), np.hstack([swap, keep])])


def _stratum_kappas(
    sums: np.ndarray, n: np.ndarray, r: int, degenerate: Degenerate, unbiased: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Return mean-over-references kappas of candidates a and b from summed design columns."""
    acc_a, acc_b = sums[:, 0:1] / n, sums[:, 1:2] / n
    agree_a, agree_b = sums[:, 2 : 2 + r] / n, sums[:, 2 + r : 2 + 2 * r] / n
    acc_ref = sums[:, 2 + 2 * r : 2 + 3 * r] / n
    ka = kappa_from_rates(agree_a, acc_ref, acc_a, n, degenerate=degenerate, unbiased=unbiased)
    kb = kappa_from_rates(agree_b, acc_ref, acc_b, n, degenerate=degenerate, unbiased=unbiased)
    with quiet_nan_warnings():
        return np.nanmean(ka, axis=1), np.nanmean(kb, axis=1)


def _equal_ec(
    strata: list[_Stratum],
    *,
    n_resamples: int,
    confidence_level: float,
    degenerate: Degenerate,
    unbiased: bool,
    rng: np.random.Generator,
    batch: int | None = None,
) -> EqualECTestResult:
    n_resamples = check_n_resamples(n_resamples)
    check_confidence_level(confidence_level)
    check_degenerate(degenerate)
    designs = [s.design() for s in strata]
    widths = [2 + 3 * s.reference.shape[1] for s in strata]

    def deltas(count_rows: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        null_a: list[np.ndarray] = []
        null_b: list[np.ndarray] = []
        boot_a: list[np.ndarray] = []
        boot_b: list[np.ndarray] = []
        for w, d, k, s in zip(count_rows, designs, widths, strata, strict=True):
            sums = (w @ d).astype(np.float64)
            n = np.full((w.shape[0], 1), float(s.a.size))
            r = (k - 2) // 3
            for half, (out_a, out_b) in (
                (sums[:, :k], (null_a, null_b)),
                (sums[:, k:], (boot_a, boot_b)),
            ):
                ka, kb = _stratum_kappas(half, n, r, degenerate, unbiased)
                out_a.append(ka)
                out_b.append(kb)
        with quiet_nan_warnings():
            out = [np.nanmean(np.stack(x), axis=0) for x in (null_a, null_b, boot_a, boot_b)]
        return tuple(out)

    # observed: every trial drawn once, none swapped
    ones = [
        np.concatenate([np.ones(s.a.size), np.zeros(s.a.size)])[None].astype(np.float32)
        for s in strata
    ]
    _, _, obs_a, obs_b = deltas(ones)
    delta = float(obs_a[0] - obs_b[0])
    null = np.empty(n_resamples)
    boot = np.empty(n_resamples)
    step = batch_size(2 * max(s.a.size for s in strata), n_resamples, batch)  # 2 n count columns
    for sl in iter_batches(n_resamples, step):
        size = sl.stop - sl.start
        # an index drawn from [0, 2n) picks trial (i mod n) and swaps it iff i >= n: both uniform
        rows = [
            counts_from_indices(resample_indices(2 * s.a.size, size, rng, s.a.size), 2 * s.a.size)
            for s in strata
        ]
        null_a, null_b, boot_a, boot_b = deltas(rows)
        null[sl] = null_a - null_b
        boot[sl] = boot_a - boot_b
    return EqualECTestResult(
        kappa_a=float(obs_a[0]),
        kappa_b=float(obs_b[0]),
        delta=delta,
        ci=confidence_interval(boot, confidence_level),
        p_value=float(null_p_value(null, np.asarray(delta))),
        n=int(sum(s.a.size for s in strata)),
        n_resamples=n_resamples,
        null_distribution=null,
        bootstrap_distribution=boot,
    )


def equal_ec_test(
    reference: ArrayLike,
    candidate_a: ArrayLike,
    candidate_b: ArrayLike,
    *,
    strata: ArrayLike | None = None,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
    random_state: int | np.random.Generator | None = None,
) -> EqualECTestResult:
    """Test whether two candidates have equal EC to ``reference`` (Klein et al. 2025 swap null).

    ``reference`` is one correctness vector (trials) or a trials x R matrix (EC is then the mean
    kappa over the R reference observers, e.g. a model's mean kappa to the humans). With
    ``strata`` (one label per trial, e.g. conditions) trials are resampled within strata and EC
    is averaged over strata.
    """
    a = as_correctness(candidate_a, "candidate_a")
    b = as_correctness(candidate_b, "candidate_b")
    ref = np.asarray(reference)
    ref = ref[:, None] if ref.ndim == 1 else ref
    if ref.ndim != 2 or ref.shape[0] != a.size or b.size != a.size:
        raise ValueError(
            "reference must be trials or trials x observers with as many trials as the "
            f"candidates (got reference {np.shape(reference)}, candidates {a.size}, {b.size})"
        )
    ref = np.column_stack(
        [as_correctness(ref[:, j], f"reference[:, {j}]") for j in range(ref.shape[1])]
    )
    labels = np.zeros(a.size) if strata is None else np.asarray(strata)
    if labels.shape != (a.size,):
        raise ValueError(f"strata must hold one label per trial ({a.size}), got {labels.shape}")
    parts = [
        _Stratum(
            ref[labels == s].astype(float),
            a[labels == s].astype(float),
            b[labels == s].astype(float),
        )
        for s in pd.unique(labels)
    ]
    return _equal_ec(
        parts,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        degenerate=degenerate,
        unbiased=unbiased,
        rng=as_rng(random_state),
    )


def compare_models(
    trials: pd.DataFrame,
    *,
    observer: str = "observer",
    stimulus: str = "stimulus",
    correct: str = "correct",
    group: str = "group",
    condition: str | None = None,
    experiment: str | None = None,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    alpha: float = 0.05,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Return every pair of models' difference in mean EC to the humans, per experiment.

    Conditions are strata (stimuli seen by all compared observers); each row carries the
    swap-null p-value of :func:`equal_ec_test` and its Holm-Sidak adjustment across all rows.
    """
    tables, observers = condition_tables(
        trials, observer, stimulus, correct, group, condition, experiment
    )
    rng = as_rng(random_state)
    models = observers.loc[observers["group"] == MODEL, "observer"].tolist()
    rows = []
    for exp in sorted({t.experiment for t in tables}):
        exp_tables = [t for t in tables if t.experiment == exp]
        for m1, m2 in combinations(models, 2):
            strata = []
            for t in exp_tables:
                if m1 not in t.observers or m2 not in t.observers:
                    continue
                humans = [i for i, g in enumerate(t.groups) if g == HUMAN]
                cols = [*humans, t.observers.index(m1), t.observers.index(m2)]
                table = t.correct[:, cols]
                table = table[~np.isnan(table).any(axis=1)]
                if humans and len(table):
                    strata.append(_Stratum(table[:, :-2], table[:, -2], table[:, -1]))
            if not strata:
                continue
            res = _equal_ec(
                strata,
                n_resamples=n_resamples,
                confidence_level=confidence_level,
                degenerate=degenerate,
                unbiased=unbiased,
                rng=rng,
            )
            rows.append(
                {
                    "experiment": exp,
                    "model_a": m1,
                    "model_b": m2,
                    "kappa_a": res.kappa_a,
                    "kappa_b": res.kappa_b,
                    "delta": res.delta,
                    "ci_low": res.ci.low,
                    "ci_high": res.ci.high,
                    "p_value": res.p_value,
                    "n": res.n,
                }
            )
    out = pd.DataFrame(
        rows,
        columns=[
            "experiment",
            "model_a",
            "model_b",
            "kappa_a",
            "kappa_b",
            "delta",
            "ci_low",
            "ci_high",
            "p_value",
            "n",
        ],
    )
    adj = holm_sidak(out["p_value"].to_numpy(), alpha=alpha)
    out["p_holm_sidak"] = adj.p_adjusted
    out["reject"] = adj.reject
    return out
