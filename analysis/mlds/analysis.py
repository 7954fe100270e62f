"""The MLDS analysis of an experiment in one call: one pooled scale per sequence (with bootstrap
CIs) and one per participant and sequence; the result prints and saves itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from humanlike.analysis.mlds.batch import ScaleFits, fit_many, with_reference
from humanlike.analysis.mlds.data import Design


@dataclass(frozen=True)
class MLDSAnalysis:
    """Pooled scales (per ``sequence`` when the data has one) and per-participant scales."""

    pooled: ScaleFits
    per_participant: ScaleFits | None = None
    group_col: str = "sequence"

    def summary(self) -> str:
        """Pooled and per-participant fits: counts, convergence, median sigma."""
        lines = [self.pooled.summary("pooled")]
        pooled_ok = self.pooled.informative()[0]
        if not pooled_ok.all():
            lines.append(f"{int((~pooled_ok).sum())} pooled scale(s) uninformative (no better "
                         "than a flat scale; see fits_by_sequence.csv's informative_reason)")
        if self.per_participant is not None:
            per = self.per_participant
            okp = per.converged & per.identified
            telling = per.informative()[0]
            lines.append(
                f"{len(per.keys)} participant scale(s); {int(okp.sum())} converged "
                "(the rest are separated or miss a level; see fits_by_participant.csv); "
                f"{int(telling.sum())} informative (better than a flat scale, likelihood-ratio "
                "p < 0.05)"
            )
            if telling.mean() < 0.5:
                lines.append(
                    f"too few triads per participant for individual scales (median "
                    f"{int(np.median(per.n_trials))} per participant and {self.group_col}): "
                    "read the pooled scales; the individual ones are mostly no better than flat")
        return "\n".join(lines)

    def save(self, out_dir: str | Path, max_panels: int = 12) -> list[Path]:
        """Write scales_by_sequence.csv, fits_by_sequence.csv, the same per participant (when
        fitted) and mlds_scales.png (the first ``max_panels`` sequences)."""
        import matplotlib.pyplot as plt

        from humanlike.analysis.mlds.plots import plot_scales

        out = Path(out_dir)
        written = self.pooled.save(out, "sequence")
        if self.per_participant is not None:
            written += self.per_participant.save(out, "participant")
        figure = out / "mlds_scales.png"
        plt.close(
            plot_scales(
                self.pooled,
                participants=self.per_participant,
                group_col=self.group_col,
                max_panels=max_panels,
                path=figure,
            )
        )
        return [*written, figure]


def analyze_mlds(
    triads: pd.DataFrame,
    design: Design = "triads",
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    random_state: int | None = 0,
    progress: Callable[[int], object] | None = None,
) -> MLDSAnalysis:
    """Pooled MLDS scales per ``sequence`` (all trials pooled without one) with a parametric
    bootstrap of ``n_resamples`` replicates (0: no CIs), and, when the trials carry a
    ``participant`` column, one scale per participant (and sequence) without bootstrap, judged
    informative against its sequence's pooled sigma (:meth:`ScaleFits.informative`)."""
    by = "sequence" if "sequence" in triads.columns else None
    pooled = fit_many(
        triads,
        by=by,
        design=design,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        random_state=random_state,
        progress=progress,
    )
    per_participant = None
    if "participant" in triads.columns:
        per_participant = fit_many(
            triads, by=[c for c in (by, "participant") if c], design=design
        )
        if by is not None:
            per_participant = with_reference(per_participant, pooled, by)
        else:  # one pooled scale: every participant's reference is its sigma
            per_participant = replace(per_participant, reference_sigma=np.full(
                len(per_participant.keys), pooled.sigma[0]))
    return MLDSAnalysis(pooled, per_participant)
