"""The whole error-consistency analysis in one call: kappa matrix with CIs, independence tests
(Holm-Sidak corrected), model comparisons; the result prints and saves itself."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from scipy import stats

from humanlike.analysis.error_consistency.copy_model import PRECISE_HALFWIDTH
from humanlike.analysis.error_consistency.kappa import DEFAULT_DEGENERATE, Degenerate
from humanlike.analysis.error_consistency.matrix import KappaMatrix, kappa_matrix
from humanlike.analysis.error_consistency.significance import (
    compare_models,
    holm_sidak,
    independence_pvalues,
)

COLUMNS = ("observer", "stimulus", "correct", "group", "condition", "experiment")


def file_slug(name: object) -> str:
    """A name safe in a file name (runs of other characters become '-'; empty becomes 'all')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip("-") or "all"


@dataclass(frozen=True)
class ErrorConsistencyAnalysis:
    """Kappa matrix, pairs with independence p-values (raw and Holm-Sidak), model comparisons."""

    kappa: KappaMatrix
    pairs: pd.DataFrame
    comparisons: pd.DataFrame | None
    confidence_level: float
    degenerate: str = DEFAULT_DEGENERATE

    @property
    def n_models(self) -> int:
        """Observers of group 'model'."""
        return int((self.kappa.observers["group"] == "model").sum())

    def summary(self) -> str:
        """One line per experiment and statistic: kappa with its CI."""
        summary = self.kappa.summary
        lines = []
        for _, row in summary[summary["level"] == "experiment"].iterrows():
            label = row["statistic"] if not row["model"] else f"{row['model']} vs humans"
            if not np.isfinite(row["kappa"]):
                lines.append(f"  {row['experiment']}: {label} kappa undefined: every pair has an "
                             "observer at 0% or 100% accuracy (no errors to compare)")
                continue
            ci = f" [{row['ci_low']:.3f}, {row['ci_high']:.3f}]" if "ci_low" in row else ""
            lines.append(f"  {row['experiment']}: {label} kappa = {row['kappa']:.5f}{ci}")
        flat = (self.pairs[~self.pairs["informative"]] if "informative" in self.pairs
                else self.pairs.iloc[0:0])
        if len(flat):
            lines.append(f"  {len(flat)} of {len(self.pairs)} pairs have an observer at 0% or 100% "
                         "accuracy: " + ("kappa undefined (NaN), left out of means and rankings"
                                         if self.degenerate == "undefined" else
                                         f"kappa set by the {self.degenerate!r} convention")
                         + "; see pairs.csv's reason column")
        defined = self.pairs["kappa"].notna()
        if "ci_dropped" in self.pairs and (lost := defined & (self.pairs["ci_dropped"] > 0)).any():
            lines.append(f"  {int(lost.sum())} pair(s) with a kappa lost bootstrap resamples to an "
                         f"observer at 0% or 100% (up to "
                         f"{int(self.pairs.loc[lost, 'ci_dropped'].max())} of "
                         f"{self.kappa.n_resamples}): their CI describes only the resamples with "
                         "errors to compare (pairs.csv's ci_dropped)")
        if "ci_note" in self.pairs and (wide := self.pairs["ci_note"] != "").any():
            lines.append(f"  {int(wide.sum())} informative pair(s) have too few errors to compare: "
                         f"CI wider than +-{PRECISE_HALFWIDTH:g} (pairs.csv's ci_note and "
                         "trials_for_ci: the copy model's trials for that width)")
        return "\n".join(lines)

    def save(self, out_dir: str | Path, figures: bool = True) -> list[Path]:
        """Write pairs.csv, summary.csv, model_comparisons.csv (two or more models) and per
        experiment matrix_<experiment>.csv and (``figures``) its heatmap, c_exp/c_obs scatter and,
        with models, EC per model as PNG."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.pairs.to_csv(out / "pairs.csv", index=False)
        self.kappa.summary.to_csv(out / "summary.csv", index=False)
        written = [out / "pairs.csv", out / "summary.csv"]
        if self.comparisons is not None:
            self.comparisons.to_csv(out / "model_comparisons.csv", index=False)
            written.append(out / "model_comparisons.csv")
        for experiment in sorted(self.pairs["experiment"].unique()):
            slug = file_slug(experiment)
            self.kappa.matrix(experiment).to_csv(out / f"matrix_{slug}.csv")
            written.append(out / f"matrix_{slug}.csv")
            if figures:
                written += self._save_figures(experiment, slug, out)
        return written

    def _save_figures(self, experiment: str, slug: str, out: Path) -> list[Path]:
        from humanlike.analysis.error_consistency import plots  # matplotlib only for figures

        drawn = {
            f"matrix_{slug}.png": plots.plot_kappa_matrix(self.kappa, experiment),
            f"scatter_{slug}.png": plots.plot_consistency_scatter(
                self.pairs[self.pairs["experiment"] == experiment],
                confidence_level=self.confidence_level,
            ),
        }
        if self.n_models > 0:
            drawn[f"ec_per_model_{slug}.png"] = plots.plot_ec_per_model(self.kappa, experiment)
        for name, figure in drawn.items():
            figure.savefig(out / name, dpi=150)
            plots.plt.close(figure)
        return [out / name for name in drawn]


def analyze_error_consistency(
    frame: pd.DataFrame,
    n_resamples: int = 10_000,
    n_sim: int = 10_000,
    confidence_level: float = 0.95,
    alpha: float = 0.05,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
    random_state: int | np.random.Generator | None = None,
    progress: Callable[[int], None] | None = None,
) -> ErrorConsistencyAnalysis:
    """Kappa of every observer pair with bootstrap CIs, the independence test of each pair
    (Holm-Sidak over pairs at ``alpha``) and, with two or more models, the model comparisons.

    ``frame`` has the standard columns ``observer, stimulus, correct, group, condition,
    experiment``; one generator drives all resampling in that order.
    """
    rng = np.random.default_rng(random_state)
    columns: dict[str, Any] = {c: c for c in COLUMNS}
    step = progress or (lambda n: None)
    kappa = kappa_matrix(
        frame,
        **columns,
        degenerate=degenerate,
        unbiased=unbiased,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        random_state=rng,
    )
    step(1)
    pairs = kappa.pairs.copy()
    # a pair that shares no trial has no kappa to test: no p-value, left out of the correction
    shared = pairs["n"].to_numpy() >= 1
    tested = pairs[shared]
    p_independence = np.full(len(pairs), np.nan)
    if shared.any():
        p_independence[shared] = cast(np.ndarray, independence_pvalues(  # return_null=False
            tested["kappa"].to_numpy(),
            np.rint(tested["acc_a"] * tested["n"]),
            np.rint(tested["acc_b"] * tested["n"]),
            tested["n"].to_numpy(),
            n_sim=n_sim,
            degenerate=degenerate,
            unbiased=unbiased,
            random_state=rng,
        ))
    pairs["p_independence"] = p_independence
    pairs = pairs.assign(**precision_columns(pairs, confidence_level))
    adjusted = holm_sidak(pairs["p_independence"].to_numpy(), alpha=alpha)
    pairs["p_holm_sidak"] = adjusted.p_adjusted
    pairs["significant"] = adjusted.reject
    step(1)
    comparisons = None
    if int((kappa.observers["group"] == "model").sum()) >= 2:
        comparisons = compare_models(
            frame,
            **columns,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            alpha=alpha,
            degenerate=degenerate,
            unbiased=unbiased,
            random_state=rng,
        )
    step(1)
    return ErrorConsistencyAnalysis(kappa, pairs, comparisons, confidence_level, degenerate)


def precision_columns(pairs: pd.DataFrame, confidence_level: float = 0.95) -> dict[str, Any]:
    """``trials_for_ci`` (trials the pair would need for a CI of +- ``PRECISE_HALFWIDTH`` at its
    observed rates: the copy model's analytic plan, Klein et al. 2025) and ``ci_note`` ("too few
    errors to compare: ..." where an informative pair's CI half-width exceeds it; the bootstrap
    CI's, else the analytic one)."""
    from humanlike.analysis.error_consistency.copy_model import kappa_se_per_trial

    c_obs, acc_a, acc_b = (pairs[c].to_numpy(dtype=float) for c in ("c_obs", "acc_a", "acc_b"))
    n = pairs["n"].to_numpy(dtype=float)
    se1 = kappa_se_per_trial(c_obs, acc_a, acc_b)
    z = float(stats.norm.ppf(0.5 + confidence_level / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = np.ceil((z * se1 / PRECISE_HALFWIDTH) ** 2)
        half = ((pairs["ci_high"] - pairs["ci_low"]).to_numpy(dtype=float) / 2
                if "ci_low" in pairs else z * se1 / np.sqrt(n))
    informative = pairs["informative"].to_numpy(bool) if "informative" in pairs else np.isfinite(se1)
    wide = informative & (half > PRECISE_HALFWIDTH)
    notes = np.full(len(pairs), "", dtype=object)
    for i in np.flatnonzero(wide):
        notes[i] = (f"too few errors to compare: CI +-{half[i]:.2f} from {int(n[i])} trials; about "
                    f"{int(needed[i])} needed for +-{PRECISE_HALFWIDTH:g} (copy model)")
    return {"trials_for_ci": pd.Series(needed, index=pairs.index),
            "ci_note": pd.Series(notes, index=pairs.index)}


def standard_trials(frame: pd.DataFrame) -> pd.DataFrame:
    """Export classification trials as the standard columns (participants become observers of
    group 'human' unless a ``group`` column says otherwise). The condition is the stimulus'
    (``stimulus_condition``, e.g. a noise level) where the export has one, else ``condition``."""
    condition: Any = frame["condition"] if "condition" in frame.columns else "all"
    if "stimulus_condition" in frame.columns and frame["stimulus_condition"].notna().any():
        condition = frame["stimulus_condition"].astype("string").fillna("all")
    return pd.DataFrame(
        {
            "experiment": frame["experiment"] if "experiment" in frame.columns else "all",
            "condition": condition,
            "observer": frame["participant"].astype(str),
            "group": frame["group"] if "group" in frame.columns else "human",
            "stimulus": frame["stimulus"].astype(str),
            "correct": frame["correct"],
        }
    )


def drop_conditions(
    frame: pd.DataFrame, exclusions: Mapping[str, Sequence[str]]
) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` without the (experiment, condition) cells named in ``exclusions``
    (experiment -> conditions, as Brain-Score's geirhos2021 benchmark leaves out c100, c03 and c01
    of contrast), with one note per experiment saying what was left out or not found."""
    keep = pd.Series(True, index=frame.index)
    notes = []
    experiments = set(frame["experiment"].astype(str))
    for experiment, conditions in exclusions.items():
        if experiment not in experiments:
            notes.append(f"exclusions: no experiment {experiment!r} in the data (ignored)")
            continue
        in_exp = frame["experiment"].astype(str) == experiment
        present = set(frame.loc[in_exp, "condition"].astype(str))
        missing = [c for c in conditions if c not in present]
        drop = in_exp & frame["condition"].astype(str).isin([str(c) for c in conditions])
        keep &= ~drop
        note = f"left out conditions {', '.join(map(str, conditions))} of {experiment} ({int(drop.sum())} trials)"
        if missing:
            note += f"; not in the data: {', '.join(map(str, missing))}"
        notes.append(note)
    return frame[keep].reset_index(drop=True), notes


def model_decision_trials(model_responses: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Each model's decision (its most probable category; the first in file order on a tie) on
    every stimulus of ``trials`` (standard columns plus the true ``category``), scored against
    the same true category, as observers of group 'model' in the same experiment and condition."""
    responses = model_responses[model_responses["stimulus"].isin(trials["stimulus"])]
    if responses.empty:
        raise ValueError("the model responses hold none of the rated stimuli")
    top = responses.loc[responses.groupby(["model", "stimulus"], sort=False)["probability"].idxmax()]
    cells = trials.drop_duplicates("stimulus").set_index("stimulus")
    missing = sorted(set(cells.index) - set(top["stimulus"]))
    if missing:
        raise ValueError(f"the model responses lack {len(missing)} rated stimuli, e.g. {missing[0]!r}")
    at = cells.loc[top["stimulus"]]
    return pd.DataFrame({
        "experiment": at["experiment"].to_numpy(),
        "condition": at["condition"].to_numpy(),
        "observer": top["model"].astype(str).to_numpy(),
        "group": "model",
        "stimulus": top["stimulus"].astype(str).to_numpy(),
        "correct": (top["category"].astype(str).to_numpy() == at["category"].astype(str).to_numpy()),
    })
