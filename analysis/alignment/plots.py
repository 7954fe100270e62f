"""Figures of the alignment profile: every metric per model with its CI (one panel per metric),
and the metrics' rank agreement across models (a matrix per experiment)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from humanlike.analysis.alignment.comparison import REFERENCES
from humanlike.analysis.alignment.profile import AlignmentProfile
from humanlike.analysis.figures import set_caption

#: Short panel titles of the metrics.
LABELS = {
    "accuracy": "accuracy",
    "accuracy_difference": "accuracy difference",
    "observed_consistency": "observed consistency",
    "error_consistency": "error consistency (kappa)",
    "accuracy_distance": "accuracy distance",
    "accuracy_distance_ceiled": "accuracy distance / ceiling",
    "conditional_error_consistency": "conditional EC",
    "conditional_error_consistency_ceiled": "conditional EC / ceiling",
    "shape_match": "shape match",
    "shape_bias": "shape bias",
}


def plot_profile(profile: AlignmentProfile, experiment: str, *, regime: str = "all",
                 metrics: Sequence[str] | None = None, columns: int = 4) -> Figure:
    """One panel per metric: each model's estimate (dot) and CI (bar); the humans' value or the
    human ceiling as a dashed line with its CI as a grey band."""
    t = profile.table
    rows = t[(t["experiment"] == experiment) & (t["regime"] == regime)]
    if metrics is not None:
        rows = rows[rows["metric"].isin(metrics)]
    shown = list(dict.fromkeys(rows["metric"]))
    models = sorted(set(rows["observer"].astype(str)) - set(REFERENCES))
    n_rows = max(1, -(-len(shown) // columns))
    fig, axes = plt.subplots(n_rows, columns, figsize=(2.55 * columns, 0.32 * len(models) * n_rows
                                                        + 1.0 * n_rows + 0.3),
                             squeeze=False, sharey=True)
    y = np.arange(len(models))
    for ax, metric in zip(axes.flat, shown, strict=False):
        part = rows[rows["metric"] == metric].set_index("observer")
        for ref, label in (("humans", "humans"), ("ceiling", "ceiling")):
            if ref in part.index and np.isfinite(part.loc[ref, "estimate"]):
                ax.axvspan(part.loc[ref, "ci_low"], part.loc[ref, "ci_high"], color="0.88", lw=0)
                ax.axvline(part.loc[ref, "estimate"], color="0.35", ls="--", lw=1, label=label)
        at = part.reindex(models)
        est = at["estimate"].to_numpy(float)
        err = np.abs(np.vstack([est - at["ci_low"].to_numpy(float),
                                at["ci_high"].to_numpy(float) - est]))
        ax.errorbar(est, y, xerr=np.nan_to_num(err), fmt="o", color="C0", ms=4, capsize=2,
                    lw=1.2)
        ax.set_title(LABELS.get(metric, metric), fontsize=9)
        ax.tick_params(axis="x", labelsize=7.5)
        ax.spines[["top", "right"]].set_visible(False)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, frameon=False, loc="best")
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:  # the axes share y: models top to bottom
        ax.set_yticks(y, models, fontsize=8)
    axes[0, 0].set_ylim(len(models) - 0.4, -0.6)
    fig.suptitle(f"{experiment} (regime {regime})", fontsize=10)
    fig.tight_layout()
    return set_caption(fig, (
        f"Alignment profile of {experiment}: each panel is one metric, each row one model; dots "
        f"are estimates, bars {profile.confidence_level:.0%} percentile bootstrap CIs "
        f"({profile.n_resamples} resamples shared by all metrics). The dashed line is the "
        "humans' own value (accuracy, shape match, shape bias) or the human ceiling (accuracy "
        "distance: leave-one-out; conditional EC: mean human-human kappa), the grey band its CI. "
        "Higher is more humanlike except for accuracy and accuracy difference, where the "
        "humans' level is."))


def plot_agreement(agreement: pd.DataFrame) -> Figure:
    """Spearman's rho across models between each pair of metrics, one matrix per experiment."""
    experiments = list(dict.fromkeys(agreement["experiment"].astype(str)))
    fig, axes = plt.subplots(1, max(1, len(experiments)), layout="constrained",
                             figsize=(4.6 * max(1, len(experiments)) + 1.0, 4.4), squeeze=False)
    image = None
    for ax, experiment in zip(axes.flat, experiments, strict=False):
        part = agreement[agreement["experiment"].astype(str) == experiment]
        names = list(dict.fromkeys([*part["metric_a"], *part["metric_b"]]))
        index = {m: i for i, m in enumerate(names)}
        matrix = np.eye(len(names))
        for a, b, rho in zip(part["metric_a"], part["metric_b"], part["spearman"].astype(float),
                             strict=True):
            matrix[index[a], index[b]] = matrix[index[b], index[a]] = rho
        image = ax.imshow(matrix, vmin=-1, vmax=1, cmap="RdBu_r")
        for (i, j), value in np.ndenumerate(matrix):
            if i != j:
                ax.text(j, i, "" if not np.isfinite(value) else f"{value:.2f}", ha="center",
                        va="center", fontsize=7.5,
                        color="white" if np.isfinite(value) and abs(value) > 0.6 else "black")
        labels = [LABELS.get(m, m) for m in names]
        ax.set_xticks(range(len(names)), labels, rotation=55, ha="right", fontsize=7.5)
        ax.set_yticks(range(len(names)), labels, fontsize=7.5)
        ax.set_title(f"{experiment} ({int(part['n_models'].iloc[0])} models)", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=list(axes.flat), shrink=0.7, label="Spearman rho across models")
    return set_caption(fig, (
        "Agreement of the metrics: Spearman's rank correlation across models between each pair "
        "of metrics (each oriented so that higher is more humanlike; accuracy difference as "
        "minus its absolute value). 1: the two metrics rank the models alike; a metric undefined "
        "for some model is left out of that experiment's matrix. CIs and Kendall's tau are in the "
        "table."))
