"""The whole rating analysis in one call: clean, QC, reliability, noise ceiling, scores, bootstrap."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from humanlike.analysis.exclusions import ExclusionRules, as_rules
from humanlike.analysis.ratings.bootstrap import (
    METRICS,
    SUBSETS,
    RatingsBootstrap,
    bootstrap_ratings,
)
from humanlike.analysis.ratings.data import (
    RatingArray,
    clean_ratings,
    participant_qc,
    rating_array,
)
from humanlike.analysis.ratings.reliability import (
    SplitHalfReliability,
    split_half_reliability,
    split_orders,
)
from humanlike.analysis.ratings.scores import model_predictions

SPLIT_HALF_SPLITS = 1000
"""Random splits of the group split-half reliability."""


@dataclass(frozen=True)
class RatingsAnalysis:
    """Everything :func:`analyze_ratings` computed; :meth:`tables` gives the frames to write."""

    cleaned: pd.DataFrame
    qc: pd.DataFrame
    ratings: RatingArray
    split_half: SplitHalfReliability
    bootstrap: RatingsBootstrap
    rules: ExclusionRules
    settings: Mapping[str, object] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Named result tables: qc, scores, noise_ceiling, comparisons, per_participant, ...

        ``reliability`` describes the analysed participants (the excluded are only in ``qc``)."""
        analysed_repeat_r = self.qc.loc[~self.qc["excluded"].astype(bool), "repeat_r"]
        tables = {
            "qc": self.qc,
            "scores": self.bootstrap.scores,
            "noise_ceiling": self.bootstrap.ceilings,
            "comparisons": self.bootstrap.comparisons,
            "per_participant": self.bootstrap.per_participant,
            "reliability": pd.DataFrame(
                [
                    {"measure": "split_half_r", "value": self.split_half.r_half},
                    {"measure": "spearman_brown", "value": self.split_half.spearman_brown},
                    {"measure": "n_splits", "value": self.split_half.n_splits},
                    {
                        "measure": "median_repeat_r",
                        "value": float(np.nanmedian(analysed_repeat_r))
                        if analysed_repeat_r.notna().any()
                        else np.nan,
                    },
                ]
            ),
        }
        if self.bootstrap.calibration is not None:
            tables["calibration"] = self.bootstrap.calibration
        return tables

    def summary_record(self, sources: Mapping[str, str] | None = None) -> dict[str, object]:
        """What ``summary.json`` holds: inputs, counts, settings, rules and reliability."""
        return {
            **(sources or {}),
            "participants": len(self.qc),
            "excluded": int(self.qc["excluded"].sum()),
            "analysed_participants": len(self.ratings.participants),
            "stimuli": {
                kind: self.ratings.kinds.count(kind) for kind in sorted(set(self.ratings.kinds))
            },
            "categories": len(self.ratings.categories),
            "missing_share": float(1.0 - self.ratings.observed.mean()),
            **self.settings,
            "rules": self.rules.active(),
            "split_half_spearman_brown": self.split_half.spearman_brown,
            "upper_bound_shift": self.bootstrap.upper_bound_shift,
        }

    def summary(self) -> str:
        """Participants analysed, reliability, and per subset the noise ceiling and model scores."""
        record = self.summary_record()
        lines = [
            f"ratings: {record['analysed_participants']} of the {record['participants']} "
            f"participants with rating trials analysed ({record['excluded']} not: QC or the "
            f"export's analysed set); split-half reliability (Spearman-Brown) "
            f"{self.split_half.spearman_brown:.3f}"
        ]
        scores = self.bootstrap.scores.query("metric == 'pearson_r'")
        ceilings = self.bootstrap.ceilings.query("metric == 'pearson_r'").set_index(
            ["subset", "bound"]
        )
        for key, rows in scores.groupby("subset", sort=False):
            subset = cast(str, key)
            # one row each of the (subset, bound) index: a Series, not the scalar the stubs assume
            low = cast(pd.Series, ceilings.loc[(subset, "lower")])
            high = cast(pd.Series, ceilings.loc[(subset, "upper")])
            lines.append(
                f"[{subset}] noise ceiling r: lower {low['estimate']:.3f} "
                f"[{low['ci_low']:.3f}, {low['ci_high']:.3f}], upper {high['estimate']:.3f}"
            )
            for row in rows.sort_values("estimate", ascending=False).itertuples():
                lines.append(
                    f"  {row.model:<24} r = {row.estimate:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]"
                )
        return "\n".join(lines)

    def save(self, out_dir: str | Path, sources: Mapping[str, str] | None = None) -> list[Path]:
        """Write the :meth:`tables` as CSV, the score / reliability / RT figures as PNG and
        ``summary.json`` (``sources``, e.g. the input paths, first) into ``out_dir``."""
        import matplotlib.pyplot as plt

        from humanlike.analysis.ratings.plots import (
            plot_model_scores,
            plot_repeat_reliability,
            plot_rt_histograms,
        )

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables().items():
            table.to_csv(out / f"{name}.csv", index=False)
            written.append(out / f"{name}.csv")
        figures = {}
        for subset in sorted(set(self.bootstrap.scores["subset"])):
            for metric, suffix in (("pearson_r", ""), ("mse", "_mse")):
                figures[f"scores_{subset}{suffix}.png"] = plot_model_scores(
                    self.bootstrap, subset, metric
                )
        figures["repeat_reliability.png"] = plot_repeat_reliability(self.cleaned)
        figures["rt_histograms.png"] = plot_rt_histograms(self.cleaned, self.rules.min_trial_rt_ms)
        for name, figure in figures.items():
            figure.savefig(out / name, dpi=150)
            plt.close(figure)
            written.append(out / name)
        path = out / "summary.json"
        path.write_text(json.dumps(self.summary_record(sources), indent=2) + "\n")
        return [*written, path]


