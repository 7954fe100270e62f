"""The report's methods paragraph, written from the spec, the export and the analysis settings."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from humanlike.analysis.exclusions import ExclusionRules

_PACKAGES = ("humanlike", "numpy", "scipy", "pandas", "statsmodels", "matplotlib")


def software_versions() -> dict[str, str]:
    """Python and the numerical packages the analysis ran on."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def _rules_text(rules: ExclusionRules) -> str:
    words = {
        "min_trial_rt_ms": "rating trials faster than {v:g} ms counted as missing",
        "min_natural_accuracy": "natural-image accuracy below {v:.0%}",
        "min_catch_accuracy": "catch-trial accuracy below {v:.0%}",
        "min_repeat_reliability": "repeat reliability below r = {v:g}",
        "max_all_zero_share": "more than {v:.0%} of natural images rated zero throughout",
        "max_identical_run_share": "the same response on over {v:.0%} of the trials in a row",
        "min_median_rt_ms": "a median RT below {v:g} ms",
        "max_median_rt_ms": "a median RT above {v:g} ms",
        "min_completion_s": "finishing in under {v:g} s",
        "max_completion_s": "taking over {v:g} s",
    }
    active = rules.active()
    trial = [words["min_trial_rt_ms"].format(v=active.pop("min_trial_rt_ms"))] if (
        "min_trial_rt_ms" in active) else []
    people = [words[k].format(v=v) for k, v in active.items()]
    text = "; ".join(trial)
    if people:
        text += ("; " if text else "") + "participants were excluded for " + ", ".join(people)
    return text or "no exclusion rules were applied"


def _counts(values: Any, unit: str = "") -> str:
    """'60 Hz (8), 120 Hz (2)' from a Series of values (most frequent first)."""
    counts = values.value_counts()
    return ", ".join(f"{k}{unit} ({n})" for k, n in counts.items())


def design_text(spec: Mapping[str, Any] | None, export: Any) -> str:
    """Conditions and counterbalancing, trials per block, rating levels, presentation and the
    displays and platforms the analysed participants' data came from (the export's
    ``analysed`` participants; the spec for what was intended)."""
    import pandas as pd

    parts = []
    people = export.participants
    analysed = (people[people["analysed"]] if people is not None and "analysed" in people
                else people)
    spec = spec or {}
    conditions = [c.get("name") for c in spec.get("conditions", [])]
    if analysed is not None and "condition" in analysed and analysed["condition"].notna().any():
        per = _counts(analysed["condition"].astype(str))
        orders = {c.get("name"): c.get("block_order") for c in spec.get("conditions", [])
                  if c.get("block_order")}
        parts.append(
            (f"Participants were assigned to the least-filled of {len(conditions)} conditions "
             f"on arrival (analysed per condition: {per})" if len(conditions) > 1 else
             f"All participants saw one condition (analysed per condition: {per})")
            + ("; block order per condition: " + "; ".join(
                f"{k}: {', '.join(v)}" for k, v in orders.items()) if orders else "") + ".")
    if export.has("trials") and analysed is not None and "participant" in analysed:
        trials = export.table("trials", ["participant", "block", "trial_type", "practice"])
        trials = trials[trials["participant"].astype(str).isin(set(analysed["participant"]))]
        if len(trials):
            practice = trials["practice"].astype(str).str.lower().isin(["true", "1", "1.0"])
            per_block = (trials[~practice].groupby(["block", "participant"]).size()
                         .groupby(level=0).median())
            blocks = {b.get("name"): b for b in spec.get("blocks", [])}
            words = []
            for block, n in per_block.items():
                b = blocks.get(block, {})
                extra = [f"{b[k]} {w}" for k, w in (("practice", "practice"), ("catch_trials",
                         "catch"), ("repeats", "repeated")) if b.get(k)]
                words.append(f"{block} {n:g}" + (f" (with {', '.join(extra)})" if extra else ""))
            parts.append("Median trials per analysed participant and block, practice excluded: "
                         + "; ".join(words) + ".")
    if export.has("ratings"):
        levels = pd.to_numeric(export.table("ratings", ["rating"])["rating"], errors="coerce")
        values = sorted(levels.dropna().unique())
        if values and len(values) <= 11:
            parts.append("Ratings were given on the levels "
                         + ", ".join(f"{v:g}" for v in values) + " of each category.")
    shown = []
    presentation = spec.get("presentation") or {}
    if presentation.get("mode"):
        shown.append(f"images were shown {str(presentation['mode']).replace('_', ' ')}"
                     + (" outside classification blocks" if any(
                         b.get("classification") for b in spec.get("blocks", [])) else "")
                     + (f" for {presentation['duration_ms']} ms" if presentation.get(
                         "duration_ms") else ""))
    for b in spec.get("blocks", []):
        c = b.get("classification")
        if c:
            shown.append(
                f"in {b.get('name')} a {c.get('fixation_ms', 300)} ms fixation, the image for "
                f"{c.get('duration_ms', 200)} ms and a {c.get('mask', 'noise')} mask for "
                f"{c.get('mask_ms', 200)} ms")
    if analysed is not None and "refresh_hz" in analysed:
        rates = pd.to_numeric(analysed["refresh_hz"], errors="coerce").dropna().round()
        if len(rates):
            shown.append("the displays' measured refresh rates were "
                         + _counts(rates.astype(int), " Hz"))
    if shown:
        parts.append("Presentation: " + "; ".join(shown) + ".")
    if analysed is not None and "platform" in analysed and analysed["platform"].notna().any():
        source = analysed["platform"].astype(str)
        if "simulated" in analysed:  # a rehearsal's participants are named as such
            from humanlike.analysis.io.export import flag

            source = source.where(~flag(analysed, "simulated"), "simulated on " + source)
        parts.append("The analysed data came from these platforms (participants): "
                     + _counts(source) + ".")
    return " ".join(parts)


