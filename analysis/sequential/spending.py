"""Group-sequential boundaries from an alpha-spending function (Lan & DeMets 1983).

The boundaries are computed exactly for the normal approximation (Brownian motion in information
time) by recursive numerical integration of the continuation density (Armitage, McPherson & Rowe
1969; Jennison & Turnbull 2000, ch. 19), with the Simpson grid and density update of ``gsdesign``
(the Python port of gsDesign's ``gridpts``/``h1``/``hupdate``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gsdesign import h1, hupdate
from scipy.optimize import brentq
from scipy.stats import norm

GRID_R = 18  # gsDesign's default Simpson stencil: boundaries to about 1e-6 (Jennison & Turnbull ch. 19)


def obrien_fleming_spending(fractions: np.ndarray, alpha_side: float) -> np.ndarray:
    """Alpha spent on one side by information fraction t: 2 - 2 Phi(z_{1 - a/2} / sqrt(t))
    (Lan & DeMets 1983, eq. 2.1, O'Brien-Fleming type; gsDesign ``sfLDOF``)."""
    t = np.asarray(fractions, dtype=float)
    return 2.0 - 2.0 * norm.cdf(norm.ppf(1.0 - alpha_side / 2.0) / np.sqrt(t))


def _exit_probability(c: float, grid: tuple[np.ndarray, np.ndarray, np.ndarray], info: float,
                      info_prev: float) -> float:
    """P(|Z_j| >= c, no earlier exit) under H0 from the previous continuation density."""
    z_prev, _, h_prev = grid
    step = np.sqrt(info - info_prev)
    centre = z_prev * np.sqrt(info_prev)
    upper = norm.sf((c * np.sqrt(info) - centre) / step)
    lower = norm.cdf((-c * np.sqrt(info) - centre) / step)
    return float(h_prev @ (upper + lower))


def obrien_fleming_boundaries(fractions: Sequence[float], alpha: float) -> np.ndarray:
    """Two-sided symmetric |z| boundaries c_j at information fractions t_j, each side spending
    alpha/2 by the O'Brien-Fleming-type function: P_0(|Z_j| >= c_j, |Z_i| < c_i for i < j) equals the
    spending increment (Lan & DeMets 1983, eq. 2.2; Reboussin et al. 2000, appendix)."""
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1:
        raise ValueError("information fractions must increase within (0, 1]")
    if not 0 < alpha < 1:
        raise ValueError("alpha must lie in (0, 1)")
    increments = 2.0 * np.diff(obrien_fleming_spending(t, alpha / 2.0), prepend=0.0)
    bounds = np.empty(t.size)
    bounds[0] = norm.isf(increments[0] / 2.0)
    grid = h1(r=GRID_R, theta=0.0, info=float(t[0]), a=-bounds[0], b=bounds[0])
    for j in range(1, t.size):  # one root per declared look (a handful), not per participant
        info, prev = float(t[j]), float(t[j - 1])
        bounds[j] = brentq(lambda c, g=grid, i=info, p=prev, a=increments[j]:
                           _exit_probability(c, g, i, p) - a, 1e-6, 40.0, xtol=1e-10)
        grid = hupdate(GRID_R, 0.0, info, -bounds[j], bounds[j], 0.0, prev, grid)
    return bounds
