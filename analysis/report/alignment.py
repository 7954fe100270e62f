"""The report's alignment profile section: every metric per model with CIs (figure and table), the
model differences the paired bootstrap decides, the metrics' rank agreement and the ranks per
difficulty regime (:mod:`humanlike.analysis.alignment`; docs/alignment-profile.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from humanlike.analysis.alignment import alignment_profile
from humanlike.analysis.alignment.comparison import (
    COMPARED,
    ProfileComparison,
    compare_profile,
    decided_phrases,
    profile_cells,
)
from humanlike.analysis.alignment.inputs import profile_trials
from humanlike.analysis.alignment.plots import plot_agreement, plot_profile
from humanlike.analysis.alignment.profile import METRICS
from humanlike.analysis.alignment.regimes import DEFAULT_EDGES, regime_labels
from humanlike.analysis.io.export import Export
from humanlike.analysis.report.sections import (
    Progress,
    ReportSettings,
    Section,
    StudyResults,
    Table,
)

#: Without a baseline, conditional error consistency is error consistency itself (Kato & He
#: score their baseline set unfiltered): the report leaves these out.
CONDITIONAL = ("conditional_error_consistency", "conditional_error_consistency_ceiled")


def profile_comparison(trials: pd.DataFrame, settings: ReportSettings,
                       notes: list[str] | None = None) -> ProfileComparison:
    """The profile of ``trials`` with the report's resamples, seed and confidence (conditional
    error consistency left out: there is no baseline), and its decided differences at the
    report's alpha: one call for the report and ``humanlike score``."""
    profile = alignment_profile(trials, n_resamples=settings.n_resamples,
                                confidence_level=settings.confidence_level,
                                random_state=settings.seed)
    keep = ~profile.table["metric"].isin(CONDITIONAL).to_numpy()
    fits = profile.per_observer
    profile = replace(profile, table=profile.table[keep].reset_index(drop=True),
                      bootstrap=profile.bootstrap[keep],
                      per_observer=fits[~fits["metric"].isin(CONDITIONAL)].reset_index(drop=True))
    metrics = tuple(m for m in COMPARED if m not in CONDITIONAL)
    return compare_profile(profile, alpha=settings.alpha, metrics=metrics, notes=notes)


def alignment_section(export: Export, models: pd.DataFrame | None, settings: ReportSettings,
                      results: StudyResults, progress: Progress) -> Section:
    """The alignment profile of the given models against the analysed participants."""
    section = Section("alignment", "Alignment profile")
    if models is None:
        section.missing = "no model responses given (--models)"
        return section
    from humanlike.analysis.error_consistency.inputs import has_trials

    if not has_trials(export):
        section.missing = "the study has no classification or rating trials"
        return section
    trials, notes = profile_trials(export, models)
    if trials.empty:
        section.missing = "no experiment has both participants and models: " + "; ".join(notes)
        return section
    progress("alignment profile: bootstrap")
    comparison = profile_comparison(trials, settings, notes)
    results.alignment = comparison
    section.flags += comparison.notes
    shown = tuple(m for m in METRICS if m not in CONDITIONAL)
    counts = trials.groupby("experiment").agg(
        humans=("observer", lambda o: o[trials.loc[o.index, "group"] == "human"].nunique()),
        models=("observer", lambda o: o[trials.loc[o.index, "group"] == "model"].nunique()),
        images=("stimulus", "nunique"))
    said = "; ".join(f"{e}: {r.humans} participants, {r.models} models, {r.images} images"
                     for e, r in counts.iterrows())
    section.paragraphs.append(
        "Alignment metrics disagree (69 metrics over 80 models correlate 0.2 on average; Ahlert "
        "et al. 2024), so each model is scored with several at once against the analysed "
        f"participants ({said}; rating trials read as decisions in '<experiment>-ratings', a "
        "model's decision is its most probable category): accuracy difference, observed and "
        "error consistency (Geirhos et al. 2020), accuracy distance with its leave-one-out "
        "ceiling (Brain-Score), and shape match and bias where the images are cue-conflict ones "
        f"(Geirhos et al. 2019). CIs are {settings.confidence_level:.0%} percentile intervals "
        f"from {settings.n_resamples} resamples of images (within conditions) and participants, "
        "the same resamples for every metric and model. Conditional error consistency (Kato & He "
        "2026) needs each image's baseline version and is left out here (the Python API's "
        "baselines=); docs/alignment-profile.md gives every formula and source.")
    experiments = sorted(counts.index)
    for experiment in experiments:
        section.figure(plot_profile(comparison.profile, experiment, metrics=shown))
    for experiment, wide in profile_cells(comparison.profile, metrics=shown, digits=2).items():
        section.tables.append(Table(wide.reset_index().rename_axis(columns=None).fillna(""), (
            f"{experiment}: every metric per model, estimate [{settings.confidence_level:.0%} "
            "CI]; 'humans' is the participants' own value, 'ceiling' the human ceiling "
            "(accuracy distance: each participant against the others).")))
    _decided(section, comparison, settings)
    _agreement(section, comparison)
    _regimes(section, comparison)
    return section


