"""Choose a balanced subset of controversial stimuli for one model pair.

Each candidate stimulus n targets class a_n for model 1 and class b_n for model 2 and has
controversiality c_n. The selection maximises sum_n c_n x_n over binary x subject to every class
being targeted exactly ``per_class`` times by each model:

    sum_{n: a_n = k} x_n = per_class   and   sum_{n: b_n = k} x_n = per_class   for every class k,

an integer linear program solved with ``scipy.optimize.milp`` (HiGHS branch and bound). With K = 10
classes and per_class = 2 this picks the 20 stimuli per model pair of Golan, Raju & Kriegeskorte (2020).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, sparse


@dataclass(frozen=True)
class Selection:
    """Chosen candidate indices (ascending), their total controversiality and whether it is complete."""

    index: np.ndarray
    total: float
    per_class: int
    complete: bool


def _validate(
    class_1: np.ndarray, class_2: np.ndarray, scores: np.ndarray, n_classes: int, per_class: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = np.asarray(class_1), np.asarray(class_2)
    c = np.asarray(scores, dtype=float)
    if not (a.shape == b.shape == c.shape) or a.ndim != 1:
        raise ValueError("class_1, class_2 and scores must be 1-d arrays of equal length")
    if not np.all(np.isfinite(c)):
        raise ValueError("scores must be finite")
    for name, v in (("class_1", a), ("class_2", b)):
        if v.size and (
            not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= n_classes
        ):
            raise ValueError(f"{name} must hold class indices in [0, {n_classes - 1}]")
    if per_class < 1:
        raise ValueError("per_class must be at least 1")
    return a, b, c


def select_balanced(
    class_1: np.ndarray,
    class_2: np.ndarray,
    scores: np.ndarray,
    *,
    n_classes: int,
    per_class: int = 2,
) -> Selection:
    """Maximise total controversiality with every class targeted exactly ``per_class`` times per model.

    Raises ``ValueError`` when no such selection exists among the candidates.
    """
    a, b, c = _validate(class_1, class_2, scores, n_classes, per_class)
    n = len(c)
    cols = np.arange(n)
    # Rows 0..K-1: how often model 1 is targeted at class k; rows K..2K-1: the same for model 2.
    incidence = sparse.csr_array(
        (np.ones(2 * n), (np.concatenate([a, n_classes + b]), np.concatenate([cols, cols]))),
        shape=(2 * n_classes, n),
    )
    result = optimize.milp(
        -c,
        constraints=optimize.LinearConstraint(incidence, per_class, per_class),
        integrality=np.ones(n),
        bounds=optimize.Bounds(0, 1),
    )
    if result.status != 0 or result.x is None:
        raise ValueError(
            f"no selection targets every one of the {n_classes} classes exactly {per_class} times "
            f"per model among the {n} candidates ({result.message})"
        )
    index = np.flatnonzero(result.x > 0.5)
    return Selection(index, float(c[index].sum()), per_class, True)


def select_greedy(
    class_1: np.ndarray,
    class_2: np.ndarray,
    scores: np.ndarray,
    *,
    n_classes: int,
    per_class: int = 2,
) -> Selection:
    """Baseline: take candidates by decreasing score while neither targeted class is full.

    May end with fewer than ``per_class * n_classes`` stimuli (``complete`` False).
    """
    a, b, c = _validate(class_1, class_2, scores, n_classes, per_class)
    used_1 = np.zeros(n_classes, dtype=int)
    used_2 = np.zeros(n_classes, dtype=int)
    chosen = []
    for i in np.argsort(-c, kind="stable"):
        if used_1[a[i]] < per_class and used_2[b[i]] < per_class:
            chosen.append(i)
            used_1[a[i]] += 1
            used_2[b[i]] += 1
    index = np.sort(np.array(chosen, dtype=int))
    complete = bool(np.all(used_1 == per_class) and np.all(used_2 == per_class))
    return Selection(index, float(c[index].sum()), per_class, complete)
