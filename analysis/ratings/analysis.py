"""The whole rating analysis in one call: clean, QC, reliability, noise ceiling, scores, bootstrap."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from humanlike.analysis.ratings.bootstrap import SUBSETS, RatingsBootstrap, bootstrap_ratings
from humanlike.analysis.ratings.data import (
    ExclusionRules,
    RatingArray,
    as_rules,
    clean_ratings,
    participant_qc,
    rating_array,
)
from humanlike.analysis.ratings.reliability import SplitHalfReliability, split_half_reliability
from humanlike.analysis.ratings.scores import model_predictions


@dataclass(frozen=True)
class RatingsAnalysis:
    """Everything :func:`analyze_ratings` computed; :meth:`tables` gives the frames to write."""

    cleaned: pd.DataFrame
    qc: pd.DataFrame
    ratings: RatingArray
    split_half: SplitHalfReliability
    bootstrap: RatingsBootstrap
    rules: ExclusionRules

    def tables(self) -> dict[str, pd.DataFrame]:
        """Named result tables: qc, scores, noise_ceiling, comparisons, per_participant, ..."""
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
                        "value": float(np.nanmedian(self.qc["repeat_r"]))
                        if self.qc["repeat_r"].notna().any()
                        else np.nan,
                    },
                ]
            ),
        }
        if self.bootstrap.calibration is not None:
            tables["calibration"] = self.bootstrap.calibration
        return tables


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
    qc = participant_qc(cleaned, participants, rules, respect_export_exclusions)
    kept = qc.loc[~qc["excluded"], "participant"]
    if len(kept) < 2:
        raise ValueError(
            f"only {len(kept)} participant(s) pass QC; the analysis needs at least two "
            f"(exclusions: {qc.loc[qc['excluded'], 'exclusion_reasons'].tolist()})"
        )
    ratings = rating_array(cleaned, participants=kept)
    predictions = model_predictions(model_responses, ratings)
    split_half = split_half_reliability(ratings, random_state=rng)
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
    )
    return RatingsAnalysis(cleaned, qc, ratings, split_half, bootstrap, rules)
