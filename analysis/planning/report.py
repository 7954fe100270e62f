"""Report sections for planning and adaptive allocation: the plan's recovery and power, and how an
adaptively allocated study's stimuli were drawn (with the random share's trials, on which pool-wide
scores and noise ceilings are unbiased; docs/adaptive.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    """The rating rows of each participant's uniformly drawn stimuli (``adaptive_random``), plus
    all rows of participants allocated without ``[adaptive]``."""
    if "adaptive_random" not in participants.columns:
        return ratings
    drawn = participants[["participant", "adaptive_random"]].astype({"participant": str})
    uniform = drawn.loc[drawn["adaptive_random"].isna(), "participant"]
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
        f"Stimuli were allocated adaptively (docs/adaptive.md) for {len(drawn)} participants: "
        f"{int(n_random.median())} of each participant's {int((n_random + n_weighted).median())} "
        "stimuli uniformly at random, the rest in proportion to weights favouring the stimuli "
        "on which the models of the still undecided comparisons disagree most relative to the "
        "human noise, recomputed in the background from the live analysis "
        f"({int(drawn['adaptive_design_version'].max())} weight versions; {first} participants "
        "arrived before the first and were allocated uniformly). Model comparisons use every "
        "trial (the allocation depends on earlier participants only, never on a participant's "
        "own responses); noise ceilings and scores meant to describe the whole pool are to be "
        "read from the random share's trials.")
    counts = drawn.groupby("adaptive_design_version").size().rename("participants").reset_index()
    section.tables.append(Table(counts, "Participants per weight version (0: before the first)."))
    return section
