"""The copy model of error consistency and trial planning (Klein et al. 2025, Proposition 2).

Observer 1 (the source) is correct on each trial with probability ``acc1``. Observer 2 (the
copier) copies observer 1's correctness with probability ``|p_copy|`` (its opposite when
``p_copy < 0``) and otherwise answers independently, correct with probability ``q`` (its
underlying marginal). Then ``c_obs - c_exp = p_copy * 2 acc1 (1 - acc1)``, so

    p_copy = kappa * (1 - c_exp) / (1 - [acc1**2 + (1 - acc1)**2]),
    q = (acc2 - p_copy acc1) / (1 - p_copy)                    (p_copy >= 0),
    q = (acc2 - |p_copy| (1 - acc1)) / (1 - |p_copy|)          (p_copy < 0),

with ``c_exp = acc1 acc2 + (1 - acc1)(1 - acc2)`` (Klein, Meyen, Brendel, Wichmann & Meding
2025, "Quantifying uncertainty in error consistency", Prop. 2). Every kappa in
``[kappa_min, kappa_max]`` of the two accuracies has such a representation.

Planning uses the large-sample variance of Cohen's kappa (Fleiss, Cohen & Everitt 1969,
Psychol. Bull. 72(5), written here as the delta method on the multinomial 2x2 table):
``Var(kappa) = [sum_ij p_ij g_ij**2 - (sum_ij p_ij g_ij)**2] / n`` with
``g_ij = [1{i=j} (1 - p_e) - (b_i + a_j)(1 - p_o)] / (1 - p_e)**2`` (``a``: observer 1's
marginals, ``b``: observer 2's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from humanlike.analysis._resampling import (
    as_rng,
    check_confidence_level,
    check_n_resamples,
    percentile_interval,
    quiet_nan_warnings,
)
from humanlike.analysis.error_consistency.bounds import kappa_max, kappa_min
from humanlike.analysis.error_consistency.kappa import (
    DEFAULT_DEGENERATE,
    Degenerate,
    check_degenerate,
    expected_consistency,
    kappa_from_rates,
)

_TOL = 1e-9


@dataclass(frozen=True)
class CopyModelParams:
    """Copy-model parameters reproducing ``kappa`` between accuracies ``acc1`` (source) and ``acc2``.

    ``copy_probability`` is signed (negative: the copier takes the opposite correctness);
    ``source_accuracy`` = acc1; ``copier_marginal`` = q, the copier's accuracy when not copying.
    """

    copy_probability: float
    source_accuracy: float
    copier_marginal: float


def _check_inputs(kappa: float, acc1: float, acc2: float) -> None:
    if not 0.0 < acc1 < 1.0:
        raise ValueError(f"acc1 (the source's accuracy) must lie strictly in (0, 1), got {acc1!r}")
    if not 0.0 <= acc2 <= 1.0:
        raise ValueError(f"acc2 must lie in [0, 1], got {acc2!r}")
    lo, hi = kappa_min(acc1, acc2), kappa_max(acc1, acc2)
    if not lo - _TOL <= kappa <= hi + _TOL:
        raise ValueError(
            f"kappa={kappa!r} is impossible for accuracies ({acc1}, {acc2}): it must lie in "
            f"[kappa_min, kappa_max] = [{lo:.6g}, {hi:.6g}]"
        )


def copy_model_params(kappa: float, acc1: float, acc2: float) -> CopyModelParams:
    """Return copy probability and the copier's underlying marginal (Klein et al. 2025, Prop. 2)."""
    _check_inputs(kappa, acc1, acc2)
    c_exp = float(expected_consistency(acc1, acc2))
    p_copy = kappa * (1.0 - c_exp) / (2.0 * acc1 * (1.0 - acc1))
    p_copy = float(np.clip(p_copy, -1.0, 1.0))
    r = abs(p_copy)
    if r >= 1.0 - _TOL:
        q = acc2  # the copier never answers on its own: any marginal fits
    elif p_copy >= 0:
        q = (acc2 - r * acc1) / (1.0 - r)
    else:
        q = (acc2 - r * (1.0 - acc1)) / (1.0 - r)
    return CopyModelParams(p_copy, float(acc1), float(np.clip(q, 0.0, 1.0)))


