"""Figures of MLDS scales: standard scales per sequence with bootstrap CIs and participants."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from humanlike.analysis.figures import save_figure, set_caption
from humanlike.analysis.mlds.batch import ScaleFits

_EXCLUDED_COLOUR = "#e6550d"


def plot_scales(
    fits: ScaleFits,
    *,
    participants: ScaleFits | None = None,
    group_col: str = "sequence",
    max_panels: int = 12,
    excluded: Collection[str] = (),
    truth: dict[str, np.ndarray] | None = None,
    path: str | Path | None = None,
) -> Figure:
    """One panel per group (the first ``max_panels``): the standard scale against level with its
    bootstrap CI as error bars, and the converged per-participant standard scales of the same
    group as thin grey lines (``excluded`` participants dashed orange). A participant's scale no
    better than a flat one (:meth:`ScaleFits.informative`) is drawn faint and dotted and does not
    set the y axis; the axis spans every other drawn curve and the pooled CIs, so none is cut. ``truth`` (group -> standard scale) adds the generating scale of
    simulated data. A flagged pooled scale (reversed, non-monotone) says so in its title. Saved
    (SVG, PDF or PNG by suffix) when ``path`` is given; the caption is attached
    (:func:`humanlike.analysis.figures.caption`)."""
    n = min(max_panels, len(fits.keys))
    if n == 0:
        raise ValueError("no scales to plot")
    cols = min(4, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.9 * rows + 0.6), squeeze=False,
                             sharex=True, sharey=True)
    levels = np.arange(1, fits.n_levels + 1)
    names = (fits.keys[group_col].astype(str).tolist() if group_col in fits.keys.columns
             else ["all trials"] * len(fits.keys))
    flags = fits.flags()
    excluded = {str(p) for p in excluded}
    drawn: list[np.ndarray] = []
    n_people = n_excluded_drawn = n_faint = 0
    telling = participants.informative()[0] if participants is not None else None
    for i, ax in enumerate(axes.ravel()):
        if i >= n:
            ax.set_visible(False)
            continue
        if participants is not None and group_col in participants.keys.columns:
            own = (participants.keys[group_col].astype(str) == names[i]).to_numpy() & (
                participants.converged & participants.identified)
            who = (participants.keys["participant"].astype(str).to_numpy()
                   if "participant" in participants.keys.columns else np.full(len(own), ""))
            assert telling is not None
            for curve, person, says in zip(participants.scale_std[own], who[own], telling[own],
                                           strict=True):
                if not np.isfinite(curve).all():
                    continue
                if not says:  # no better than a flat scale: faint, and it does not set the axis
                    ax.plot(levels, curve, color="0.85", lw=0.5, ls=":", zorder=0)
                    n_faint += 1
                    continue
                out = person in excluded
                ax.plot(levels, curve, color=_EXCLUDED_COLOUR if out else "0.72",
                        lw=0.9 if out else 0.7, ls="--" if out else "-", zorder=1)
                drawn.append(curve)
                n_people += 1
                n_excluded_drawn += int(out)
        y = fits.scale_std[i]
        drawn.append(y)
        if fits.ci is not None:
            err = np.vstack([y - fits.ci.low[i], fits.ci.high[i] - y])
            ax.errorbar(levels, y, yerr=np.clip(np.nan_to_num(err), 0, None), fmt="o-", color="C0",
                        ms=4, capsize=2, zorder=3)
            drawn += [fits.ci.low[i], fits.ci.high[i]]
        else:
            ax.plot(levels, y, "o-", color="C0", ms=4, zorder=3)
        if truth is not None and names[i] in truth:
            ax.plot(levels, truth[names[i]], "s", mfc="none", color="black", ms=5, zorder=4)
        ax.plot(levels[[0, -1]], [0, 1], ":", color="0.4", lw=0.8, zorder=2)
        title = f"{names[i]}  (sigma = {fits.sigma[i]:.3g})"
        if flags[i]:
            title += f"\n{flags[i].upper()}"
        ax.set_title(title, fontsize=8, color="#b30000" if flags[i] else "black")
    values = np.concatenate([np.ravel(v) for v in drawn])
    values = values[np.isfinite(values)]
    low, high = (min(0.0, values.min()), max(1.0, values.max())) if values.size else (0.0, 1.0)
    pad = 0.06 * (high - low)
    axes[0, 0].set_ylim(low - pad, high + pad)
    for ax in axes[-1]:
        ax.set_xlabel("level")
    for ax in axes[:, 0]:
        ax.set_ylabel("standard scale")
    handles = [Line2D([], [], color="C0", marker="o", ms=4,
                      label="pooled scale" + (f" ({fits.confidence_level:.0%} CI)"
                                              if fits.ci is not None else ""))]
    if n_people:
        handles.append(Line2D([], [], color="0.72", lw=0.7, label="participants"))
    if n_excluded_drawn:
        handles.append(Line2D([], [], color=_EXCLUDED_COLOUR, lw=0.9, ls="--",
                              label="excluded participants"))
    if n_faint:
        handles.append(Line2D([], [], color="0.8", lw=0.7, ls=":",
                              label="uninformative participants"))
    if truth is not None:
        handles.append(Line2D([], [], color="black", marker="s", mfc="none", ls="none",
                              label="generating scale"))
    handles.append(Line2D([], [], color="0.4", ls=":", lw=0.8, label="linear scale"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07 if rows == 1 else 0.04, 1, 1))
    ci = (f"error bars: {fits.confidence_level:.0%} parametric-bootstrap percentile intervals "
          f"({fits.n_resamples} replicates)" if fits.ci is not None else "no bootstrap CIs")
    set_caption(fig, (
        f"MLDS standard scales (psi_1 = 0, psi_N = 1) of {n} of {len(fits.keys)} "
        f"{group_col}s, pooled over participants (blue; {ci}). Grey lines: the converged "
        f"scale of each participant who saw every level"
        + (f"; dashed orange: {n_excluded_drawn} scale(s) (participant x sequence) of participants the QC excluded "
           "(not in the pooled fit)" if n_excluded_drawn else "")
        + (f"; faint dotted grey: {n_faint} uninformative scale(s) (no better than a flat "
           "scale by likelihood ratio, p >= 0.05, or a sigma over 5 times the pooled one), "
           "drawn without setting the y axis (they may leave it)" if n_faint else "")
        + ". Dotted: a linear scale. Titles give sigma, the decision noise on the standard "
        "scale; a red title names a flag (reversed: sigma < 0; non-monotone: a drop of more than "
        "two standard errors between adjacent levels)."
        + (" Open squares: the scale that generated the simulated responses." if truth else "")
    ))
    if path is not None:
        save_figure(fig, path)
    return fig
