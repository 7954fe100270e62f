"""The live panel's triad and classification sections: MLDS scales per sequence and the error
consistency (kappa) matrix, each computed by the analysis package from the export's scoring trials
(practice, catch and repeated trials and excluded participants out, as ``humanlike analyze mlds``
and ``humanlike analyze ec`` read them) and drawn by the package's one figure function as inline
SVG (:func:`humanlike.analysis.figures.to_svg`). Only numbers, the spec's sequence names and the
server-made participant ids reach the figures; matplotlib's SVG writer escapes its text."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def mlds_section(data: Any, settings: dict[str, Any]) -> dict[str, Any] | None:
    """Pooled MLDS scale per sequence with parametric-bootstrap CIs (``analyze_mlds``, Maloney &
    Yang 2003), the widest CI half-width over levels and sequences, and the scale figure; None when
    the export has no scoring triads."""
    from humanlike.analysis.figures import to_svg
    from humanlike.analysis.mlds.analysis import analyze_mlds
    from humanlike.analysis.mlds.inputs import has_trials, mlds_trials
    from humanlike.analysis.mlds.plots import plot_scales

    if not has_trials(data) or not len(data.table("triads")):
        return None
    frame, _ = mlds_trials(data)  # what `humanlike analyze mlds` and the report fit
    if frame.empty:
        return None
    level = float(settings.get("confidence_level", 0.95))
    n_resamples = int(settings.get("n_resamples", 1000))
    n_people = int(frame["participant"].nunique()) if "participant" in frame.columns else 0
    try:
        result = analyze_mlds(frame, n_resamples=n_resamples, confidence_level=level,
                              random_state=0)
    except ValueError as exc:
        return {"n_participants": n_people, "error": f"MLDS: {exc}"}
    fits = result.pooled
    names = (fits.keys["sequence"].astype(str).tolist() if "sequence" in fits.keys.columns
             else ["all trials"] * len(fits.keys))
    flags = fits.flags()
    sequences = []
    for i, name in enumerate(names):
        low = fits.ci.low[i] if fits.ci is not None else np.full(fits.n_levels, np.nan)
        high = fits.ci.high[i] if fits.ci is not None else np.full(fits.n_levels, np.nan)
        sequences.append({
            "sequence": name, "sigma": _num(fits.sigma[i]), "n_trials": int(fits.n_trials[i]),
            "flag": str(flags[i]),
            "levels": [{"level": k + 1, "scale": _num(fits.scale_std[i, k]),
                        "ci_low": _num(low[k]), "ci_high": _num(high[k])}
                       for k in range(fits.n_levels)]})
    halfwidth = None
    if fits.ci is not None:
        widths = (fits.ci.high - fits.ci.low) / 2
        halfwidth = _num(np.nanmax(widths)) if np.isfinite(widths).any() else None
    return {"n_participants": n_people, "confidence_level": level, "n_resamples": n_resamples,
            "sequences": sequences, "max_halfwidth": halfwidth,
            "svg": to_svg(plot_scales(fits, participants=result.per_participant))}

MLDS_SECTION = "mlds_scales"
"""The panel result's key for the triad section (MLDS scales per sequence)."""


