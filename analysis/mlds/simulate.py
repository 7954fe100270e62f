"""Simulated MLDS observers: responses drawn from the difference-scaling model.

An observer with standard scale psi (psi_1 = 0, psi_N = 1) and noise sigma answers a triad
(a, b, c) with 1 ("(b, c) differs more") when (psi_c - psi_b) - (psi_b - psi_a) + eps > 0 and a
quadruple (a, b; c, d) when (psi_d - psi_c) - (psi_b - psi_a) + eps > 0, eps ~ N(0, sigma^2)
(Maloney & Yang 2003; Knoblauch & Maloney 2008).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from humanlike.analysis.mlds.data import DESIGN_WEIGHTS, Design, check_design


def decision_means(levels: np.ndarray, psi: np.ndarray, *, design: Design = "triads",
                   group: np.ndarray | None = None) -> np.ndarray:
    """Noise-free decision variable sum_j w_j psi[S_j] of each trial (1-based levels).

    ``psi`` is one scale (N,) or one per group (G, N) selected by ``group`` (n,) codes."""
    weights = np.asarray(DESIGN_WEIGHTS[check_design(design)])
    levels = np.asarray(levels, dtype=np.int64)
    if levels.ndim != 2 or levels.shape[1] != weights.size:
        raise ValueError(f"levels must be (n, {weights.size}) for design={design!r}, "
                         f"got {levels.shape}")
    psi = np.asarray(psi, dtype=float)
    if psi.ndim == 1:
        values = psi[levels - 1]
    else:
        if group is None:
            raise ValueError("psi has one row per group; pass group codes for every trial")
        values = psi[np.asarray(group)[:, None], levels - 1]
    return values @ weights


def response_probability(levels: np.ndarray, psi: np.ndarray, sigma: float | np.ndarray, *,
                         design: Design = "triads", group: np.ndarray | None = None
                         ) -> np.ndarray:
    """P(response = 1) = Phi(Delta / sigma) for each trial (sigma scalar or per group)."""
    sigma = np.asarray(sigma, dtype=float)
    if sigma.ndim and group is not None:
        sigma = sigma[np.asarray(group)]
    return special.ndtr(decision_means(levels, psi, design=design, group=group) / sigma)


def simulate_responses(levels: np.ndarray, psi: np.ndarray, sigma: float | np.ndarray, *,
                       design: Design = "triads", group: np.ndarray | None = None,
                       random_state: int | np.random.Generator | None = None) -> np.ndarray:
    """One 0/1 response per trial drawn from the MLDS observer model."""
    rng = np.random.default_rng(random_state)
    p = response_probability(levels, psi, sigma, design=design, group=group)
    return (rng.random(p.shape) < p).astype(np.int64)