def analyze_ratings(
    frame: pd.DataFrame,
    model_responses: pd.DataFrame,
    participants: pd.DataFrame | None = None,
    rules: ExclusionRules | Mapping[str, object] | None = None,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    alpha: float = 0.05,
    calibrate: bool = False,
    subsets: tuple[str, ...] = SUBSETS,
    random_state: int | np.random.Generator | None = None,
    n_jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
    respect_export_exclusions: bool = True,
    bias_correct_bounds: bool = True,
) -> RatingsAnalysis:
    """Clean trials, QC and exclude participants, then reliability, noise ceiling, scores, bootstrap.

    Trials faster than ``rules.min_trial_rt_ms`` become missing; excluded participants (reasons in
    ``qc``, including those the export's ``participants`` table already excluded unless
    ``respect_export_exclusions`` is false) are left out of everything after QC. Natural and
    controversial first presentations are scored. ``bias_correct_bounds`` is passed to
    :func:`~humanlike.analysis.ratings.bootstrap.bootstrap_ratings`.
    """
    rules = as_rules(rules)
    rng = np.random.default_rng(random_state)
    cleaned = clean_ratings(frame, rules.min_trial_rt_ms)
    qc = participant_qc(cleaned, participants, rules, respect_export_exclusions, validated=True)
    kept = qc.loc[~qc["excluded"], "participant"]
    if len(kept) < 2:
        raise ValueError(
            f"only {len(kept)} participant(s) pass QC; the analysis needs at least two "
            f"(exclusions: {qc.loc[qc['excluded'], 'exclusion_reasons'].tolist()})"
        )
    ratings = rating_array(cleaned, participants=kept)
    split_half, bootstrap = score_rating_array(
        ratings,
        model_responses,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        alpha=alpha,
        calibrate=calibrate,
        subsets=subsets,
        random_state=rng,
        n_jobs=n_jobs,
        progress=progress,
        bias_correct_bounds=bias_correct_bounds,
    )
    assert split_half is not None
    settings = {
        "n_resamples": n_resamples,
        "confidence_level": confidence_level,
        "seed": random_state if isinstance(random_state, int) else None,
        "calibrate": calibrate,
        "bias_correct_bounds": bias_correct_bounds,
    }
    return RatingsAnalysis(cleaned, qc, ratings, split_half, bootstrap, rules, settings)


def score_rating_array(
    ratings: RatingArray,
    model_responses: pd.DataFrame,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    alpha: float = 0.05,
    calibrate: bool = False,
    subsets: tuple[str, ...] = SUBSETS,
    random_state: int | np.random.Generator | None = None,
    n_jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
    bias_correct_bounds: bool = True,
    split_half: bool = True,
    metrics: Sequence[str] = METRICS,
) -> tuple[SplitHalfReliability | None, RatingsBootstrap]:
    """Split-half reliability (None without ``split_half``) and bootstrap of an analysed array."""
    # the part of analyze_ratings after QC; without split_half its random splits are still drawn,
    # so a seeded run's bootstrap is the same as with it
    rng = np.random.default_rng(random_state)
    predictions = model_predictions(model_responses, ratings)
    reliability = None
    if split_half:
        reliability = split_half_reliability(ratings, n_splits=SPLIT_HALF_SPLITS, random_state=rng)
    else:
        split_orders(len(ratings.participants), SPLIT_HALF_SPLITS, rng)
    bootstrap = bootstrap_ratings(
        ratings,
        predictions,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        alpha=alpha,
        calibrate=calibrate,
        subsets=subsets,
        random_state=rng,
        n_jobs=n_jobs,
        progress=progress,
        bias_correct_bounds=bias_correct_bounds,
        metrics=metrics,
    )
    return reliability, bootstrap
