"""Report sections for planning and adaptive allocation: the plan's recovery and power, and how an
adaptively allocated study's stimuli were drawn (with the random share's trials, on which pool-wide
scores and noise ceilings are unbiased; docs/adaptive.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from humanlike.analysis.io.export import Export
    from humanlike.analysis.planning.recovery import Plan
    from humanlike.analysis.report.sections import Section

ADAPTIVE_COLUMNS = ("adaptive_design_version", "adaptive_random", "adaptive_weighted")


def plan_section(plan: Plan) -> Section:
    """The plan: settings, recommended N, the recovery matrix and power curves, per-N outcomes."""
    from humanlike.analysis.planning.plots import plot_power_curves, plot_recovery
    from humanlike.analysis.report.sections import Section, Table

    s = plan.settings
    section = Section("plan", "Planned sample size (model recovery)")
    best = plan.recommended_n()
    rule = ("every pairwise comparison decided" if s["rule"] == "all"
            else "the generating model declared the winner")
    section.paragraphs.append(
        f"Each of the {len(s['models'])} candidate models in turn generated {s['replications']} "  # type: ignore[arg-type]
        f"simulated studies at each N of {s['sample_sizes']} ({s['n_trials']} stimuli per "
        f"participant, rating noise SD {float(s['noise_sd']):.3f}), analysed as this report "  # type: ignore[arg-type]
        f"analyses a study ({s['n_resamples']} bootstrap resamples, Holm-Sidak at alpha = "
        f"{s['alpha']}). Target: {rule} in {float(s['target']):.0%} of the studies with wrong "  # type: ignore[arg-type]
        "decisions in at most alpha of them. "
        + (f"Recommended N: {best}." if best is not None else "No N of the list met the target."))
    section.figure(plot_recovery(plan))
    section.figure(plot_power_curves(plan))
    section.tables.append(Table(plan.by_n().round(3), "Per generating model and N: share of "
                                "studies with every comparison decided, the correct winner, and "
                                "some wrong decision."))
    return section


def random_share_ratings(ratings: pd.DataFrame, participants: pd.DataFrame) -> pd.DataFrame:
    """The rating rows of each participant's equal-probability subset (``adaptive_random``; it may
    be empty), plus all rows of participants allocated without ``[adaptive]`` (no design
    version)."""
    if "adaptive_random" not in participants.columns:
        return ratings
    drawn = participants[["participant", "adaptive_design_version", "adaptive_random"]].astype(
        {"participant": str})
    uniform = drawn.loc[drawn["adaptive_design_version"].isna(), "participant"]
    listed = drawn.dropna(subset=["adaptive_random"])
    keep = listed.assign(stimulus=listed["adaptive_random"].astype(str).str.split(";")).explode(
        "stimulus")
    rows = pd.MultiIndex.from_arrays([ratings["participant"].astype(str),
                                      ratings["stimulus"].astype(str)])
    mask = (ratings["participant"].astype(str).isin(uniform).to_numpy()
            | rows.isin(pd.MultiIndex.from_frame(keep[["participant", "stimulus"]])))
    return ratings[mask]


def allocation_section(export: Export) -> Section:
    """How stimuli were allocated: uniformly, or adaptively (design versions, random share)."""
    from humanlike.analysis.report.sections import Section, Table

    section = Section("allocation", "Stimulus allocation")
    people = export.participants
    if people is None or "adaptive_design_version" not in people.columns:
        section.paragraphs.append("Each participant's stimuli were drawn uniformly at random from "
                                  "the pool (no [adaptive] table).")
        return section
    drawn = people[people["adaptive_design_version"].notna()]
    n_random = drawn["adaptive_random"].fillna("").map(lambda v: len(v.split(";")) if v else 0)
    n_weighted = drawn["adaptive_weighted"].fillna("").map(lambda v: len(v.split(";")) if v else 0)
    first = int((drawn["adaptive_design_version"] == 0).sum())
    section.paragraphs.append(
        f"Stimuli were allocated adaptively (docs/adaptive.md) for {len(drawn)} participants, "
        f"{int((n_random + n_weighted).median())} stimuli each, drawn by randomised systematic "
        "PPS with inclusion probabilities proportional to weights that favour the stimuli most "
        "informative for the still undecided comparisons (Neyman allocation), floored by the "
        "uniform share; each rating's inclusion probability is in the export. The weights were "
        f"recomputed in the background from the live analysis "
        f"({int(drawn['adaptive_design_version'].max())} weight versions; {first} participants "
        "arrived before the first and were allocated uniformly). The allocation depends on "
        "earlier participants only, never on a participant's own responses. Pool-wide scores, "
        "ceilings and comparisons are the design-weighted ones (section \"Pool-wide scores\"); "
        "the Pearson-r "
        f"tables average over the drawn mixture. A median of {int(n_random.median())} of each "
        "participant's stimuli form the equal-probability subset (adaptive_random), on which "
        "unweighted estimates describe the whole pool.")
    counts = drawn.groupby("adaptive_design_version").size().rename("participants").reset_index()
    section.tables.append(Table(counts, "Participants per weight version (0: before the first)."))
    return section


def inclusion_matrix(export: Export, participants: tuple[str, ...],
                     stimuli: tuple[str, ...]) -> np.ndarray | None:
    """(N, S) each rating's inclusion probability from the export's ratings table (NaN where none),
    or None when the study was not allocated adaptively."""
    if not export.has("ratings"):
        return None
    try:
        frame = export.table("ratings", ["participant", "stimulus", "inclusion_probability"])
    except (KeyError, ValueError):
        return None
    if "inclusion_probability" not in frame:
        return None
    frame = frame.dropna(subset=["inclusion_probability"])
    if frame.empty:
        return None
    from humanlike.analysis.ratings.weighted import inclusion_array

    return inclusion_array(frame, participants, stimuli)


def weighted_section(export: Export, result: Any, models: pd.DataFrame,
                     confidence_level: float, alpha: float) -> Section | None:
    """An adaptively allocated study's pool-wide scores: the design-weighted (Horvitz-Thompson)
    model scores, noise ceilings and comparisons (``analysis.ratings.weighted``), as the live
    panel shows them; None for a uniformly allocated study."""
    from humanlike.analysis.ratings.scores import model_predictions
    from humanlike.analysis.ratings.weighted import SCORE_LABEL, weighted_scores
    from humanlike.analysis.report.sections import Section, Table

    array = result.ratings
    pi = inclusion_matrix(export, array.participants, array.stimuli)
    if pi is None:
        return None
    predictions = model_predictions(models, array)
    names = list(map(str, predictions.models))
    n_pool = adaptive_pool_size(export, pi)
    weighted = weighted_scores(array.values, predictions.probabilities, pi, names,
                               confidence_level, alpha, n_stimuli=n_pool)
    section = Section("weighted", "Pool-wide scores (design-weighted)")
    section.paragraphs.append(
        f"Stimuli were allocated adaptively, so the scores above average over the drawn mixture. "
        f"Here each participant's score is {SCORE_LABEL} over the adaptive block's {n_pool} "
        "stimuli (Horvitz & Thompson 1952): its expectation is the pool-wide score of a uniform "
        "design, whatever the weights were. Intervals: t over participants; comparisons: "
        "one-sample t-tests of the per-participant differences, Holm-Sidak corrected.")
    section.tables.append(Table(weighted.ceilings[["subset", "bound", "estimate", "ci_low",
                                                   "ci_high"]],
                                "Noise ceiling of the design-weighted score (Hájek estimates)."))
    section.tables.append(Table(weighted.models[["subset", "model", "estimate", "ci_low",
                                                 "ci_high"]].sort_values("estimate",
                                                                          ascending=False),
                                f"Design-weighted model scores with {confidence_level:.0%} CIs."))
    section.tables.append(Table(weighted.comparisons, "Design-weighted model comparisons."))
    return section


def adaptive_pool_size(export: Export, pi: np.ndarray) -> int:
    """The HT denominator: the adaptive block's stimulus count as each draw recorded it (the
    participants table's ``adaptive_pool_size``), at least every stimulus some participant drew."""
    people = export.participants
    recorded = (people["adaptive_pool_size"].max() if people is not None
                and "adaptive_pool_size" in people else np.nan)
    drawn = int(np.isfinite(pi).any(0).sum())
    return max(drawn, int(recorded)) if pd.notna(recorded) else drawn



def floor_design(export: Export, participants: tuple[str, ...], pi: np.ndarray, n_pool: int,
                 random_share: float) -> np.ndarray:
    """(N, max(S, pool)) a lower bound on each participant's inclusion probabilities over the
    pool, drawn or not, from what the export records: n / pool for a draw before the first
    weights (``adaptive_design_version`` 0: uniform), else the floor min(1, random_share n / pool)
    every design keeps (``design.inclusion_probabilities``), n the draw's size. Every array
    stimulus counts as a pool stimulus. A lower bound on pi only loosens the bound the sequential
    test fixes before each draw (``ratings.weighted.scaled_differences``), so it stays valid."""
    n = max(int(np.isfinite(pi).sum(1).max()), 1)
    people = export.participants
    version = (dict(zip(people["participant"].astype(str), people["adaptive_design_version"]))
               if people is not None and "adaptive_design_version" in people else {})
    uniform = np.array([pd.notna(version.get(str(p))) and int(version[str(p)]) == 0
                        for p in participants])
    floor = np.where(uniform, n / n_pool, min(1.0, random_share * n / n_pool))
    return np.repeat(floor[:, None], max(pi.shape[1], n_pool), axis=1)
