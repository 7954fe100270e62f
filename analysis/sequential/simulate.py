"""Simulated per-participant score differences for checking the schemes (bench and tests).

Each participant's score for model m is a correlation r_im = tanh(atanh(rho_m) + u_i + e_im)
(Fisher z scale): u_i ~ N(0, participant_sd) is how well the participant agrees with models in
general (shared by all models), e_im ~ N(0, model_sd) the model-specific part. Pair (a, b), a < b,
gets d_i = r_ia - r_ib in [-2, 2]. With every rho_m equal the models are exchangeable, so every pair's
difference is symmetric about 0: an exact null with correlated pairs, as in a real study."""

from __future__ import annotations

from itertools import combinations

import numpy as np


def score_differences(n_studies: int, n_participants: int, model_r: np.ndarray | list[float],
                      rng: np.random.Generator, participant_sd: float = 0.3,
                      model_sd: float = 0.15) -> np.ndarray:
    """(R, N, K) differences r_ia - r_ib for the pairs a < b of len(model_r) models."""
    rho = np.asarray(model_r, dtype=float)
    z = (np.arctanh(rho)[None, None, :]
         + participant_sd * rng.standard_normal((n_studies, n_participants, 1))
         + model_sd * rng.standard_normal((n_studies, n_participants, rho.size)))
    r = np.tanh(z)
    pairs = list(combinations(range(rho.size), 2))
    return np.stack([r[..., a] - r[..., b] for a, b in pairs], axis=-1)


def skewed_null(n_studies: int, n_participants: int, n_pairs: int, rng: np.random.Generator,
                scale: float = 2.0) -> np.ndarray:
    """(R, N, K) independent differences scale (B - 1/4), B ~ Beta(2, 6): mean exactly 0, skewed,
    in [-scale/4, 3 scale/4]."""
    return scale * (rng.beta(2.0, 6.0, (n_studies, n_participants, n_pairs)) - 0.25)