def _decided(section: Section, comparison: ProfileComparison, settings: ReportSettings) -> None:
    decided = comparison.decided
    if decided.empty:
        section.paragraphs.append("With one model per experiment there are no differences to "
                                  "decide.")
        return
    n_pairs = decided.groupby(["experiment", "metric"]).size().max()
    words = []
    for experiment, rows in decided.groupby("experiment", sort=True):
        won = rows[rows["decided"]]
        words.append(f"{experiment}: {len(won)} of {len(rows)} decided" + (
            " (" + "; ".join(decided_phrases(rows)) + ")" if len(won) else ""))
    section.paragraphs.append(
        "Which differences are decided: for each metric and pair of models, the difference of "
        "their values (oriented so that higher is more humanlike; accuracy difference as minus "
        "its absolute value) over the same resamples (a paired bootstrap), its percentile-test "
        f"p-value Holm-corrected over the {n_pairs} model pairs of the metric, decided at alpha "
        f"= {settings.alpha:g}. " + ". ".join(words) + ". An undecided pair is not a tie: the "
        "data do not tell the two models apart on that metric.")
    pair = decided["a"] + " vs " + decided["b"]
    cell = np.where(decided["decided"], decided["more_humanlike"],
                    np.where(decided["p_holm"].notna(), "undecided", "n/a"))
    grid = decided.assign(pair=pair, cell=cell).pivot_table(
        index=["experiment", "pair"], columns="metric", values="cell", aggfunc="first",
        sort=False)
    grid = grid.reindex(columns=[m for m in COMPARED if m in grid.columns]).fillna("")
    section.tables.append(Table(grid.reset_index().rename_axis(columns=None), (
        "The more humanlike model of each pair where the difference is decided (paired "
        f"bootstrap, Holm-corrected over pairs, alpha {settings.alpha:g}); 'undecided' where it "
        "is not, 'n/a' where a model's value is undefined. Differences, CIs and p-values: "
        "alignment_decided.csv of `humanlike score --out`.")))


def _agreement(section: Section, comparison: ProfileComparison) -> None:
    agreement = comparison.agreement
    if agreement.empty:
        section.paragraphs.append("The metrics' agreement across models needs at least three "
                                  "models in an experiment.")
        return
    mean = agreement.groupby("experiment")["spearman"].mean()
    section.paragraphs.append(
        "Agreement of the metrics: Spearman's rho and Kendall's tau across the models between "
        "each pair of metrics (scipy), with a percentile CI of rho over the shared resamples; "
        "mean rho " + ", ".join(f"{e} {v:.2f}" for e, v in mean.items()) + ". With few models a "
        "rank correlation takes few values, and its CI is wide.")
    section.figure(plot_agreement(agreement))
    table = agreement.assign(
        spearman=[f"{e:.2f} [{lo:.2f}, {hi:.2f}]" if np.isfinite(e) else "n/a" for e, lo, hi in
                  agreement[["spearman", "ci_low", "ci_high"]].to_numpy(float)])
    section.tables.append(Table(table.drop(columns=["ci_low", "ci_high"]), (
        f"Rank agreement of each pair of metrics across models: Spearman's rho "
        f"[{comparison.profile.confidence_level:.0%} CI] and Kendall's tau.")))


def _regimes(section: Section, comparison: ProfileComparison) -> None:
    t = comparison.profile.table
    rows = t[(t["metric"] == "error_consistency") & ~t["observer"].isin(["humans", "ceiling"])]
    regimes = [r for r in [*regime_labels(DEFAULT_EDGES), "all"]
               if r in set(rows["regime"])]
    if len(regimes) < 2:
        return
    grid = rows.pivot_table(index=["experiment", "observer"], columns="regime",
                            values="estimate", sort=True).reindex(columns=regimes)
    n_images = t[t["metric"] == "error_consistency"].groupby(["experiment", "regime"])[
        "n_images"].first().reindex(regimes, level="regime")
    section.tables.append(Table(grid.reset_index().rename_axis(columns=None), (
        "Error consistency per difficulty regime (images binned by the share of participants "
        "who got them right; Xu et al. 2026, edges declared: docs/alignment-profile.md), so a "
        "change of ranks across regimes shows; empty where a model or every participant is "
        "constant in the bin. Images per bin: " + "; ".join(
            f"{row['experiment']} {row['regime']} {int(row['n_images'])}"
            for row in n_images.reset_index().to_dict("records") if row["regime"] != "all")
        + ".")))
