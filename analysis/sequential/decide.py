"""One entry point: decide every model pair from per-participant score differences under a
declared monitoring scheme, for one study (N, K) or many simulated studies (R, N, K) at once.

Schemes:
- ``continuous``: any number of looks, any time. Per pair an e-process for mean difference 0: the
  hedged betting capital process for a bounded mean (Waudby-Smith & Ramdas 2024) with the
  universal-portfolio mixture of bets (``betting_mixture``, the default; Cover & Ordentlich 1996)
  or aGRAPA plug-in bets (``betting``), or the safe t-test; the pairs by closed testing with e-Bonferroni intersections (``closure``: a pair
  is decided at e >= K/alpha, then (K-1)/alpha once another is decided, ... down to 1/alpha), so
  P(any false decision at any look) <= alpha by Ville's inequality.
- ``fixed_n``: one look at a declared N; one-sample t-test per pair, Holm-Sidak over the pairs.
- ``group_sequential``: declared looks; per pair a two-sided z-test (normal approximation) with
  Lan-DeMets O'Brien-Fleming-type alpha spending, the pairs by closed testing with alpha/|S|
  boundaries for each intersection (Holm's step-down, Maurer & Bretz 2013).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from humanlike.analysis.sequential.betting import (
    THETA,
    confidence_bounds,
    log_capital,
    log_hedged,
    log_mixture_capital,
)
from humanlike.analysis.sequential.closure import closed_decision_times, first_crossings
from humanlike.analysis.sequential.running import holm_sidak_adjust, running_moments, running_t
from humanlike.analysis.sequential.safe_t import log_safe_t
from humanlike.analysis.sequential.spending import obrien_fleming_boundaries

SCHEMES = ("continuous", "fixed_n", "group_sequential")
METHODS = ("betting_mixture", "betting", "safe_t")  # continuous: bounded-mean betting (any
# distribution in the bound; universal-portfolio mixture or aGRAPA bets) or the safe t-test
DEFAULT_METHOD = METHODS[0]
BOUND = 2.0  # |r_i(A) - r_i(B)| <= 2 for per-participant Pearson r


@dataclass(frozen=True)
class SequentialDecision:
    """Per study (leading axis R, absent for one study) and pair (last axis K): the running
    ``estimate`` (mean difference A - B) and ``statistic`` at each look (e-value for continuous,
    t/z otherwise) against ``critical``, the first step's threshold (K/alpha, or the alpha/K |z|
    boundary per look; later steps use alpha/s, see ``closure``; NaN for fixed_n,
    which decides by ``p_adjusted``), confidence-sequence ``lower``/``upper`` bounds (continuous),
    ``decided``, ``direction`` (+1: A better, -1: B better, 0: undecided), ``decided_look`` (index
    into ``looks``, -1) and ``decided_at`` (participants, -1), and the ``guarantee`` that holds."""

    scheme: str
    alpha: float
    looks: np.ndarray
    estimate: np.ndarray
    statistic: np.ndarray
    critical: np.ndarray
    decided: np.ndarray
    direction: np.ndarray
    decided_look: np.ndarray
    decided_at: np.ndarray
    guarantee: str
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    p_adjusted: np.ndarray | None = None

    def met(self) -> np.ndarray | bool:
        """Whether every pair is decided: the stopping indicator under the declared scheme."""
        return np.all(self.decided, axis=-1)

    def participants_to_decision(self) -> np.ndarray | float:
        """Participants at which the last pair was decided; inf where some pair never was."""
        at = np.where(self.decided, self.decided_at, np.inf).astype(float)
        return np.max(at, axis=-1)


def _validate(differences: np.ndarray, scheme: str, alpha: float, looks: Sequence[int] | None,
              bound: float) -> tuple[np.ndarray, np.ndarray]:
    """(R, N, K) differences and the looks (participant counts), or a ValueError naming the field."""
    if scheme not in SCHEMES:
        raise ValueError(f"monitoring: unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: {alpha} is not in (0, 1)")
    d = np.asarray(differences, dtype=float)
    if d.ndim not in (2, 3) or 0 in d.shape:
        raise ValueError("differences: expected a non-empty (N, K) or (R, N, K) array")
    d = d if d.ndim == 3 else d[None]
    if np.any(np.abs(d[np.isfinite(d)]) > bound) or np.any(np.isinf(d)):
        raise ValueError(f"differences: values must lie in [-{bound:g}, {bound:g}]")
    n = d.shape[1]
    if looks is None:
        grid = np.arange(1, n + 1) if scheme == "continuous" else np.array([n])
    else:
        grid = np.asarray(looks, dtype=int)
        if grid.ndim != 1 or grid.size == 0 or np.any(np.diff(grid) <= 0) or grid[0] < 1 or grid[-1] > n:
            raise ValueError(f"looks: must increase within 1..{n} (participants so far)")
    if scheme == "fixed_n" and grid.size != 1:
        raise ValueError("looks: fixed_n has exactly one look, at the declared N")
    return d, grid


def _closed(crossed_by_size: np.ndarray, looks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """decided, look index and participants per pair by closed testing, from (R, S, L, K) crossings
    of each pair's alpha/s test (``closure.closed_decision_times``)."""
    times = closed_decision_times(first_crossings(crossed_by_size))
    decided = np.isfinite(times)
    index = np.where(decided, times, -1).astype(int)
    return decided, index, np.where(decided, looks[np.maximum(index, 0)], -1)


