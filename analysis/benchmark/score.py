"""Scoring models on a published benchmark: the study's own analyses (``analyze_ratings`` for the
scores, noise ceiling and comparisons; ``analyze_error_consistency`` for kappa), called with the
arguments and seed the study's report used (:mod:`humanlike.analysis.report.sections`), on the
tables the package holds. A model's responses are all it needs; nothing in the folder is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

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
        return "\n".join(lines)

    def save(self, out: str | Path) -> list[Path]:
        """Write the :meth:`tables` as CSV and ``summary.json`` (settings, models) into ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables().items():
            table.to_csv(out / f"{name}.csv", index=False)
            written.append(out / f"{name}.csv")
        record = {"benchmark": str(self.package.root), "study": self.package.definition.get("study"),
                  "settings": self.package.definition["settings"],
                  "models": sorted(self.tables().get("scores", pd.DataFrame({"model": []}))
                                   ["model"].astype(str).unique())}
        (out / "summary.json").write_text(json.dumps(record, indent=2) + "\n")
        return [*written, out / "summary.json"]


def score_package(root: str | Path | Package, models: pd.DataFrame, *,
                  error_consistency: bool = True,
                  progress: Callable[[int], None] | None = None) -> BenchmarkScores:
    """Score ``models`` (model, stimulus, category, probability[, logit]) on the benchmark at
    ``root`` exactly as the study's report scored its models: same tables, rules and seed."""
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
    return BenchmarkScores(package, ratings, ec, note)


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