def ec_section(data: Any, settings: dict[str, Any], alpha: float) -> dict[str, Any] | None:
    """Cohen's kappa on trial-by-trial correctness of every participant pair within each stimulus
    condition (Geirhos et al. 2020) with bootstrap CIs (``analyze_error_consistency``) of what
    ``error_consistency.inputs.ec_trials`` selects (classifications and rating decisions, as
    ``humanlike analyze ec`` and the report), the human-human mean per condition, the widest
    per-pair CI half-width and the kappa matrix figure (one per experiment); None when the export
    has nothing to score."""
    from humanlike.analysis.error_consistency.analysis import analyze_error_consistency
    from humanlike.analysis.error_consistency.inputs import ec_trials, has_trials
    from humanlike.analysis.error_consistency.plots import plot_kappa_matrix
    from humanlike.analysis.figures import caption, to_svg

    if not has_trials(data):
        return None
    frame, _ = ec_trials(data)  # what `humanlike analyze ec` and the report score
    if frame.empty:
        return None
    level = float(settings.get("confidence_level", 0.95))
    n_resamples = int(settings.get("n_resamples", 1000))
    n_people = int(frame["observer"].nunique())
    try:
        result = analyze_error_consistency(frame, n_resamples=n_resamples, n_sim=n_resamples,
                                           confidence_level=level, alpha=alpha, random_state=0)
    except ValueError as exc:  # e.g. one observer left: nobody analysed by this section
        return {"n_participants": 0, "n_observers": n_people, "error": f"error consistency: {exc}"}
    pairs = result.pairs
    summary = result.kappa.summary
    hh = summary[(summary["statistic"] == "human-human") & (summary["level"] == "condition")]
    halfwidths = ((pairs["ci_high"] - pairs["ci_low"]) / 2).to_numpy(dtype=float)
    widest = int(np.nanargmax(halfwidths)) if np.isfinite(halfwidths).any() else None
    # the accuracies behind the copy model's planning are those of the pairs whose kappa is
    # defined (an observer at 0% or 100% accuracy has none: NaN, left out of the mean kappa too)
    informative = pairs["informative"] if "informative" in pairs else pairs["kappa"].notna()
    cells = [pairs["experiment"].astype(str), pairs["condition"].astype(str)]
    per_condition = pairs[informative].groupby(
        [c[informative] for c in cells], sort=True).agg(
        n_pairs=("kappa", "size"), trials_per_pair=("n", "median"), acc_a=("acc_a", "mean"),
        acc_b=("acc_b", "mean"))
    uninformative = (~informative).groupby(cells).sum()
    extras: dict[Any, Any] = per_condition.to_dict("index")
    conditions = []
    for row in hh.to_dict("records"):
        key = (str(row["experiment"]), str(row["condition"]))
        extra = extras.get(key)
        conditions.append({
            "experiment": key[0], "condition": key[1], "kappa": _num(row["kappa"]),
            "ci_low": _num(row["ci_low"]), "ci_high": _num(row["ci_high"]),
            "n_pairs": int(row["n_pairs"]),
            "n_uninformative": int(uninformative.get(key, 0)),
            "trials_per_pair": None if extra is None else _num(extra["trials_per_pair"]),
            "accuracy": None if extra is None else _num((extra["acc_a"] + extra["acc_b"]) / 2)})
    matrices = {}
    for experiment in sorted(pairs["experiment"].astype(str).unique()):
        matrix = result.kappa.matrix(experiment)
        matrices[experiment] = {"observers": [str(o) for o in matrix.index],
                                "kappa": [[_num(v) for v in row] for row in matrix.to_numpy()]}
    figure = plot_kappa_matrix(result.kappa)
    legend = caption(figure)  # what the colours, crosses and * mean, as the report says it
    return {
        "n_participants": n_people, "confidence_level": level, "n_resamples": n_resamples,
        "n_pairs": len(pairs), "n_significant": int(pairs["significant"].sum()),
        "n_uninformative": int((~informative).sum()),
        "conditions": conditions, "matrices": matrices,
        "max_halfwidth": None if widest is None else _num(halfwidths[widest]),
        "widest_pair": None if widest is None else {
            "condition": str(pairs["condition"].iloc[widest]),
            "n": int(pairs["n"].iloc[widest]), "kappa": _num(pairs["kappa"].iloc[widest])},
        "svg": to_svg(figure), "caption": legend}


DECISIONS_MAX_TRIALS = 200_000
"""Stored trials up to which the live panel also scores the rating trials as decisions (error
consistency of a rating study, as ``humanlike analyze ec`` scores it); a larger study's panel
would write a full temporary export on every refresh, so there ``analyze ec`` is the way."""


def section_tables(exp: Any, types: set[str], section_types: set[str],
                   tables: tuple[str, ...]) -> tuple[str, ...]:
    """The export tables the MLDS and kappa sections read for this experiment (empty: none to
    write): ``tables`` when it has triad or classification trials, plus ``decisions`` when it
    has rating trials and at most ``DECISIONS_MAX_TRIALS`` stored trials."""
    from humanlike.server.export.writer import stored_trials
    from humanlike.server.trial_types.registry import rated_types

    wanted = list(tables) if types & section_types else []
    if types & set(rated_types()) and stored_trials(exp) <= DECISIONS_MAX_TRIALS:
        wanted = [*(wanted or tables), "decisions"]
    return tuple(wanted)


def sample_summary(exp: Any) -> dict[str, Any]:
    """Who is analysed (``analysis.sample``, the export's ``analysed`` decided from the database):
    the counts and the one sentence every analysis prints."""
    from dataclasses import asdict

    from humanlike.analysis.sample import Sample
    from humanlike.server.live.panel_ratings import exclusions

    sample = Sample.of(exclusions(exp))
    return {**asdict(sample), "sentence": sample.sentence()}


def n_participants(*sections: dict[str, Any] | None) -> int:
    """The most participants any section analysed (each reads its own trial type)."""
    return max([int(s.get("n_participants") or 0) for s in sections if s], default=0)

