"""Figures for rating experiments: model scores against the noise ceiling, reliability, RTs."""

from __future__ import annotations

from typing import cast

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from humanlike.analysis.figures import set_caption
from humanlike.analysis.ratings.bootstrap import RatingsBootstrap
from humanlike.analysis.ratings.reliability import repeat_pairs, repeat_reliability
from humanlike.vocabulary import StimulusKind

_LABELS = {"pearson_r": "mean Pearson r with each participant", "mse": "mean squared error"}
_SUBSET_TITLES = {
    "all": "all stimuli",
    StimulusKind.CONTROVERSIAL.value: "controversial stimuli",
    StimulusKind.NATURAL.value: "natural stimuli",
}


def plot_model_scores(
    result: RatingsBootstrap,
    subset: str = "all",
    metric: str = "pearson_r",
    ax: plt.Axes | None = None,
) -> Figure:
    """Golan et al. (2020) Fig. 4 layout: model scores with CIs against the noise ceiling.

    Bars: each model's mean score with its bootstrap CI, best model first. Grey bar at the right: the
    leave-one-out lower bound with its CI and one dot per participant (that participant's r with the
    others' mean). Dashed line: the upper bound; shaded band: the noise ceiling (lower to upper).
    Brackets join model pairs that differ significantly (Holm-Sidak); models significantly worse
    than the lower bound are drawn in a lighter colour.
    """
    scores = result.scores.query("subset == @subset and metric == @metric")
    if scores.empty:
        raise ValueError(f"no scores for subset {subset!r} and metric {metric!r}")
    bounds = result.ceilings.query("subset == @subset and metric == @metric").set_index("bound")
    tests = result.comparisons.query("subset == @subset and metric == @metric")
    higher_is_better = metric != "mse"
    scores = scores.sort_values("estimate", ascending=not higher_is_better).reset_index(drop=True)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(6.5, 0.7 * len(scores) + 4.5), 4.5))
    else:
        fig = cast(Figure, ax.figure)  # stubs: Figure | SubFigure
    x = np.arange(len(scores))
    worse = tests.query("comparison == 'model vs lower bound' and significant")
    below = worse[(worse["difference"] < 0) == higher_is_better]["a"]
    colors = ["#9ecae1" if m in set(below) else "#3182bd" for m in scores["model"]]
    err = np.vstack([scores["estimate"] - scores["ci_low"], scores["ci_high"] - scores["estimate"]])
    ax.bar(x, scores["estimate"], color=colors, yerr=err, capsize=3, ecolor="black", zorder=2)
    lower, upper = bounds.loc["lower"], bounds.loc["upper"]
    xl = len(scores) + 0.3
    lower_estimate, upper_estimate = cast(float, lower["estimate"]), cast(float, upper["estimate"])
    ax.axhspan(lower_estimate, upper_estimate, color="0.85", zorder=0, label="noise ceiling")
    ax.axhline(
        upper_estimate, color="0.3", linestyle="--", linewidth=1, zorder=1, label="upper bound"
    )
    ax.bar(
        [xl],
        [lower["estimate"]],
        color="0.6",
        zorder=2,
        label="lower bound (leave one out)",
        yerr=[[lower["estimate"] - lower["ci_low"]], [lower["ci_high"] - lower["estimate"]]],
        capsize=3,
        ecolor="black",
    )
    people = result.per_participant.query("subset == @subset")
    dots = people["loo_r" if metric == "pearson_r" else "loo_mse"].dropna().to_numpy()
    jitter = np.random.default_rng(0).uniform(-0.25, 0.25, dots.size)
    ax.scatter(xl + jitter, dots, s=10, color="black", alpha=0.6, zorder=3)
    floor = float(np.nanmax([*scores["ci_high"], upper["estimate"], lower["ci_high"]]))
    _brackets(ax, scores, tests, x, floor)
    ax.set_xticks([*x, xl], [*scores["model"], "humans\n(LOO)"], rotation=45, ha="right")
    ax.set_ylabel(_LABELS.get(metric, metric))
    ax.set_title(
        f"{_SUBSET_TITLES.get(subset, subset)} ({int(100 * result.confidence_level)}% CI, "
        f"{result.n_resamples} resamples)",
        fontsize=10,
    )
    handles, labels = ax.get_legend_handles_labels()
    if len(below):
        handles.append(Patch(color="#9ecae1"))
        labels.append("significantly worse than\nthe lower bound")
    ax.legend(
        handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False
    )
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return set_caption(fig, (
        f"{_SUBSET_TITLES.get(subset, subset).capitalize()}: each model's {_LABELS.get(metric, metric)} "
        f"(blue bars, best first) with its {result.confidence_level:.0%} bootstrap CI (error bars; "
        f"{result.n_resamples} resamples of participants and stimuli). Grey bar: the noise "
        "ceiling's lower bound (each participant's score against the mean of the others), one "
        "dot per participant; dashed line: the upper bound; shaded band: the noise ceiling "
        "between them. Brackets join model pairs whose difference is significant after "
        "Holm-Sidak correction; light bars mark models significantly below the lower bound "
        "(Golan et al. 2020, Fig. 4)."))


