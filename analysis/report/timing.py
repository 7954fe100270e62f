"""Timing quality of a study: presented against intended durations, frame counts, refresh rates."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from humanlike.analysis.io.export import flag


def intended_durations(spec: Mapping[str, object] | None) -> dict[str, float]:
    """Block name -> intended image duration (ms) of the spec's timed blocks (classification
    blocks' ``duration_ms``); blocks shown until the response have none."""
    out: dict[str, float] = {}
    blocks = spec.get("blocks", []) if spec else []
    for block in blocks if isinstance(blocks, list) else []:
        settings = block.get("classification") if isinstance(block, dict) else None
        if isinstance(settings, dict) and settings.get("duration_ms") is not None:
            out[str(block.get("name"))] = float(settings["duration_ms"])
    return out


def timing_trials(trials: pd.DataFrame, participants: pd.DataFrame | None,
                  intended: Mapping[str, float]) -> pd.DataFrame:
    """Non-practice trials with presented duration, frames, the participant's refresh rate, the
    intended duration of their block and the error presented - intended (ms and frames).

    ``trials`` is the export's ``trials`` table, which holds block trials only (the debrief, made by
    the timeline rather than a block, has its own table): every row was presented."""
    frame = trials[~flag(trials, "practice")]
    keep = ["participant", "block", "trial_type", "presented_ms", "frames", "rt_ms"]
    frame = frame[[c for c in keep if c in frame.columns]].copy()
    frame["participant"] = frame["participant"].astype(str)
    if "block" not in frame.columns:
        frame["block"] = frame["trial_type"]
    refresh = pd.Series(dtype=float)
    if participants is not None and "refresh_hz" in participants.columns:
        refresh = pd.to_numeric(participants.set_index(
            participants["participant"].astype(str))["refresh_hz"], errors="coerce")
    frame["refresh_hz"] = frame["participant"].map(refresh).astype(float)
    frame["intended_ms"] = frame["block"].astype(str).map(dict(intended)).astype(float)
    if "presented_ms" not in frame.columns:
        frame["presented_ms"] = np.nan
    frame["presented_ms"] = pd.to_numeric(frame["presented_ms"], errors="coerce")
    frame["error_ms"] = frame["presented_ms"] - frame["intended_ms"]
    frame["error_frames"] = frame["error_ms"] * frame["refresh_hz"] / 1000.0
    return frame


def timing_summary(timed: pd.DataFrame) -> pd.DataFrame:
    """One row per block: trials, intended ms, median and 95th percentile of presented ms, median
    frames, median error and the share of trials within half a frame of the intended duration."""
    rows = []
    for (block, kind), part in timed.groupby(["block", "trial_type"], sort=True):
        error = part["error_frames"].to_numpy(float)
        has_target = bool(np.isfinite(part["intended_ms"]).any())
        presented = part["presented_ms"].dropna()
        rows.append({
            "block": block, "trial type": kind, "trials": len(part),
            "intended ms": part["intended_ms"].iloc[0] if has_target else np.nan,
            "presented ms": presented.median() if len(presented) else np.nan,
            "95th pct ms": presented.quantile(0.95) if len(presented) else np.nan,
            "frames": pd.to_numeric(part["frames"], errors="coerce").median()
            if "frames" in part else np.nan,
            "error ms": float(np.nanmedian(part["error_ms"])) if has_target else np.nan,
            "on target": float(np.mean(np.abs(error[np.isfinite(error)]) < 0.5))
            if has_target and np.isfinite(error).any() else np.nan,
        })
    return pd.DataFrame(rows)
