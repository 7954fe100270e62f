"""Kernel-analysis figure in the layout of Cadieu et al. (2013, Fig. 3) and KA-AUC tables.

One axis, one line per representation (mean of 1 - e(d) over subsets) with a shaded band from the
pointwise minimum to the maximum over subsets; complexity d/n on a log axis; and a table of
KA-AUC as mean (SD) over subsets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from humanlike.analysis.kernel.protocol import KAProtocolResult


def curves_table(results: Mapping[str, KAProtocolResult]) -> pd.DataFrame:
    """Long form: representation, subset, d, complexity d/n, accuracy 1 - e(d), sigma kept at d."""
    frames = []
    for name, r in results.items():
        n_sub, n_d = r.curves.shape
        sigma = np.take_along_axis(r.sigma, r.best_width, axis=1)
        frames.append(
            pd.DataFrame(
                {
                    "representation": name,
                    "subset": np.repeat(np.arange(n_sub), n_d),
                    "d": np.tile(np.arange(n_d), n_sub),
                    "complexity": np.tile(r.complexity, n_sub),
                    "accuracy": r.curves.ravel(),
                    "sigma": sigma.ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def auc_table(results: Mapping[str, KAProtocolResult], *, digits: int = 3) -> pd.DataFrame:
    """One row per representation: AUC mean, SD (ddof=0), subsets, images per subset, 'mean (SD)'."""
    rows = [
        {
            "representation": name,
            "auc_mean": r.auc_mean,
            "auc_sd": r.auc_sd,
            "n_subsets": r.curves.shape[0],
            "n_images": r.subsets.shape[1],
            "auc": f"{r.auc_mean:.{digits}f} ({r.auc_sd:.{digits}f})",
        }
        for name, r in results.items()
    ]
    return pd.DataFrame(rows)


def auc_table_markdown(table: pd.DataFrame) -> str:
    """The AUC table as a Markdown table: representation | KA-AUC mean (SD) | subsets | images."""
    lines = [
        "| representation | KA-AUC mean (SD) | subsets | images per subset |",
        "| --- | --- | ---: | ---: |",
    ]
    lines += [
        f"| {row.representation} | {row.auc} | {row.n_subsets} | {row.n_images} |"
        for row in table.itertuples()
    ]
    return "\n".join(lines) + "\n"


def plot_ka_curves(
    results: Mapping[str, KAProtocolResult],
    *,
    ax: plt.Axes | None = None,
    log_x: bool = True,
    title: str | None = None,
) -> Figure:
    """Cadieu et al. (2013) Fig. 3: mean KA curve per representation with a min-max band."""
    if not results:
        raise ValueError("results: need at least one representation to plot")
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 4.0), dpi=150)
    else:
        fig = cast(Figure, ax.figure)  # stubs: Figure | SubFigure
    colours = plt.get_cmap("tab10")
    for i, (name, r) in enumerate(results.items()):
        x = r.complexity[1:] if log_x else r.complexity  # d = 0 has no place on a log axis
        sl = slice(1, None) if log_x else slice(None)
        colour = colours(i % 10)
        ax.fill_between(x, r.curve_min[sl], r.curve_max[sl], color=colour, alpha=0.25, lw=0)
        ax.plot(
            x,
            r.curve_mean[sl],
            color=colour,
            lw=1.5,
            label=f"{name}  AUC {r.auc_mean:.3f} ({r.auc_sd:.3f})",
        )
    if log_x:
        ax.set_xscale("log")
        ax.set_xlim(min(r.complexity[1] for r in results.values()), 1.0)
    else:
        ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("complexity (d / n)")
    ax.set_ylabel("accuracy (1 - loss)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small", frameon=False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def save_ka_figure(results: Mapping[str, KAProtocolResult], path, **kwargs) -> None:
    """Draw :func:`plot_ka_curves` and save it as PNG at ``path``."""
    fig = plot_ka_curves(results, **kwargs)
    fig.savefig(path, format="png")
    plt.close(fig)