def methods_paragraph(spec: Mapping[str, Any] | None, counts: Mapping[str, Any],
                      rules: ExclusionRules, settings: Any, sections: set[str]) -> str:
    """One paragraph a methods section can start from; every number comes from the inputs."""
    parts = []
    if spec:
        blocks = spec.get("blocks", [])
        kinds = ", ".join(f"{b.get('name')} ({b.get('trial_type')})" for b in blocks)
        cats = len(spec.get("categories", []))
        parts.append(
            f"The experiment '{spec.get('title', spec.get('slug'))}' ran on "
            f"{spec.get('platform', 'a local link')} with the blocks {kinds}"
            + (f" and {cats} response categories" if cats else "") + ".")
    if counts.get("design"):
        parts.append(str(counts["design"]))
    sample = str(counts.get("sample") or "").rstrip(".")
    parts.append(
        (f"{sample[0].upper()}{sample[1:]}. " if sample else "")
        + f"Exclusion rules: {_rules_text(rules)}"
        + ("; participants who left early were analysed (their consent allowed partial data)"
           if rules.analyse_partial_data else "; participants who left early were not analysed")
        + ". Practice trials were left out of every analysis, catch and repeated trials out of "
        "scoring.")
    ci = f"{settings.confidence_level:.0%}"
    if "scores" in sections or "ceilings" in sections:
        parts.append(
            f"Rating scores and noise ceilings carry {ci} percentile CIs from "
            f"{settings.n_resamples} bootstrap resamples of participants and stimuli; model "
            f"comparisons are paired bootstrap tests, Holm-Sidak corrected at alpha = "
            f"{settings.alpha:g} (Golan et al. 2020).")
    if "kappa" in sections:
        parts.append(
            f"Error consistency (Cohen's kappa on correctness; Geirhos et al. 2020) has {ci} CIs "
            f"from {settings.n_resamples} stimulus resamples; independence was tested with "
            f"{settings.n_sim} simulations per pair, Holm-Sidak corrected.")
    if "alignment" in sections:
        parts.append(
            f"The alignment profile (accuracy difference, observed and error consistency, "
            f"accuracy distance, shape match and bias; docs/alignment-profile.md) has {ci} CIs "
            f"from {settings.n_resamples} resamples of images and participants shared by every "
            f"metric; model differences are paired bootstrap tests, Holm corrected over model "
            f"pairs at alpha = {settings.alpha:g}; the metrics' agreement is Spearman's and "
            f"Kendall's rank correlation across models.")
    if "mlds" in sections:
        parts.append(
            f"MLDS scales (Maloney & Yang 2003; Knoblauch & Maloney 2008) were fitted by maximum "
            f"likelihood (probit GLM), pooled per sequence, with {ci} CIs from "
            f"{settings.n_resamples} parametric bootstrap replicates; goodness of fit by the runs "
            f"test with {settings.n_diagnostic_sims} simulations.")
    if "psychophysical" in sections:
        parts.append("The Psychophysical-Score is the Spearman correlation of scale skewness "
                     "between observer and humans across sequences (Richard Webster et al. 2023).")
    versions = ", ".join(f"{k} {v}" for k, v in software_versions().items())
    parts.append(f"All randomness was seeded ({settings.seed}). Software: {versions}.")
    return " ".join(parts)
