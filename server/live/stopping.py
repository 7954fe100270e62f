"""The stopping indicator: the spec's ``[stopping]`` target checked against the live panel's result,
with a projection of the participants still needed (docs/dashboard.md).

``comparisons_decided`` is met only when the declared monitoring scheme's test decides every model
pair (``analysis.sequential.monitored_pairs``: per-participant Pearson r differences in completion order through
``analysis.sequential.decide``), so looking at the panel after every participant keeps the
family-wise error at ``alpha`` under ``continuous`` monitoring; under ``fixed_n`` and
``group_sequential`` only the declared looks count.

Projection: a bootstrap CI half-width ``h`` on ``n`` participants shrinks as ``1/sqrt(n)`` (standard
error of a mean over independent participants), so ``n_needed = ceil(n * (h / target)**2)``. For
an undecided model comparison the target is ``|difference|`` (the interval must exclude zero)."""

from __future__ import annotations

import math
from typing import Any

from humanlike.server.live.panel_sections import MLDS_SECTION


def projected_n(n: int, halfwidth: float, target: float) -> int | None:
    """Participants needed for a CI half-width of ``target`` when ``n`` give ``halfwidth``."""
    if n <= 0 or not (halfwidth > 0) or not (target > 0):
        return None
    return max(n, math.ceil(n * (halfwidth / target) ** 2))


def _noise_ceiling(stopping: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    rows = [c for c in result.get("ceilings", []) if c["bound"] == "lower" and c["subset"] == "all"]
    if not rows or rows[0]["ci_low"] is None or rows[0]["ci_high"] is None:
        return {"value": None, "met": False}
    value = (rows[0]["ci_high"] - rows[0]["ci_low"]) / 2
    return {"value": value, "met": value <= stopping["threshold"],
            "needed": projected_n(result["n_participants"], value, stopping["threshold"])}


def _declared(stopping: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
    """``comparisons_decided`` under the declared scheme, from the panel's ``sequential`` section."""
    section = result.get("sequential")
    if not section or not section.get("pairs"):
        return None
    pairs = section["pairs"]
    decided = sum(p["decided"] for p in pairs)
    state: dict[str, Any] = {
        "value": f"{decided} of {len(pairs)} decided", "scheme": section["scheme"],
        "met": decided == len(pairs), "guarantee": section["guarantee"],
        "n": section["n"]}
    if section.get("note"):
        state["note"] = section["note"]
    if decided < len(pairs):
        # an undecided pair's difference may be zero: no count of participants is promised;
        # the fixed-design count below assumes its observed difference is the true one
        rows = {(c["a"], c["b"]): c for c in result.get("comparisons", []) if c["subset"] == "all"}
        needed = [projected_n(section["n"], (c["ci_high"] - c["ci_low"]) / 2, abs(c["difference"]))
                  for p in pairs if not p["decided"]
                  for c in [rows.get((p["a"], p["b"]))] if c and c["difference"]]
        state["needed_if_real"] = max([x for x in needed if x is not None], default=None)
        state["projection"] = ("not promised: an undecided pair's true difference may be zero; "
                               "needed_if_real assumes the observed differences are the true ones")
    return state


def _comparisons(stopping: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    declared = _declared(stopping, result)
    if declared is not None:
        return declared
    rows = [c for c in result.get("comparisons", []) if c["subset"] == "all"]
    if not rows:
        return {"value": None, "met": False}
    undecided = [c for c in rows if not c["significant"]]
    needed = [projected_n(result["n_participants"], (c["ci_high"] - c["ci_low"]) / 2,
                          abs(c["difference"])) for c in undecided if c["difference"]]
    return {"value": f"{len(rows) - len(undecided)} of {len(rows)} decided", "met": not undecided,
            "needed": max([n for n in needed if n is not None], default=None)}


def _mlds(stopping: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    section = result.get(MLDS_SECTION) or {}
    value = section.get("max_halfwidth")
    if value is None:
        return {"value": None, "met": False, "note": "no MLDS scale with CIs yet"}
    n = int(section.get("n_participants") or 0)
    return {"value": value, "met": value <= stopping["threshold"], "n": n,
            "needed": projected_n(n, value, stopping["threshold"])}


def _kappa(stopping: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Widest per-pair kappa CI; a pair's CI narrows with the trials it shares, not with more
    participants, so the projection is in trials (copy model, Klein et al. 2025)."""
    from humanlike.analysis.error_consistency import trials_needed

    section = result.get("ec") or {}
    value = section.get("max_halfwidth")
    if value is None:
        return {"value": None, "met": False, "note": "no kappa CIs yet"}
    threshold = stopping["threshold"]
    needed, have = None, None
    for c in section.get("conditions", []):
        if c["kappa"] is None or c["accuracy"] is None or c["trials_per_pair"] is None:
            continue
        try:
            n = trials_needed(c["kappa"], c["accuracy"], c["accuracy"], min(threshold, 1.99),
                              confidence_level=float(section.get("confidence_level", 0.95)))
        except ValueError:
            continue
        if needed is None or n > needed:
            needed, have = n, int(c["trials_per_pair"])
    state: dict[str, Any] = {"value": value, "met": value <= threshold, "unit": "trial(s) per "
                             "participant and condition", "note": "widest per-pair CI; the "
                             "projection is the copy model's trials for the human-human mean kappa "
                             "at the mean accuracy of each condition"}
    if needed is not None and have is not None:
        state.update(needed_trials=needed, still_needed_trials=max(0, needed - have))
    return state


def evaluate(stopping: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """``{measure, threshold, value, met, needed, still_needed[, sample]}`` for the panel's
    result; ``sample`` is the analysed-sample sentence the participants counted come from."""
    measure = stopping["measure"]
    if measure == "noise_ceiling_halfwidth":
        state = _noise_ceiling(stopping, result)
    elif measure == "comparisons_decided":
        state = _comparisons(stopping, result)
    elif measure == "mlds_halfwidth":
        state = _mlds(stopping, result)
    elif measure == "kappa_halfwidth":
        state = _kappa(stopping, result)
    else:
        state = {"value": None, "met": False, "note": f"{measure} is not computed for this "
                 "experiment's trial types yet"}
    needed = state.get("needed")
    n = int(state.pop("n", None) or result.get("n_participants") or 0)
    # who the projection counts: the analysed set (analysis.sample), said as every analysis says it
    sample = (result.get("sample") or {}).get("sentence")
    if sample:
        state["sample"] = sample
    if "still_needed_trials" in state:
        return {"measure": measure, "threshold": stopping.get("threshold"), "n": n, **state,
                "still_needed": state["still_needed_trials"]}
    return {"measure": measure, "threshold": stopping.get("threshold"), "n": n, **state,
            "still_needed": max(0, needed - n) if isinstance(needed, int) else None}