def _at_look(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(R, K) values of (R, L, K) at each pair's look index (index >= 0)."""
    return np.take_along_axis(values, np.maximum(index, 0)[:, None, :], axis=1)[:, 0, :]


def continuous(d: np.ndarray, alpha: float, looks: np.ndarray, bound: float, bounds: bool,
               method: str) -> dict:
    """Per pair an e-process for mean 0, decided by closed testing at e >= s/alpha (Vovk & Wang
    2021 §5; Ville's inequality): ``betting``, the hedged capital process (WSR 2024 §4.2 Thm 3) with the
    side whose capital crossed as the direction; ``safe_t``, the safe t-test with the sign of the
    mean; ``betting_mixture``, the same hedged process with the universal-portfolio mixture of
    bets (``betting.log_mixture_capital``). CS bounds (betting) in difference units when ``bounds``."""
    k = d.shape[2]
    level = alpha / k
    idx = looks - 1
    lower = upper = None
    if method in ("betting", "betting_mixture"):
        mixture = method == "betting_mixture"
        x = (d + bound) / (2.0 * bound)
        log_plus, log_minus = (log_mixture_capital if mixture else log_capital)(x, 0.5)
        log_e = log_hedged(log_plus, log_minus)[:, idx]
        side = np.log(THETA) + log_plus[:, idx] >= np.log(1.0 - THETA) + log_minus[:, idx]
        if bounds:
            low, high = confidence_bounds(x, level, mixture=mixture)
            lower, upper = (2.0 * bound * low - bound)[:, idx], (2.0 * bound * high - bound)[:, idx]
        source = (f"betting e-process for a mean bounded in [-{bound:g}, {bound:g}]"
                  + (", universal-portfolio bets" if mixture else ", aGRAPA bets"))
    else:
        log_e = log_safe_t(d[:, : looks[-1]])[:, idx]
        _, mean, _ = running_moments(d[:, : looks[-1]])
        side = mean[:, idx] > 0
        source = "safe t-test e-process, exact for normal differences"
    sizes = np.arange(1, k + 1)[None, :, None, None]
    decided, index, at = _closed(log_e[:, None] >= np.log(sizes / alpha), looks)
    up = _at_look(side, index)
    with np.errstate(over="ignore"):
        e_value = np.exp(log_e)
    return dict(statistic=e_value, critical=np.full(looks.size, 1.0 / level), decided=decided,
                direction=np.where(decided, np.where(up, 1, -1), 0), decided_look=index,
                decided_at=at, lower=lower, upper=upper,
                guarantee=f"family-wise error <= {alpha:g} at any number of looks ({source}; "
                          f"closed testing over {k} pairs)")


def fixed_n(d: np.ndarray, alpha: float, looks: np.ndarray) -> dict:
    """Two-sided one-sample t-test per pair at the one look, Holm-Sidak over pairs (Holm 1979)."""
    t, n = running_t(d[:, : looks[0]])
    t, n = t[:, -1:], n[:, -1:]
    p = 2.0 * student_t.sf(np.abs(t), df=np.maximum(n - 1, 1))
    p = np.where(np.isfinite(t), p, 1.0)[:, 0]
    adjusted = holm_sidak_adjust(p)
    decided = adjusted <= alpha
    return dict(statistic=t, critical=np.full(1, np.nan), decided=decided,
                direction=np.where(decided, np.sign(t[:, 0]).astype(int), 0),
                decided_look=np.where(decided, 0, -1), decided_at=np.where(decided, looks[0], -1),
                p_adjusted=adjusted,
                guarantee=f"family-wise error <= {alpha:g} at the one declared look N = {looks[0]} "
                          "(t-test, Holm-Sidak); none for earlier looks")


def group_sequential(d: np.ndarray, alpha: float, looks: np.ndarray) -> dict:
    """Per pair, |z_j| >= c_j(alpha/s) at the declared looks, c from O'Brien-Fleming-type spending
    at information fractions n_j / n_J (Lan & DeMets 1983; normal approximation), closed testing
    over pairs; ``critical`` is the first step's alpha/K boundary."""
    k = d.shape[2]
    z, _ = running_t(d[:, : looks[-1]])
    z = z[:, looks - 1]
    by_size = np.stack([obrien_fleming_boundaries(looks / looks[-1], alpha / s)
                        for s in range(1, k + 1)])  # (S, L): K boundary sets, one per subset size
    decided, index, at = _closed(np.abs(np.nan_to_num(z))[:, None] >= by_size[None, :, :, None], looks)
    critical = by_size[-1]
    sign = np.sign(_at_look(z, index)).astype(int)
    return dict(statistic=z, critical=critical, decided=decided,
                direction=np.where(decided, sign, 0), decided_look=index, decided_at=at,
                guarantee=f"family-wise error <= {alpha:g} at the {looks.size} declared looks "
                          f"(O'Brien-Fleming-type spending, closed testing over {k} pairs; normal "
                          "approximation)")


def decide(differences: np.ndarray, scheme: str = "continuous", alpha: float = 0.05,
           looks: Sequence[int] | None = None, bound: float = BOUND,
           bounds: bool | None = None, method: str = DEFAULT_METHOD) -> SequentialDecision:
    """Decide every pair from (N, K) or (R, N, K) per-participant differences r_i(A) - r_i(B) in
    arrival order, in [-bound, bound], under ``scheme`` at family-wise level ``alpha``.

    ``looks``: participant counts at which the study is analysed (continuous: default every
    participant; fixed_n: default N, one look; group_sequential: required, the declared
    schedule, the last one the maximum N). ``bounds`` (continuous only): compute the confidence
    sequence (default for one study, off for simulations); ``method`` (continuous only):
    ``betting_mixture`` (the default) or ``betting`` (valid for any distribution in the bound) or
    ``safe_t`` (exact for normal differences)."""
    d, grid = _validate(differences, scheme, alpha, looks, bound)
    single = np.ndim(differences) == 2
    if method not in METHODS:
        raise ValueError(f"method: unknown {method!r}; expected one of {', '.join(METHODS)}")
    if scheme == "group_sequential" and looks is None:
        raise ValueError("looks: group_sequential needs its declared looks")
    if scheme == "continuous":
        parts = continuous(d, alpha, grid, bound, single if bounds is None else bounds, method)
    elif scheme == "fixed_n":
        parts = fixed_n(d, alpha, grid)
    else:
        parts = group_sequential(d, alpha, grid)
    _, mean, _ = running_moments(d[:, : grid[-1]])
    parts["estimate"] = mean[:, grid - 1]
    if single:
        parts = {key: value if key in ("critical", "guarantee") or value is None else value[0]
                 for key, value in parts.items()}
    return SequentialDecision(scheme=scheme, alpha=alpha, looks=grid, **parts)
