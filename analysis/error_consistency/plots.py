"""Figures for error consistency: kappa matrix, c_exp/c_obs scatter, EC per model, CI width vs n.

Each function returns a ``matplotlib.figure.Figure`` (Agg backend; save it with ``savefig``).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from numpy.typing import ArrayLike
from scipy import stats

from humanlike.analysis.error_consistency.bounds import c_obs_bounds, null_band
from humanlike.analysis.error_consistency.copy_model import (
    PRECISE_HALFWIDTH,
    kappa_standard_error,
    simulated_ci_halfwidth,
    trials_needed,
)
from humanlike.analysis.error_consistency.matrix import (
    HUMAN,
    STAT_HUMAN_HUMAN,
    STAT_MODEL_HUMAN,
    KappaMatrix,
)
from humanlike.analysis.figures import set_caption

_PAIR_COLOURS = {"human-human": "#d62728", "model-human": "#7f7f7f", "model-model": "#1f77b4"}


def _pair_type(pairs: pd.DataFrame) -> pd.Series:
    human_a = pairs["group_a"] == HUMAN
    human_b = pairs["group_b"] == HUMAN
    return pd.Series(
        np.where(
            human_a & human_b,
            "human-human",
            np.where(~human_a & ~human_b, "model-model", "model-human"),
        ),
        index=pairs.index,
    )


LABELLED_MAX = 60
"""Observers up to which the kappa matrix names each one on its axes and crosses each undefined
cell; a larger matrix is one raster image of its cells with numbered axes (at 300 observers the
per-cell crosses and labels made a 14 MB SVG that took 9 minutes to draw)."""
MAX_INCHES = 11.0
"""The matrix figure's largest side: beyond about 20 observers the cells shrink, not the page."""


def plot_kappa_matrix(result: KappaMatrix, experiment: str | None = None) -> Figure:
    """Heatmap of pairwise kappa, observers ordered by group (humans, then models); one raster
    image of the cells at any size, labelled per observer up to ``LABELLED_MAX`` observers."""
    matrix = result.matrix(experiment)
    groups = result.observers.set_index("observer").loc[matrix.index, "group"].to_numpy()
    n = len(matrix)
    labelled = n <= LABELLED_MAX
    size = min(max(4.0, 0.45 * n + 2.0), MAX_INCHES)
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    values = matrix.to_numpy(dtype=float)
    off_diag = values[~np.eye(n, dtype=bool)]
    vmax = float(np.nanmax(np.abs(off_diag))) if np.isfinite(off_diag).any() else 1.0
    vmax = max(vmax, 0.1)
    diagonal = np.eye(n, dtype=bool)
    undefined = ~diagonal & ~np.isfinite(values)  # kappa undefined: never drawn as 0 (white)
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="white")
    if labelled:
        masked = np.ma.masked_invalid(np.where(diagonal, np.nan, values))
        im: ScalarMappable = ax.imshow(masked, cmap=cmap, vmin=-vmax, vmax=vmax)
        if undefined.any():
            ax.imshow(np.ma.masked_where(~undefined, np.ones_like(values)), cmap="Greys",
                      vmin=0, vmax=4, alpha=0.9)
            for i, j in zip(*np.nonzero(undefined), strict=True):
                ax.plot(j, i, marker="x", color="0.45", ms=5 if n <= 20 else 2, mew=0.8)
    else:  # one RGB image of the cells (diagonal white, undefined grey as above)
        shown, block = _blocks(np.where(diagonal | undefined, np.nan, values))
        norm = Normalize(vmin=-vmax, vmax=vmax)
        colours = cmap(norm(np.where(np.isfinite(shown), shown, 0.0)))
        colours[~np.isfinite(shown)] = 0.9 * np.asarray(plt.get_cmap("Greys")(0.25)) + 0.1
        if block == 1:
            colours[diagonal] = (1.0, 1.0, 1.0, 1.0)
        ax.imshow(colours[..., :3], interpolation="nearest",
                  extent=(-0.5, len(shown) * block - 0.5, len(shown) * block - 0.5, -0.5))
        im = ScalarMappable(norm=norm, cmap=cmap)
    if labelled:
        ax.set_xticks(range(n), matrix.columns, rotation=90, fontsize=8)
        ax.set_yticks(range(n), matrix.index, fontsize=8)
    else:
        ax.xaxis.set_major_formatter(lambda x, _: f"{round(x) + 1}")
        ax.yaxis.set_major_formatter(lambda x, _: f"{round(x) + 1}")
        ax.set_xlabel(f"observer (1-{n}, the order of the matrix table: humans, then models)")
        ax.set_ylabel("observer")
    boundaries = np.flatnonzero(groups[1:] != groups[:-1])
    for b in boundaries:
        ax.axhline(b + 0.5, color="black", lw=1.5)
        ax.axvline(b + 0.5, color="black", lw=1.5)
    wide = _wide_cells(result, experiment, list(matrix.index))
    if n <= 20:
        for i in range(n):
            for j in range(n):
                if i != j and np.isfinite(values[i, j]):
                    dark = abs(values[i, j]) > 0.6 * vmax
                    ax.text(
                        j,
                        i,
                        f"{values[i, j]:.2f}" + ("*" if wide[i, j] else ""),
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if dark else "black",
                    )
    fig.colorbar(im, ax=ax, label="Cohen's kappa (error consistency)", shrink=0.8)
    ax.set_title(f"Error consistency{'' if experiment is None else ': ' + experiment}")
    fig.tight_layout()
    return set_caption(fig, (
        "Cohen's kappa on trial-by-trial correctness for every pair of observers (Geirhos et al. "
        "2020): red, errors shared more often than the accuracies predict; blue, less often. "
        "Black lines separate humans from models; confidence intervals are in the table."
        + (f" Grey{' with a cross' if labelled else ''}: {int(undefined.sum()) // 2} pair(s) "
           "whose kappa is undefined (an observer at 0% or 100% accuracy: no errors to compare)."
           if undefined.any() else "")
        + (f" Each cell is the mean kappa of a block of {-(-n // MAX_CELLS)} x "
           f"{-(-n // MAX_CELLS)} observer pairs ({n} observers)." if n > MAX_CELLS else "")
        + (f" *: {int(wide.sum()) // 2} pair(s) with too few errors to compare (a CI wider than "
           f"+-{PRECISE_HALFWIDTH:g} in some condition; pairs.csv's ci_note gives the copy "
           "model's trials for that width)." if wide.any() and n <= 20 else "")))


