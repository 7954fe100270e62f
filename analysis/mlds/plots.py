"""Figures of MLDS scales: standard scales per sequence with bootstrap CIs and participants."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from humanlike.analysis.mlds.batch import ScaleFits


def plot_scales(
    fits: ScaleFits,
    *,
    participants: ScaleFits | None = None,
    group_col: str = "sequence",
    max_panels: int = 12,
    path: str | Path | None = None,
) -> plt.Figure:
    """One panel per group (the first ``max_panels``): the standard scale against level with its
    bootstrap CI as error bars, and the converged per-participant standard scales of the same
    group as thin grey lines. Saved as PNG when ``path`` is given."""
    n = min(max_panels, len(fits.keys))
    if n == 0:
        raise ValueError("no scales to plot")
    cols = min(4, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False,
                             sharex=True, sharey=True)
    levels = np.arange(1, fits.n_levels + 1)
    names = (fits.keys[group_col].astype(str).tolist() if group_col in fits.keys.columns
             else ["all trials"] * len(fits.keys))
    for i, ax in enumerate(axes.ravel()):
        if i >= n:
            ax.set_visible(False)
            continue
        if participants is not None and group_col in participants.keys.columns:
            own = (participants.keys[group_col].astype(str) == names[i]).to_numpy() & (
                participants.converged & participants.identified)
            for curve in participants.scale_std[own]:
                ax.plot(levels, curve, color="0.75", lw=0.7, zorder=1)
        y = fits.scale_std[i]
        if fits.ci is not None:
            err = np.vstack([y - fits.ci.low[i], fits.ci.high[i] - y])
            ax.errorbar(levels, y, yerr=np.clip(err, 0, None), fmt="o-", color="C0", ms=4,
                        capsize=2, zorder=3)
        else:
            ax.plot(levels, y, "o-", color="C0", ms=4, zorder=3)
        ax.plot(levels[[0, -1]], [0, 1], ":", color="0.4", lw=0.8, zorder=2)
        ax.set_title(f"{names[i]}  (sigma = {fits.sigma[i]:.3g})", fontsize=8)
        ax.set_ylim(-0.25, 1.25)
    for ax in axes[-1]:
        ax.set_xlabel("level")
    for ax in axes[:, 0]:
        ax.set_ylabel("standard scale")
    ci = f"{fits.confidence_level:.0%} bootstrap CI" if fits.ci is not None else "no CI"
    fig.suptitle(f"MLDS scales ({ci}; grey: participants)", fontsize=9)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
