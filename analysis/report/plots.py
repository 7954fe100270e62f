"""Figures of the report's own sections (sample, timing); the methods' figures live in their
subpackages' ``plots`` modules."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from humanlike.analysis.figures import set_caption


def plot_timing(timed: pd.DataFrame, participants: pd.DataFrame | None) -> Figure:
    """Left: presented minus intended duration in frames, per timed block (histogram); blocks
    shown until the response instead show their frame counts. Right: participants' refresh rates."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.4),
                                      gridspec_kw={"width_ratios": [1.6, 1]})
    targeted = timed[np.isfinite(timed["error_frames"])]
    if len(targeted):
        for i, (block, part) in enumerate(targeted.groupby("block", sort=True)):
            err = part["error_frames"].to_numpy(float)
            edges = np.arange(np.floor(err.min()) - 0.5, np.ceil(err.max()) + 1.5, 1.0)
            left.hist(err, bins=edges, alpha=0.7, color=f"C{i}", label=f"{block} ({len(part)})")
        left.axvline(0, color="black", lw=0.8, ls="--")
        left.set_xlabel("presented - intended duration (frames)")
        left.legend(fontsize=8, frameon=False)
    else:
        frames = (pd.to_numeric(timed["frames"], errors="coerce").dropna()
                  if "frames" in timed.columns else pd.Series(dtype=float))
        if len(frames):
            left.hist(frames, bins=40, color="C0")
        left.set_xlabel("frames on screen (until response)")
    left.set_ylabel("trials")
    rates = pd.Series(dtype=float)
    if participants is not None and "refresh_hz" in participants.columns:
        rates = pd.to_numeric(participants["refresh_hz"], errors="coerce")
    counts = rates.round().value_counts(dropna=False).sort_index()
    labels = ["unknown" if not np.isfinite(k) else f"{k:g}" for k in counts.index]
    right.bar(range(len(counts)), counts.to_numpy(), color="0.55")
    right.set_xticks(range(len(counts)), labels)
    right.set_xlabel("refresh rate (Hz)")
    right.set_ylabel("participants")
    right.yaxis.set_major_locator(MaxNLocator(integer=True))  # people come in whole numbers
    for ax in (left, right):
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    left_text = (
        "Left: for every block with an intended image duration, the presented duration (measured "
        "in the browser from frame timestamps) minus the intended one, in frames of the "
        "participant's refresh rate; the dashed line is a perfect match, the legend gives trials "
        "per block." if len(targeted) else
        "Left: frames each image stayed on screen (every block is shown until the response, so "
        "there is no intended duration to compare with).")
    return set_caption(fig, left_text + " Right: the refresh rates the participants' browsers "
                                        "measured.")


def plot_sample(participants: pd.DataFrame) -> Figure:
    """Participants per status, split into analysed and not (the export's ``analysed``,
    :mod:`humanlike.analysis.sample`)."""
    from humanlike.analysis.sample import with_analysed

    participants = with_analysed(participants)
    status = participants["status"].astype(str)
    analysed = participants["analysed"]
    order = status.value_counts().index.tolist()
    kept = [int(((status == s) & analysed).sum()) for s in order]
    out = [int(((status == s) & ~analysed).sum()) for s in order]
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(order) + 1.2))
    y = np.arange(len(order))
    ax.barh(y, kept, color="#3182bd", label="analysed")
    ax.barh(y, out, left=kept, color="#bdbdbd", label="not analysed")
    ax.set_yticks(y, order)
    ax.invert_yaxis()
    ax.set_xlabel("participants")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return set_caption(fig, "Participants by status (blue: analysed; grey: not analysed: left "
                            "early, still in progress, rejected, or excluded by QC or the "
                            "researcher, reasons in the table).")