MAX_CELLS = 400
"""Cells per side of the kappa matrix image: above, each cell is the mean kappa of a block of
observer pairs (2,000 observers: 5 x 5 blocks), so the image stays about 0.3 MB."""


def _blocks(values: np.ndarray) -> tuple[np.ndarray, int]:
    """``values`` as at most ``MAX_CELLS`` x ``MAX_CELLS`` block means (NaN ignored; NaN where a
    block has no value) and the block's side (1: unchanged)."""
    n = len(values)
    block = -(-n // MAX_CELLS)
    if block == 1:
        return values, 1
    m = -(-n // block)
    padded = np.pad(values, ((0, m * block - n), (0, m * block - n)), constant_values=np.nan)
    cells = padded.reshape(m, block, m, block)
    counts = np.isfinite(cells).sum(axis=(1, 3))
    sums = np.nansum(cells, axis=(1, 3))
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), block


def _wide_cells(result: KappaMatrix, experiment: str | None, names: list[str]) -> np.ndarray:
    """(n, n) True where a pair's CI is wider than +- ``PRECISE_HALFWIDTH`` in any condition of
    ``experiment`` (all experiments with None) while its kappa is defined."""
    pairs = result.pairs
    out = np.zeros((len(names), len(names)), dtype=bool)
    if "ci_low" not in pairs:
        return out
    if experiment is not None:
        pairs = pairs[pairs["experiment"] == experiment]
    half = (pairs["ci_high"] - pairs["ci_low"]) / 2
    informative = pairs["informative"] if "informative" in pairs else pairs["kappa"].notna()
    wide = pairs[informative & (half > PRECISE_HALFWIDTH)]
    index = {name: k for k, name in enumerate(names)}
    for a, b in zip(wide["observer_a"], wide["observer_b"], strict=True):
        if a in index and b in index:
            out[index[a], index[b]] = out[index[b], index[a]] = True
    return out


def plot_consistency_scatter(
    pairs: pd.DataFrame, n_trials: int | None = None, *, confidence_level: float = 0.95
) -> Figure:
    """Scatter of ``c_exp`` vs ``c_obs`` per pair with attainable bounds and the independence band.

    Bounds: Geirhos et al. (2020, eqs. 5-6); band: central range of c_obs for independent
    observers with ``n_trials`` trials (default: median shared trials of the pairs), simulated with
    c_exp recomputed from the simulated trials as in their appendix S.3 (:func:`null_band`).
    """
    if pairs.empty:
        raise ValueError("pairs is empty: nothing to plot")
    n_trials = int(np.median(pairs["n"])) if n_trials is None else int(n_trials)
    grid = np.linspace(0.0, 1.0, 401)
    low, high = c_obs_bounds(grid)
    band_low, band_high = null_band(grid, n_trials, confidence_level=confidence_level)
    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    ax.fill_between(grid, low, high, color="0.93", label="attainable c_obs")
    ax.fill_between(
        grid,
        band_low,
        band_high,
        color="#ffbb78",
        alpha=0.7,
        label=f"{confidence_level:.0%} band, independent (n={n_trials}), simulated (S.3)",
    )
    ax.plot(grid, grid, color="0.4", lw=0.8, ls="--")
    kinds = _pair_type(pairs)
    for kind, colour in _PAIR_COLOURS.items():
        sel = kinds == kind
        if sel.any():
            ax.scatter(
                pairs.loc[sel, "c_exp"],
                pairs.loc[sel, "c_obs"],
                s=14,
                color=colour,
                alpha=0.8,
                label=kind,
                zorder=3,
            )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("expected consistency c_exp")
    ax.set_ylabel("observed consistency c_obs")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def plot_ec_per_model(result: KappaMatrix, experiment: str | None = None) -> Figure:
    """Each model's mean kappa to the humans with its CI, against the human-human ceiling."""
    s = result.summary
    level = (
        s[s["level"] == "overall"]
        if experiment is None
        else s[(s["level"] == "experiment") & (s["experiment"] == experiment)]
    )
    models = level[level["statistic"] == STAT_MODEL_HUMAN]
    ceiling = level[level["statistic"] == STAT_HUMAN_HUMAN]
    has_ci = "ci_low" in level.columns
    fig, ax = plt.subplots(figsize=(max(5.5, 0.6 * len(models) + 2.5), 4.0))
    x = np.arange(len(models))
    if not models.empty:
        y = models["kappa"].to_numpy()
        err = None
        if has_ci:
            err = np.vstack([y - models["ci_low"].to_numpy(), models["ci_high"].to_numpy() - y])
        ax.errorbar(x, y, yerr=err, fmt="o", color="#1f77b4", capsize=4, label="model vs humans")
    if not ceiling.empty:
        c = float(ceiling["kappa"].iloc[0])
        ax.axhline(c, color="#d62728", lw=1.5, label=f"human-human ceiling ({c:.3f})")
        if has_ci:
            ax.axhspan(
                float(ceiling["ci_low"].iloc[0]),
                float(ceiling["ci_high"].iloc[0]),
                color="#d62728",
                alpha=0.15,
            )
    ax.axhline(0.0, color="0.5", lw=0.8, ls=":")
    ax.set_xticks(x, models["model"].tolist(), rotation=30, ha="right")
    ax.set_xlim(-0.7, max(len(models), 1) - 0.3)
    ax.set_ylabel("mean Cohen's kappa to humans")
    title = "Error consistency per model" + ("" if experiment is None else f": {experiment}")
    if has_ci:
        title += f"\n{result.confidence_level:.0%} bootstrap CIs over stimuli"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_ci_width(
    kappa: float,
    acc1: float,
    acc2: float,
    n_trials: ArrayLike | None = None,
    *,
    target_halfwidth: float | None = None,
    confidence_level: float = 0.95,
    n_sim: int = 2000,
    random_state: int | np.random.Generator | None = None,
) -> Figure:
    """CI half-width of kappa against the number of trials: analytic curve and copy-model simulation."""
    n = np.unique(
        np.round(np.geomspace(20, 5000, 12)).astype(int)
        if n_trials is None
        else np.asarray(n_trials, dtype=int)
    )
    z = stats.norm.ppf(0.5 + confidence_level / 2)
    dense = np.geomspace(n.min(), n.max(), 200)
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    ax.plot(
        dense,
        z * kappa_standard_error(kappa, acc1, acc2, dense),
        color="#1f77b4",
        label="large-sample (Fleiss et al. 1969)",
    )
    sim = simulated_ci_halfwidth(
        kappa,
        acc1,
        acc2,
        n,
        n_sim=n_sim,
        confidence_level=confidence_level,
        random_state=random_state,
    )
    ax.plot(n, sim, "o", color="#ff7f0e", label=f"copy-model simulation ({n_sim} runs)")
    if target_halfwidth is not None:
        needed = trials_needed(
            kappa, acc1, acc2, target_halfwidth, confidence_level=confidence_level
        )
        ax.axhline(target_halfwidth, color="0.4", ls="--", lw=0.8)
        ax.axvline(needed, color="0.4", ls="--", lw=0.8)
        ax.annotate(
            f"n = {needed}",
            (needed, target_halfwidth),
            textcoords="offset points",
            xytext=(5, 5),
            fontsize=8,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of trials")
    ax.set_ylabel(f"{confidence_level:.0%} CI half-width of kappa")
    ax.set_title(f"kappa={kappa:g}, accuracies {acc1:g} / {acc2:g}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
