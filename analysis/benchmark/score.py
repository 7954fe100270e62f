"""Scoring models on a published benchmark: the study's own analyses (``analyze_ratings`` for the
scores, noise ceiling and comparisons; ``analyze_error_consistency`` for kappa; the alignment
profile with its decided differences and the metrics' agreement), called with the
arguments and seed the study's report used (:mod:`humanlike.analysis.report.sections`), on the
tables the package holds. A model's responses are all it needs; nothing in the folder is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from humanlike.analysis.alignment.comparison import ProfileComparison
from humanlike.analysis.benchmark.package import Package, read_package
from humanlike.analysis.exclusions import as_rules
from humanlike.analysis.ratings.analysis import RatingsAnalysis, analyze_ratings
from humanlike.analysis.report.sections import RATING_COLUMNS


@dataclass(frozen=True)
class BenchmarkScores:
    """Every model's scores with CIs, the noise ceiling, the comparisons and error consistency."""

    package: Package
    ratings: RatingsAnalysis | None
    error_consistency: Any = None
    ec_note: str | None = None
    alignment: ProfileComparison | None = None
    alignment_note: str | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """scores, noise_ceiling, comparisons (and kappa, kappa_pairs where the data allow)."""
        tables: dict[str, pd.DataFrame] = {}
        if self.ratings is not None:
            rating_tables = self.ratings.tables()
            for name in ("scores", "noise_ceiling", "comparisons", "reliability"):
                tables[name] = rating_tables[name]
        if self.error_consistency is not None:
            tables["kappa"] = self.error_consistency.kappa.summary
            tables["kappa_pairs"] = self.error_consistency.pairs
        if self.alignment is not None:
            tables.update(self.alignment.tables())
        return tables

    def summary(self) -> str:
        """The rating summary (ceilings, models' r with CIs), then the kappa lines."""
        lines = [f"benchmark {self.package.definition.get('study')} "
                 f"({self.package.settings.n_resamples} resamples, seed "
                 f"{self.package.settings.seed})"]
        if self.ratings is not None:
            lines.append(self.ratings.summary())
        if self.error_consistency is not None:
            lines.append("error consistency:")
            lines.append(self.error_consistency.summary())
        elif self.ec_note:
            lines.append(f"error consistency: {self.ec_note}")
        if self.alignment is not None:
            lines.append(self.alignment.summary())
        elif self.alignment_note:
            lines.append(f"alignment profile: {self.alignment_note}")
        return "\n".join(lines)

    def save(self, out: str | Path) -> list[Path]:
        """Write the :meth:`tables` as CSV, the alignment profile's figures as SVG
        (``alignment_<experiment>.svg``, ``alignment_agreement.svg``) and ``summary.json``
        (settings, models) into ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables().items():
            table.to_csv(out / f"{name}.csv", index=False)
            written.append(out / f"{name}.csv")
        if self.alignment is not None:
            written += _alignment_figures(self.alignment, out)
        record = {"benchmark": str(self.package.root), "study": self.package.definition.get("study"),
                  "settings": self.package.definition["settings"],
                  "models": sorted(self.tables().get("scores", pd.DataFrame({"model": []}))
                                   ["model"].astype(str).unique())}
        (out / "summary.json").write_text(json.dumps(record, indent=2) + "\n")
        return [*written, out / "summary.json"]


def _alignment_figures(comparison: ProfileComparison, out: Path) -> list[Path]:
    """The profile figure of each experiment and the agreement figure, as SVG files."""
    from humanlike.analysis.alignment.plots import plot_agreement, plot_profile
    from humanlike.analysis.figures import save_figure

    written = []
    for experiment in sorted(set(comparison.profile.table["experiment"].astype(str))):
        name = "".join(c if c.isalnum() or c in "-_" else "_" for c in experiment)
        written.append(save_figure(plot_profile(comparison.profile, experiment),
                                   out / f"alignment_{name}.svg", close=True))
    if not comparison.agreement.empty:
        written.append(save_figure(plot_agreement(comparison.agreement),
                                   out / "alignment_agreement.svg", close=True))
    return written


def score_package(root: str | Path | Package, models: pd.DataFrame, *,
                  error_consistency: bool = True, alignment: bool = True,
                  progress: Callable[[int], None] | None = None) -> BenchmarkScores:
    """Score ``models`` (model, stimulus, category, probability[, logit]) on the benchmark at
    ``root`` exactly as the study's report scored its models: same tables, rules and seed; with
    ``alignment``, the report's alignment profile of the models (:mod:`..report.alignment`)."""
    package = root if isinstance(root, Package) else read_package(root)
    export = package.export
    settings = package.settings
    ratings = None
    if export.has("ratings"):
        ratings = analyze_ratings(
            export.ratings(RATING_COLUMNS), models, participants=export.participants,
            rules=as_rules(package.rules), n_resamples=settings.n_resamples,
            confidence_level=settings.confidence_level, alpha=settings.alpha,
            random_state=settings.seed, progress=progress,
            respect_export_exclusions=not export.include_excluded)
    ec, note = None, None
    if error_consistency:
        ec, note = _error_consistency(package, models)
    profile, profile_note = _alignment(package, models) if alignment else (None, None)
    return BenchmarkScores(package, ratings, ec, note, profile, profile_note)


def _alignment(package: Package, models: pd.DataFrame) -> tuple[ProfileComparison | None,
                                                                 str | None]:
    """The models' alignment profile against the package's analysed participants, as the
    study's report computes it (``profile_comparison`` with the report's settings)."""
    from humanlike.analysis.alignment.inputs import profile_trials
    from humanlike.analysis.error_consistency.inputs import has_trials
    from humanlike.analysis.report.alignment import profile_comparison

    export = package.export
    if not has_trials(export):
        return None, "the study has no classification or rating trials"
    trials, notes = profile_trials(export, models)
    if trials.empty:
        return None, "no experiment has both participants and models: " + "; ".join(notes)
    return profile_comparison(trials, package.settings, notes), None


def _error_consistency(package: Package, models: pd.DataFrame) -> tuple[Any, str | None]:
    """Kappa of every observer pair, the models' decisions among them (``ec_trials``)."""
    from humanlike.analysis.error_consistency.analysis import analyze_error_consistency
    from humanlike.analysis.error_consistency.inputs import ModelsError, ec_trials, has_trials

    export, settings = package.export, package.settings
    if not has_trials(export):
        return None, "the study has no classification or rating trials"
    try:
        frame, _ = ec_trials(export, models=models if export.has("decisions") else None)
    except ModelsError as exc:
        return None, f"the models cannot be scored against the rating decisions: {exc}"
    if frame.empty or frame.groupby("experiment")["observer"].nunique().max() < 2:
        return None, "fewer than two observers classified or rated"
    result = analyze_error_consistency(
        frame, n_resamples=settings.n_resamples, n_sim=settings.n_sim,
        confidence_level=settings.confidence_level, alpha=settings.alpha,
        random_state=settings.seed)
    return result, None
