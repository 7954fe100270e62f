"""The report's sections, each computed from an export through the methods' own analyses; a
section the data does not allow says why instead of failing the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from humanlike.analysis.counts import kappa_counts, mlds_participant_counts, ratings_counts
from humanlike.analysis.figures import caption, to_svg
from humanlike.analysis.io.export import Export


@dataclass(frozen=True)
class ReportSettings:
    """The analysis settings the report runs with (all written into the methods paragraph)."""

    n_resamples: int = 1000
    n_sim: int = 1000
    confidence_level: float = 0.95
    alpha: float = 0.05
    seed: int = 0
    max_panels: int = 12
    n_diagnostic_sims: int = 200


@dataclass
class Figure_:
    """A rendered figure: inline SVG text, its caption and the matplotlib figure (for files)."""

    svg: str
    caption: str
    figure: Figure | None = field(default=None, repr=False)


@dataclass
class Table:
    """A table to show, with its caption."""

    frame: pd.DataFrame
    caption: str = ""


@dataclass
class Section:
    """One section of the report: paragraphs, figures and tables, or why it is absent."""

    key: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    figures: list[Figure_] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    missing: str | None = None

    def figure(self, fig: Figure) -> None:
        self.figures.append(Figure_(to_svg(fig), caption(fig), fig))


@dataclass
class StudyResults:
    """What the sections computed, for the methods paragraph and for checks against truth."""

    ratings: Any = None
    error_consistency: Any = None
    mlds: Any = None
    mlds_all: Any = None
    mlds_participants: Any = None
    psychophysical: pd.DataFrame | None = None
    alignment: Any = None
    replication: Any = None
    notes: list[str] = field(default_factory=list)


Progress = Callable[[str], object]

#: The rating table's columns the rating analysis reads (the rest stay on disk).
RATING_COLUMNS = ("participant", "trial_index", "stimulus", "stimulus_kind", "category", "rating",
                  "rt_ms", "is_repeat", "repeat_of", "true_class", "targeted_model_1",
                  "targeted_model_2", "targeted_class_1", "targeted_class_2")


def sample_section(export: Export) -> Section:
    """Participants by status; who is analysed and why the others are not (the export's
    ``analysed``, :mod:`humanlike.analysis.sample`)."""
    from humanlike.analysis.report.plots import plot_sample

    section = Section("sample", "Sample and exclusions")
    people = export.participants
    if people is None or people.empty:
        section.missing = "the export holds no participants table"
        return section
    section.paragraphs.append(export.sample_sentence() or "")
    if not export.include_excluded:
        section.paragraphs.append(
            "Participants who returned the study, timed out or quit early are not analysed "
            "unless the spec's [exclusion] analyse_partial_data allows it (a return is a "
            "withdrawal); a rejected participant is not analysed unless the researcher "
            "included them.")
    section.figure(plot_sample(people))
    cols = [c for c in ("participant", "platform_id", "status", "analysed_reason")
            if c in people.columns]
    out = people.loc[~people["analysed"], cols]
    if len(out) and not export.include_excluded:
        section.tables.append(Table(out.rename(columns={"analysed_reason": "reason"}),
                                    "Participants not analysed and why."))
    return section


def timing_section(export: Export, spec: Mapping[str, Any] | None) -> Section:
    """Presented vs intended durations, frames and refresh rates."""
    from humanlike.analysis.report.plots import plot_timing
    from humanlike.analysis.report.timing import intended_durations, timing_summary, timing_trials

    section = Section("timing", "Timing quality")
    if not export.has("trials"):
        section.missing = "the export holds no trials table"
        return section
    columns = ("participant", "block", "trial_type", "practice", "presented_ms", "frames", "rt_ms")
    timed = timing_trials(export.table("trials", columns), export.participants,
                          intended_durations(spec))
    if timed["presented_ms"].notna().sum() == 0:
        section.missing = "no trial recorded a presented duration"
        return section
    rates = timed.drop_duplicates("participant")["refresh_hz"].dropna()
    section.paragraphs.append(
        f"{len(timed)} trials recorded their on-screen duration; the participants' displays ran "
        f"at {', '.join(f'{r:g}' for r in sorted(rates.round().unique())) or 'unknown'} Hz."
        + ("" if spec else " Without the spec (--spec) the intended durations are unknown."))
    section.figure(plot_timing(timed, export.participants))
    section.tables.append(Table(timing_summary(timed), "Per block: presented duration (median "
                                "and 95th percentile), median frames on screen, median error = "
                                "presented - intended, and the share of trials on target (within "
                                "half a frame of the intended duration)."))
    return section


def ratings_sections(export: Export, models: pd.DataFrame | None, rules: Any,
                     settings: ReportSettings, results: StudyResults,
                     progress: Progress, spec: Mapping[str, Any] | None = None) -> list[Section]:
    """Reliability, noise ceilings and model scores from the rating trials; with a
    ``comparisons_decided`` stopping rule in ``spec``, the model pairs decided under its declared
    monitoring (``monitored_verdicts``)."""
    from humanlike.analysis.ratings.analysis import analyze_ratings
    from humanlike.analysis.ratings.plots import plot_model_scores, plot_repeat_reliability

    reliability = Section("reliability", "Reliability")
    ceilings = Section("ceilings", "Noise ceilings")
    scores = Section("scores", "Model scores")
    sections = [reliability, ceilings, scores]
    if not export.has("ratings"):
        for s in sections:
            s.missing = "the study has no rating trials"
        return sections
    if models is None:
        models = _constant_model(export)
        scores.missing = "no model responses given (--models)"
    progress("ratings: bootstrap")
    try:
        result = analyze_ratings(
            export.ratings(RATING_COLUMNS), models, participants=export.participants, rules=rules,
            n_resamples=settings.n_resamples, confidence_level=settings.confidence_level,
            alpha=settings.alpha, random_state=settings.seed,
            respect_export_exclusions=not export.include_excluded)
    except ValueError as exc:
        for s in sections:
            s.missing = f"the rating analysis could not run: {exc}"
        return sections
    results.ratings = result
    tables = result.tables()
    rel = tables["reliability"].set_index("measure")["value"]
    counted = ratings_counts(result)  # the words `humanlike analyze ratings` prints
    reliability.paragraphs.append(
        f"{counted} Split-half reliability of the mean ratings over {int(rel['n_splits'])} random splits "
        f"of the participants: r = {rel['split_half_r']:.3f} per half, "
        f"{rel['spearman_brown']:.3f} after the Spearman-Brown correction. "
        + (f"Median repeat reliability of the analysed participants: r = "
           f"{rel['median_repeat_r']:.3f}." if np.isfinite(rel["median_repeat_r"]) else
           "The study has no repeated trials, so no repeat reliability."))
    reliability.figure(plot_repeat_reliability(result.cleaned))
    ceiling = tables["noise_ceiling"].query("metric == 'pearson_r'")
    ceilings.paragraphs.append(
        "The noise ceiling bounds the score a perfect model could reach given the participants' "
        "disagreement: the lower bound scores each participant against the mean of the others, "
        "the upper bound against the best prediction of all (Golan et al. 2020).")
    ceilings.tables.append(Table(
        ceiling[["subset", "bound", "estimate", "ci_low", "ci_high"]],
        f"Noise ceiling of the mean Pearson r with {settings.confidence_level:.0%} bootstrap "
        "CIs per stimulus subset."))
    if scores.missing is None:
        for subset in ("natural", "controversial", "all"):
            if subset in set(result.bootstrap.scores["subset"]):
                scores.figure(plot_model_scores(result.bootstrap, subset, "pearson_r"))
        scores.paragraphs.append(
            f"{counted} Each model's score is its mean Pearson r with each analysed "
            "participant's ratings, with a bootstrap CI over participants and stimuli; the "
            "figures draw the table below, the comparisons follow it.")
        table = tables["scores"].query("metric == 'pearson_r'")
        order = {name: i for i, name in enumerate(("natural", "controversial", "all"))}
        table = table.sort_values(["subset", "estimate"], ascending=[True, False],
                                  key=lambda c: c.map(order).fillna(len(order))
                                  if c.name == "subset" else c)
        scores.tables.append(Table(
            table[["subset", "model", "estimate", "ci_low", "ci_high"]],
            f"Model scores: mean Pearson r per stimulus subset (estimate) with its "
            f"{settings.confidence_level:.0%} bootstrap CI ({settings.n_resamples} resamples of "
            "participants and stimuli), best first; the noise ceiling is in the previous "
            "section."))
        comp = tables["comparisons"].query("metric == 'pearson_r'")
        scores.tables.append(Table(
            comp[["subset", "comparison", "a", "b", "difference", "ci_low", "ci_high",
                  "p_value", "p_holm_sidak", "significant"]],
            "Paired bootstrap comparisons (model vs model, model vs noise ceiling) with "
            "Holm-Sidak corrected p-values within each subset."))
        from humanlike.analysis.planning.report import weighted_section

        weighted = weighted_section(export, result, models, settings.confidence_level,
                                    settings.alpha)  # [adaptive]: pool-wide scores
        if weighted is not None:
            sections.append(weighted)
        stopping = (spec or {}).get("stopping") or {}
        if stopping.get("measure") == "comparisons_decided":
            monitored_verdicts(weighted or scores, result, models, export, stopping,
                               ((spec or {}).get("adaptive") or {}).get("random_share"))
    return sections


def monitored_verdicts(section: Section, result: Any, models: pd.DataFrame, export: Export,
                       stopping: Mapping[str, Any], random_share: float | None = None) -> None:
    """The verdict a monitored study may print: every model pair decided (or not) under the spec's
    declared ``monitoring`` from each analysed participant's Pearson r (an adaptively allocated
    study: design-weighted score differences, each scaled by a bound fixed before its draw, from
    the floor ``random_share`` every design keeps: ``planning.report.floor_design``), participants in
    completion order (``analysis.sequential.monitored_differences``, as the live panel's stopping
    indicator), with the guarantee that holds. The bootstrap table above answers a fixed-sample question; a study
    that was looked at as it ran reports these."""
    from humanlike.analysis.planning.report import (
        adaptive_pool_size,
        floor_design,
        inclusion_matrix,
    )
    from humanlike.analysis.ratings.scores import model_predictions, participant_scores
    from humanlike.analysis.ratings.weighted import weighted_scores
    from humanlike.analysis.sequential.decide import BOUND
    from humanlike.analysis.sequential.monitored import monitored_differences, pair_differences

    array = result.ratings
    predictions = model_predictions(models, array)
    people = export.participants
    if people is not None and "participant" in people and "completed_at" in people:
        when = dict(zip(people["participant"].astype(str),
                        pd.to_datetime(people["completed_at"], utc=True, errors="coerce")))
    else:
        when = {}
    never = pd.Timestamp.max.tz_localize("UTC")
    order = sorted(range(len(array.participants)), key=lambda i: (
        when.get(str(array.participants[i])) if pd.notna(when.get(str(array.participants[i])))
        else never, i))
    names = list(map(str, predictions.models))
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    if not pairs:
        return
    pi = inclusion_matrix(export, array.participants, array.stimuli)
    measure = "Pearson r"
    if pi is not None:  # adaptive: the design-weighted differences, each scaled by a bound
        n_pool = adaptive_pool_size(export, pi)  # fixed before its draw
        design = (None if random_share is None else
                  floor_design(export, array.participants, pi, n_pool, float(random_share)))
        weighted = weighted_scores(array.values, predictions.probabilities, pi, names,
                                   n_stimuli=n_pool, design=design)
        decided = monitored_differences(weighted.scaled[order], weighted.pairs, stopping, 1.0,
                                        shown=weighted.differences[order])
        measure = "the design-weighted score"
    else:
        r, _ = participant_scores(array, predictions.probabilities)
        d = pair_differences(r, names, pairs)
        decided = monitored_differences(d[order], pairs, stopping, BOUND)
    if not decided["pairs"]:
        section.paragraphs.append(f"Decisions under the declared monitoring: {decided.get('note')}.")
        return
    frame = pd.DataFrame([{"a": p["a"], "b": p["b"], "difference": p["difference"],
                           "decided": p["decided"],
                           "better": (p["a"] if p["direction"] > 0 else p["b"]) if p["decided"]
                           else "", "decided_at": p["decided_at"]} for p in decided["pairs"]])
    n_decided = int(frame["decided"].sum())
    section.paragraphs.append(
        f"Decisions under the declared monitoring ({decided['scheme']}, [stopping] in the spec): "
        f"{n_decided} of {len(frame)} model pairs decided on {decided['n']} participants in "
        f"completion order. Guarantee: {decided['guarantee']}."
        + (f" {decided['note']}." if decided.get("note") else ""))
    section.tables.append(Table(frame, (
        f"Model pairs decided under the declared monitoring: the mean per-participant difference "
        f"in {measure} (a - b), whether it is decided, the better model and the participant count "
        "at which it was decided (analysis.sequential).")))


def _constant_model(export: Export) -> pd.DataFrame:
    """A flat placeholder model (uniform probabilities), so the ceilings run without models."""
    ratings = export.table("ratings")
    stim = ratings["stimulus"].astype(str).unique()
    cats = ratings["category"].astype(str).unique()
    grid = pd.MultiIndex.from_product([stim, cats], names=["stimulus", "category"]).to_frame(
        index=False)
    return grid.assign(model="uniform", probability=1.0 / len(cats))


def kappa_section(export: Export, settings: ReportSettings, results: StudyResults,
                  progress: Progress, models: pd.DataFrame | None = None) -> Section:
    """Error-consistency matrices with bootstrap CIs of what ``humanlike analyze ec`` scores in
    the export (``error_consistency.inputs.ec_trials``: classifications and rating decisions,
    and with ``models`` each model's decisions on the rated images, as ``--models`` adds them)."""
    from humanlike.analysis.error_consistency.analysis import analyze_error_consistency
    from humanlike.analysis.error_consistency.inputs import ModelsError, ec_trials, has_trials
    from humanlike.analysis.error_consistency.plots import plot_kappa_matrix

    section = Section("kappa", "Error consistency (kappa matrices)")
    if not has_trials(export):
        section.missing = "the study has no classification or rating trials"
        return section
    try:
        frame, _ = ec_trials(export, models=models)
    except ModelsError as exc:  # e.g. classifications only: the models have no decisions here
        frame, _ = ec_trials(export)
        section.flags.append(f"the model responses (--models) are not scored here: {exc}")
    if frame.empty or frame.groupby("experiment")["observer"].nunique().max() < 2:
        section.missing = "fewer than two observers classified or rated"
        return section
    progress("error consistency: bootstrap")
    result = analyze_error_consistency(
        frame, n_resamples=settings.n_resamples, n_sim=settings.n_sim,
        confidence_level=settings.confidence_level, alpha=settings.alpha,
        random_state=settings.seed)
    results.error_consistency = result
    summary = result.kappa.summary
    section.paragraphs.append(
        f"{kappa_counts(frame, result.pairs)} They classified or rated "
        f"{frame['stimulus'].nunique()} stimuli (rating trials read as decisions, the "
        "highest-rated category, in their own matrix '<experiment>-ratings'"
        + (", where each model's most probable category is its decision" if
           (frame["group"].astype(str) == "model").any() else "")
        + "; the same trials `humanlike analyze ec` scores). Error consistency is Cohen's kappa "
        "on trial-by-trial correctness; CIs from "
        f"{settings.n_resamples} bootstrap resamples of stimuli; the independence test of each "
        f"pair uses {settings.n_sim} simulations and Holm-Sidak correction over pairs.")
    for experiment in sorted(result.pairs["experiment"].astype(str).unique()):
        section.figure(plot_kappa_matrix(result.kappa, experiment))
    cols = [c for c in ("level", "experiment", "condition", "statistic", "model", "kappa",
                        "ci_low", "ci_high") if c in summary.columns]
    section.tables.append(Table(summary[cols], f"Mean kappa per level with "
                                f"{settings.confidence_level:.0%} bootstrap CIs."))
    pairs = result.pairs
    pcols = [c for c in ("observer_a", "observer_b", "condition", "n", "acc_a", "acc_b",
                         "informative", "kappa", "ci_low", "ci_high", "p_holm_sidak",
                         "significant", "ci_note") if c in pairs.columns]
    n_sig = int(pairs["significant"].sum()) if "significant" in pairs else 0
    # an observer at 0% or 100% accuracy: c_obs = c_exp, kappa undefined (NaN, with the reason);
    # such pairs are counted, not ranked
    flat = ~pairs["informative"] if "informative" in pairs else pd.Series(False, index=pairs.index)
    top = pairs[~flat].sort_values("kappa", ascending=False)[pcols].head(15)
    note = (f" {int(flat.sum())} pair(s) with an observer at 0% or 100% accuracy are left out of "
            "this list and of every mean: their kappa is undefined (c_obs = c_exp: no errors to "
            "compare); pairs.csv of `humanlike analyze ec` names each one's reason."
            if flat.any() else "")
    wide = pairs["ci_note"].astype(str) != "" if "ci_note" in pairs else flat & False
    if wide.any():
        section.flags.append(f"{int(wide.sum())} informative pair(s) have too few errors to "
                             "compare: CI wider than +-0.2 (ci_note: the copy model's trials "
                             "for that width)")
    section.tables.append(Table(top, f"The {len(top)} most consistent of {len(pairs)} observer "
                                "pairs: trials (n), each observer's accuracy, whether the pair "
                                "has errors to compare (informative), kappa, CI and the "
                                "Holm-Sidak corrected p-value of the independence test "
                                f"({n_sig} pairs significant; all pairs in `humanlike analyze "
                                f"ec`).{note}"))
    return section


def mlds_sections(export: Export, settings: ReportSettings, results: StudyResults,
                  truth: Mapping[str, np.ndarray] | None, model_triads: pd.DataFrame | None,
                  progress: Progress) -> list[Section]:
    """MLDS scales with CIs and diagnostics; the Psychophysical-Score."""
    from humanlike.analysis.mlds.batch import fit_many, with_reference
    from humanlike.analysis.mlds.inputs import has_trials, mlds_trials
    from humanlike.analysis.mlds.plots import plot_scales

    section = Section("mlds", "MLDS scales")
    score = Section("psychophysical", "Psychophysical-Score")
    if not has_trials(export):
        section.missing = score.missing = "the study has no triad trials"
        return [section, score]
    triads, _ = mlds_trials(export)  # what `humanlike analyze mlds` and the panel fit
    if triads.empty:
        section.missing = score.missing = "no triad trials left after the exclusions"
        return [section, score]
    progress("MLDS: bootstrap")
    every = fit_many(triads, by="sequence")  # all sequences, one batched fit, no bootstrap
    names = every.keys["sequence"].tolist()
    shown = names[: settings.max_panels]
    # the bootstrap CIs are drawn for the sequences the figure shows (all of them in a study of
    # up to max_panels sequences); `humanlike analyze mlds` bootstraps every sequence
    pooled = fit_many(triads[triads["sequence"].isin(shown)], by="sequence",
                      n_resamples=settings.n_resamples, confidence_level=settings.confidence_level,
                      random_state=settings.seed)
    excluded = export.excluded_participants() if not export.include_excluded else frozenset()
    # counted: the analysed participants' scales of every sequence, as `humanlike analyze mlds`
    # fits them; drawn: the shown sequences' scales, the excluded participants' too (marked)
    per = (with_reference(fit_many(triads, by=["sequence", "participant"]), every)
           if "participant" in triads else None)
    drawn = per
    if per is not None and excluded:
        everyone = _all_triads(export)
        everyone = everyone[everyone["sequence"].isin(shown)]
        drawn = with_reference(fit_many(everyone, by=["sequence", "participant"]), every)
    results.mlds, results.mlds_all, results.mlds_participants = pooled, every, per
    table = every.summary_frame()
    section.paragraphs.append(
        f"{len(table)} sequences of {every.n_levels} levels, {int(every.n_trials.sum())} "
        f"triads pooled over the analysed participants; "
        f"{int(table['valid'].sum())} scales are valid (converged, every level seen, neither "
        "reversed nor non-monotone)."
        + ("" if per is None else
           f" {mlds_participant_counts(per)} The uninformative are drawn faint and do not set "
           "the axis" + ("; the excluded participants' scales are drawn dashed, not counted."
                         if excluded else "."))
        + (f" The figure and the bootstrap CIs cover the first {len(shown)} sequences; "
           "`humanlike analyze mlds` bootstraps all of them." if len(shown) < len(names) else ""))
    flagged = table[table["flag"] != ""]
    for row in flagged.head(20).itertuples():
        section.flags.append(f"sequence {row.sequence}: {row.flag}")
    if len(flagged) > 20:
        section.flags.append(f"... and {len(flagged) - 20} more sequences flagged")
    truth_map = None if truth is None else {str(k): np.asarray(v) for k, v in truth.items()}
    section.figure(plot_scales(pooled, participants=drawn, max_panels=settings.max_panels,
                               excluded=excluded, truth=truth_map))
    if truth_map is not None and pooled.ci is not None:
        cover = coverage(pooled, truth_map)
        section.paragraphs.append(
            f"Against the generating scales of the simulation: {cover['inside']} of "
            f"{cover['levels']} interior levels ({cover['share']:.0%}) lie inside their "
            f"{settings.confidence_level:.0%} CIs.")
    shown_table = pooled.summary_frame()
    section.tables.append(Table(
        shown_table.drop(columns=["converged", "identified"], errors="ignore"),
        "Pooled fit per sequence shown: sigma (decision noise on the standard scale) with its "
        "bootstrap CI, log-likelihood, trials, flag; n_failed counts bootstrap refits that did "
        "not converge."))
    section.tables.append(Table(_diagnostics(triads, pooled, settings, progress),
                                "Goodness of fit by simulation (Knoblauch & Maloney 2008): the "
                                "runs test on deviance residuals ordered by fitted probability "
                                "(small p: the scale misfits). The six-point test needs a "
                                "quadruple design and does not apply to triads."))
    _psychophysical(score, every, triads, model_triads, settings, results)
    return [section, score]


def _all_triads(export: Export) -> pd.DataFrame:
    """Scoring triads of every participant, the excluded too (they are drawn, marked)."""
    from humanlike.analysis.io.export import read_export

    return read_export(export.source, None if export.source.is_dir() else "triads",
                       include_excluded=True).triads().frame


def coverage(fits: Any, truth: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """How many interior levels' generating values lie inside the pooled scales' CIs."""
    names = fits.keys["sequence"].astype(str).tolist()
    inside = total = 0
    for i, name in enumerate(names):
        if name not in truth:
            continue
        psi = np.asarray(truth[name])[1:-1]
        low, high = fits.ci.low[i][1:-1], fits.ci.high[i][1:-1]
        ok = np.isfinite(low) & np.isfinite(high)
        inside += int(((psi >= low) & (psi <= high) & ok).sum())
        total += int(ok.sum())
    return {"inside": inside, "levels": total, "share": inside / total if total else np.nan}


def _diagnostics(triads: pd.DataFrame, pooled: Any, settings: ReportSettings,
                 progress: Progress) -> pd.DataFrame:
    from humanlike.analysis.mlds.diagnostics import runs_test
    from humanlike.analysis.mlds.estimator import MLDS

    rows = []
    names = pooled.keys["sequence"].tolist()[: settings.max_panels]
    progress("MLDS: runs tests")
    for name in names:  # a few shown sequences, each a small simulation of its own
        part = triads[triads["sequence"] == name]
        try:
            model = MLDS().fit(part)
            test = runs_test(model, settings.n_diagnostic_sims, random_state=settings.seed)
            rows.append({"sequence": name, "runs": test.n_runs,
                         "null median": float(np.median(test.null_distribution)),
                         "p (runs)": test.p_value, "six-point": "n/a (triads)"})
        except ValueError as exc:
            rows.append({"sequence": name, "runs": np.nan, "null median": np.nan,
                         "p (runs)": np.nan, "six-point": f"not run: {exc}"})
    return pd.DataFrame(rows)


def _psychophysical(score: Section, pooled: Any, triads: pd.DataFrame,
                    model_triads: pd.DataFrame | None, settings: ReportSettings,
                    results: StudyResults) -> None:
    from humanlike.analysis.mlds.batch import fit_many
    from humanlike.analysis.mlds.psychophysical import (
        random_observer_skewness,
        score_table,
        skewness_frame,
    )

    skew = [skewness_frame(pooled, "human"),
            random_observer_skewness(triads, random_state=settings.seed)]
    if model_triads is not None:
        for name, part in model_triads.groupby("participant"):
            skew.append(skewness_frame(fit_many(part, by="sequence"), str(name)))
    frame = pd.concat(skew, ignore_index=True)
    n_seq = frame.loc[frame["observer"] == "human", "skewness"].notna().sum()
    if n_seq < 3:
        score.missing = f"needs at least 3 sequences with a human scale, the study has {n_seq}"
        return
    table = score_table(frame, n_resamples=settings.n_resamples,
                        confidence_level=settings.confidence_level, random_state=settings.seed)
    results.psychophysical = table
    score.paragraphs.append(
        "The Psychophysical-Score of an observer is the Spearman correlation between its scales' "
        "skewness and the humans' across sequences, with a bootstrap CI over sequences (Richard "
        "Webster et al. 2023). 'random' answers the humans' triads by coin flips and is the "
        "baseline" + ("" if model_triads is not None else "; give model observers' triads "
                      "(--model-triads) to score models") + ".")
    scored = table[table["observer"] != "human"]
    if scored["ci_low"].isna().any():
        score.paragraphs.append(
            f"With {n_seq} sequences the bootstrap CI is undefined: resamples repeat sequences, "
            "tie their ranks and leave the rank correlation undefined; more sequences are needed.")
    score.tables.append(Table(table, f"Psychophysical-Score per observer with "
                                      f"{settings.confidence_level:.0%} CIs."))