def simulate_copy_model(
    kappa: float,
    acc1: float,
    acc2: float,
    n_trials: int,
    rng: int | np.random.Generator | None = None,
    *,
    size: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return correctness of source and copier on ``n_trials`` trials drawn from the copy model.

    Arrays are boolean of shape ``(n_trials,)``, or ``(size, n_trials)`` for ``size``
    independent experiments. Their population kappa is ``kappa`` (Klein et al. 2025, Prop. 2).
    """
    if int(n_trials) != n_trials or n_trials < 1:
        raise ValueError(f"n_trials must be a positive integer, got {n_trials!r}")
    params = copy_model_params(kappa, acc1, acc2)
    gen = as_rng(rng)
    shape = (int(n_trials),) if size is None else (check_n_resamples(size, "size"), int(n_trials))
    source = gen.random(shape) < acc1
    copies = gen.random(shape) < abs(params.copy_probability)
    own = gen.random(shape) < params.copier_marginal
    copied = source if params.copy_probability >= 0 else ~source
    return source, np.where(copies, copied, own)


def joint_table(kappa: float, acc1: float, acc2: float) -> np.ndarray:
    """Return the 2x2 probabilities ``[[p11, p10], [p01, p00]]`` (1 = correct; rows: observer 1).

    They follow from ``c_obs = kappa (1 - c_exp) + c_exp`` and the two accuracies alone, so
    every generative model with these three numbers (the copy model among them) shares them.
    """
    _check_inputs(kappa, acc1, acc2)
    c_exp = float(expected_consistency(acc1, acc2))
    c_obs = kappa * (1.0 - c_exp) + c_exp
    p11 = (acc1 + acc2 + c_obs - 1.0) / 2.0
    table = np.array([[p11, acc1 - p11], [acc2 - p11, 1.0 - acc1 - acc2 + p11]])
    return np.clip(table, 0.0, 1.0)


def kappa_standard_error(kappa: float, acc1: float, acc2: float, n_trials: ArrayLike) -> np.ndarray:
    """Return the large-sample SE of Cohen's kappa for ``n_trials`` (Fleiss, Cohen & Everitt 1969)."""
    p = joint_table(kappa, acc1, acc2)
    a = p.sum(axis=1)  # observer 1 correct / wrong
    b = p.sum(axis=0)  # observer 2 correct / wrong
    p_o = np.trace(p)
    p_e = float(a @ b)
    if p_e >= 1.0:
        raise ValueError("kappa is undefined when both observers are constant (c_exp = 1)")
    g = (np.eye(2) * (1.0 - p_e) - (b[:, None] + a[None, :]) * (1.0 - p_o)) / (1.0 - p_e) ** 2
    var1 = float((p * g**2).sum() - (p * g).sum() ** 2)
    n = np.asarray(n_trials, dtype=float)
    if np.any(n < 1):
        raise ValueError("n_trials must be at least 1")
    return np.sqrt(max(var1, 0.0) / n)


PRECISE_HALFWIDTH = 0.2
"""A pair's kappa CI wider than +- this says too little to compare pairs (or models) by: the
pair has too few errors (``planned_trials`` gives the trials for this width)."""


def kappa_se_per_trial(c_obs: ArrayLike, acc1: ArrayLike, acc2: ArrayLike) -> np.ndarray:
    """The one-trial SE of Cohen's kappa (SE at n trials: this / sqrt(n); Fleiss, Cohen & Everitt
    1969) from observed agreement and accuracies, elementwise (the joint table of
    :func:`joint_table` from ``c_obs`` directly); NaN where ``c_exp = 1``."""
    c_obs, a1, a2 = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (c_obs, acc1, acc2)))
    p11 = np.clip((a1 + a2 + c_obs - 1.0) / 2.0, 0.0, 1.0)
    p = np.stack([np.stack([p11, np.clip(a1 - p11, 0, 1)], -1),
                  np.stack([np.clip(a2 - p11, 0, 1), np.clip(1.0 - a1 - a2 + p11, 0, 1)], -1)],
                 -2)  # (..., 2, 2), rows: observer 1 correct / wrong
    a, b = p.sum(axis=-1), p.sum(axis=-2)
    p_o = p[..., 0, 0] + p[..., 1, 1]
    p_e = (a * b).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = (np.eye(2) * (1.0 - p_e)[..., None, None]
             - (b[..., :, None] + a[..., None, :]) * (1.0 - p_o)[..., None, None]) / (
            (1.0 - p_e) ** 2)[..., None, None]
        var1 = (p * g**2).sum(axis=(-2, -1)) - (p * g).sum(axis=(-2, -1)) ** 2
    return np.where(p_e < 1.0, np.sqrt(np.maximum(var1, 0.0)), np.nan)