def _brackets(
    ax: plt.Axes, scores: pd.DataFrame, tests: pd.DataFrame, x: np.ndarray, floor: float
) -> None:
    """Brackets over significantly different model pairs, packed into as few rows as possible.

    Shortest spans go lowest; a bracket takes the lowest row where it overlaps no other bracket.
    The rows share a band above ``floor`` whose height is at most 40% of the plotted range.
    """
    position = dict(zip(scores["model"], x))
    pairs = tests.query("comparison == 'model vs model' and significant")
    if pairs.empty:
        return
    spans = sorted(
        (sorted((position[a], position[b])) for a, b in zip(pairs["a"], pairs["b"])),
        key=lambda ab: (ab[1] - ab[0], ab[0]),
    )
    rows: list[list[tuple[float, float]]] = []
    placed = []
    for left, right in spans:
        level = next(
            (i for i, row in enumerate(rows) if all(right < l0 or left > r0 for l0, r0 in row)),
            len(rows),
        )
        if level == len(rows):
            rows.append([])
        rows[level].append((left - 0.1, right + 0.1))
        placed.append((level, left, right))
    data_range = floor - min(0.0, float(np.nanmin(scores["ci_low"])))
    step = min(0.05, 0.4 / len(rows)) * (data_range or 1.0)
    for level, left, right in placed:
        y = floor + (level + 1) * step
        ax.plot(
            [left, left, right, right],
            [y - step / 3, y, y, y - step / 3],
            color="0.2",
            linewidth=0.8,
            gid="significance-bracket",
        )


def plot_repeat_reliability(frame: pd.DataFrame) -> Figure:
    """First vs repeated ratings (pooled, jittered) and each participant's repeat r with its n."""
    pairs = repeat_pairs(frame)
    reliability = repeat_reliability(frame).dropna(subset=["r"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
    if pairs.empty:
        left.text(0.5, 0.5, "no repeated trials", ha="center", va="center")
    else:
        rng = np.random.default_rng(0)
        jitter = rng.uniform(-0.04, 0.04, size=(2, len(pairs)))
        left.scatter(pairs["first"] + jitter[0], pairs["repeat"] + jitter[1], s=4, alpha=0.2)
        left.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=1)
    left.set_xlabel("first rating")
    left.set_ylabel("repeated rating")
    left.set_title("ratings of repeated trials", fontsize=10)
    order = reliability.sort_values("r")
    right.scatter(
        order["r"], np.arange(len(order)), s=12 + order["n"] / max(order["n"].max(), 1) * 40
    )
    if len(order) <= 40:
        right.set_yticks(np.arange(len(order)), order.index, fontsize=6)
    else:  # too many names to read: participants in order of their r
        right.set_yticks([])
        right.set_ylabel(f"{len(order)} participants, sorted by r")
    right.set_xlabel("repeat reliability r (dot size ~ n)")
    right.set_title("per participant", fontsize=10)
    for axis in (left, right):
        axis.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return set_caption(fig, (
        "Left: every rating of a repeated trial against the first rating of the same image and "
        "category (jittered; dashed: identity). Right: each participant's Pearson r between "
        "first and repeated ratings; dot size grows with the number of rating pairs."))


def plot_rt_histograms(frame: pd.DataFrame, min_trial_rt_ms: float | None = 100.0) -> Figure:
    """Histogram of trial RTs (log axis, cleaning threshold marked) and of participants' median RT."""
    trials = frame.drop_duplicates(
        ["participant", "trial_index"]
        if "trial_index" in frame.columns
        else ["participant", "stimulus", "is_repeat"]
    )
    rt = trials["rt_ms"].to_numpy(float)
    rt = rt[np.isfinite(rt) & (rt > 0)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    if rt.size:
        bins = np.geomspace(max(rt.min(), 1.0), rt.max() * 1.01, 40)
        left.hist(rt, bins=bins, color="#3182bd")
        left.set_xscale("log")
        if min_trial_rt_ms is not None:
            left.axvline(min_trial_rt_ms, color="red", linestyle="--", label="too fast")
            left.legend(frameon=False, fontsize=8)
        medians = trials.groupby("participant")["rt_ms"].median().dropna()
        right.hist(medians, bins=min(20, max(5, medians.size)), color="#9ecae1")
    left.set_xlabel("trial RT (ms)")
    left.set_ylabel("trials")
    right.set_xlabel("median RT per participant (ms)")
    right.set_ylabel("participants")
    for axis in (left, right):
        axis.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig
