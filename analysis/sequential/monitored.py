"""A study's model pairs decided under its declared monitoring (the spec's ``[stopping]``
``monitoring``, ``alpha`` and ``looks``) from each participant's score per model in completion
order: what the live panel's stopping indicator and the study report both say (one computation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from humanlike.analysis.sequential.decide import BOUND, DEFAULT_METHOD, decide


def monitored_pairs(r: np.ndarray, models: list[str], pairs: list[tuple[str, str]],
                    stopping: Mapping[str, Any]) -> dict[str, Any]:
    """Every model pair decided under the declared ``monitoring`` from ``r`` (models x
    participants, participants in completion order; Pearson r, so differences lie in [-2, 2]) as
    the spec's ``[stopping]`` table declares (``monitoring``, ``alpha``, ``looks``):
    ``monitored_differences`` of the pairs' per-participant differences."""
    return monitored_differences(pair_differences(r, models, pairs), pairs, stopping, BOUND)


def pair_differences(scores: np.ndarray, models: list[str],
                     pairs: list[tuple[str, str]]) -> np.ndarray:
    """(participants, pairs) score_a - score_b from ``scores`` (models x participants)."""
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[x] for x, _ in pairs], dtype=int)
    b = np.array([index[y] for _, y in pairs], dtype=int)
    return (scores[a] - scores[b]).T


def monitored_differences(d: np.ndarray, pairs: list[tuple[str, str]],
                          stopping: Mapping[str, Any], bound: float,
                          shown: np.ndarray | None = None) -> dict[str, Any]:
    """Every pair decided under the declared monitoring from ``d`` (participants in completion
    order x pairs), each in [-bound, bound] as known before the participant answered: the scheme,
    its guarantee, the participants analysed and per pair the running difference (``shown``, the
    same shape, when the tested values are a rescaling of it; then no confidence-sequence bounds
    are given, as they would be on the rescaled values), its e-value / statistic, the
    confidence-sequence bounds (continuous) and the decision (``analysis.sequential.decide``;
    continuous with the declared ``test``, betting or safe_t)."""
    scheme = str(stopping.get("monitoring") or "continuous")
    alpha = float(stopping.get("alpha", 0.05))
    keep = np.all(np.isfinite(d), axis=1)  # a score undefined (constant ratings): not analysable
    d = d[keep]
    estimates = d if shown is None else np.asarray(shown, dtype=float)[keep]
    n = len(d)
    declared = [int(x) for x in stopping.get("looks") or []]
    state: dict[str, Any] = {"scheme": scheme, "alpha": alpha, "n": n, "looks": declared}
    if n < 2:
        return {**state, "guarantee": None, "pairs": [], "note": "fewer than 2 participants "
                "with a defined score difference"}
    if scheme == "continuous":
        decision = decide(d, "continuous", alpha, bound=bound,
                          method=str(stopping.get("test") or DEFAULT_METHOD))
        last: int | None = -1
    else:  # the declared schedule, the looks not reached yet padded (nothing decided there)
        end = max(declared[-1], n)
        padded = np.full((end, d.shape[1]), np.nan)
        padded[:n] = d
        decision = decide(padded, scheme, alpha, looks=declared, bound=bound)
        reached = [j for j, look in enumerate(declared) if look <= n]
        last = reached[-1] if reached else None
        if last is None:
            state["note"] = f"the first declared look is at N = {declared[0]}; nothing is decided before"
    # a look not reached yet decides nothing (the padded rows carry no data)
    decided = np.asarray(decision.decided) & (np.asarray(decision.decided_at) <= n)
    out = []
    for k, (a, b) in enumerate(pairs):
        row = {"a": a, "b": b, "difference": float(np.mean(estimates[:, k])),
               "decided": bool(decided[k]),
               "direction": int(decision.direction[k]) if decided[k] else 0,
               "decided_at": int(decision.decided_at[k]) if decided[k] else None}
        if last is not None:
            stat = float(decision.statistic[last, k])
            row["statistic"] = stat if np.isfinite(stat) else None
        if decision.lower is not None and decision.upper is not None and shown is None:
            row["lower"], row["upper"] = float(decision.lower[-1, k]), float(decision.upper[-1, k])
        out.append(row)
    return {**state, "guarantee": decision.guarantee, "pairs": out}