def planned_trials(c_obs: ArrayLike, acc1: ArrayLike, acc2: ArrayLike, ci_halfwidth: float,
                   confidence_level: float = 0.95) -> np.ndarray:
    """Trials a pair needs for a kappa CI of half-width ``ci_halfwidth`` at its observed rates,
    ``ceil((z SE_1 / h)**2)`` (the analytic plan of :func:`trials_needed`, Klein et al. 2025),
    elementwise; NaN where kappa is undefined."""
    check_confidence_level(confidence_level)
    z = stats.norm.ppf(0.5 + confidence_level / 2.0)
    return np.ceil((z * kappa_se_per_trial(c_obs, acc1, acc2) / ci_halfwidth) ** 2)


@dataclass(frozen=True)
class SimulatedKappa:
    """Kappa of ``n_sim`` copy-model experiments per trial count ``n_trials``.

    ``distribution``: (len(n_trials), n_sim) kappas, NaN where undefined under ``degenerate``;
    ``dropped``: per trial count, the experiments left out as undefined (near ceiling most of them
    under ``"undefined"``: a constant observer); ``median``, ``mean``: over the rest.
    """

    n_trials: np.ndarray
    distribution: np.ndarray = field(repr=False)
    dropped: np.ndarray
    median: np.ndarray
    mean: np.ndarray
    n_sim: int
    degenerate: str

    def ci_halfwidth(self, confidence_level: float = 0.95) -> np.ndarray:
        """Half the central ``confidence_level`` range of the defined kappas, per trial count."""
        low, high = percentile_interval(self.distribution, confidence_level, axis=1)
        return (high - low) / 2.0


def simulated_kappa(
    kappa: float,
    acc1: float,
    acc2: float,
    n_trials: ArrayLike,
    *,
    n_sim: int = 2000,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    random_state: int | np.random.Generator | None = None,
    copies: str = "random",
) -> SimulatedKappa:
    """Simulate ``n_sim`` copy-model experiments per ``n`` in ``n_trials`` and score them.

    ``copies="random"`` (ours, Prop. 2 as stated): each trial is copied with probability
    ``|p_copy|``, so the trials are i.i.d. and the 2x2 table is multinomial with
    :func:`joint_table` probabilities. ``copies="fixed"`` (Klein et al.'s released simulator):
    exactly ``round(|p_copy| n)`` trials are copied and the rest drawn independently. All
    experiments per ``n`` are drawn at once; ``dropped`` counts those undefined under
    ``degenerate`` (``"klein2025"`` scores a constant observer 0 and drops only c_exp = 1).
    """
    check_degenerate(degenerate)
    n_sim = check_n_resamples(n_sim, "n_sim")
    if copies not in ("random", "fixed"):
        raise ValueError(f"copies must be 'random' or 'fixed', got {copies!r}")
    rng = as_rng(random_state)
    n = np.atleast_1d(np.asarray(n_trials, dtype=np.int64))
    if np.any(n < 2):
        raise ValueError("n_trials must be at least 2")
    if copies == "random":
        cells = joint_table(kappa, acc1, acc2).ravel()
        table = rng.multinomial(n[:, None], np.broadcast_to(cells, (n.size, n_sim, 4)))
    else:
        table = _fixed_copy_tables(kappa, acc1, acc2, n, n_sim, rng)
    nf = n[:, None].astype(float)
    kap = kappa_from_rates(
        (table[..., 0] + table[..., 3]) / nf,
        (table[..., 0] + table[..., 1]) / nf,
        (table[..., 0] + table[..., 2]) / nf,
        nf,
        degenerate=degenerate,
    )
    dropped = np.isnan(kap).sum(axis=1)
    with quiet_nan_warnings():
        median, mean = np.nanmedian(kap, axis=1), np.nanmean(kap, axis=1)
    return SimulatedKappa(
        n_trials=n,
        distribution=kap,
        dropped=dropped,
        median=median,
        mean=mean,
        n_sim=n_sim,
        degenerate=degenerate,
    )


def simulated_ci_halfwidth(
    kappa: float,
    acc1: float,
    acc2: float,
    n_trials: ArrayLike,
    *,
    n_sim: int = 2000,
    confidence_level: float = 0.95,
    random_state: int | np.random.Generator | None = None,
    copies: str = "random",
    degenerate: Degenerate = DEFAULT_DEGENERATE,
) -> np.ndarray:
    """Return half the central ``confidence_level`` range of kappa over simulated experiments.

    The experiments of :func:`simulated_kappa` (``copies``: ``"random"``, each trial copied with
    probability ``|p_copy|``, or ``"fixed"``, Klein et al.'s ``round(|p_copy| n)`` copied trials,
    which removes the binomial spread of the number copied and gives narrower intervals); the
    undefined ones are left out (their count: ``simulated_kappa(...).dropped``).
    """
    check_confidence_level(confidence_level)
    sim = simulated_kappa(
        kappa,
        acc1,
        acc2,
        n_trials,
        n_sim=n_sim,
        degenerate=degenerate,
        random_state=random_state,
        copies=copies,
    )
    return sim.ci_halfwidth(confidence_level)


def _fixed_copy_tables(kappa: float, acc1: float, acc2: float, n: np.ndarray, n_sim: int,
                       rng: np.random.Generator) -> np.ndarray:
    """2x2 tables ``(n.size, n_sim, 4)`` [11, 10, 01, 00] with exactly ``round(|p_copy| n)``
    copied trials: those agree with the source (or disagree, p_copy < 0); the others are
    independent draws with the source's accuracy and the copier's own marginal ``q``."""
    params = copy_model_params(kappa, acc1, acc2)
    q = params.copier_marginal
    m = np.round(abs(params.copy_probability) * n).astype(np.int64)[:, None]
    shape = (n.size, n_sim)
    copied_right = rng.binomial(np.broadcast_to(m, shape), acc1)  # source right on copied trials
    free = rng.multinomial(np.broadcast_to(n[:, None] - m, shape),
                           np.broadcast_to([acc1 * q, acc1 * (1 - q), (1 - acc1) * q,
                                            (1 - acc1) * (1 - q)], (*shape, 4)))
    copied = np.zeros((*shape, 4), dtype=np.int64)
    if params.copy_probability >= 0:
        copied[..., 0], copied[..., 3] = copied_right, m - copied_right
    else:
        copied[..., 1], copied[..., 2] = copied_right, m - copied_right
    return copied + free


def trials_needed(
    kappa: float,
    acc1: float,
    acc2: float,
    ci_halfwidth: float,
    *,
    confidence_level: float = 0.95,
    method: str = "analytic",
    n_sim: int = 2000,
    random_state: int | np.random.Generator | None = None,
    copies: str = "random",
) -> int:
    """Return the trials needed for a kappa CI of half-width ``ci_halfwidth`` (Klein et al. 2025).

    ``method="analytic"``: ``n = ceil((z_{1-alpha/2} * SE_1 / h)**2)`` with the one-trial SE of
    :func:`kappa_standard_error`. ``method="simulation"``: copy-model experiments at five sizes
    around the analytic answer give half-widths ``h(n)``; ``c = median(h(n) sqrt(n))`` and
    ``n = ceil((c / h)**2)``; ``copies`` as in :func:`simulated_ci_halfwidth`.
    """
    check_confidence_level(confidence_level)
    if not 0.0 < ci_halfwidth < 2.0:
        raise ValueError(f"ci_halfwidth must lie in (0, 2), got {ci_halfwidth!r}")
    if method not in ("analytic", "simulation"):
        raise ValueError(f"method must be 'analytic' or 'simulation', got {method!r}")
    z = stats.norm.ppf(0.5 + confidence_level / 2.0)
    se1 = float(kappa_standard_error(kappa, acc1, acc2, 1))
    n0 = max(2, math.ceil((z * se1 / ci_halfwidth) ** 2))
    if method == "analytic":
        return int(n0)
    grid = np.unique(np.maximum(10, np.round(n0 * np.array([0.5, 0.75, 1.0, 1.5, 2.0]))))
    h = simulated_ci_halfwidth(
        kappa,
        acc1,
        acc2,
        grid,
        n_sim=n_sim,
        confidence_level=confidence_level,
        random_state=random_state,
        copies=copies,
    )
    c = float(np.median(h * np.sqrt(grid)))
    return int(max(2, math.ceil((c / ci_halfwidth) ** 2)))
