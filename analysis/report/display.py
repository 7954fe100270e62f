"""The study's timing and display certificate in the report: per trial type and refresh rate, the
frames requested and shown and the duration error's mean and SD in ms, the units of Bridges et al.
(2020, PeerJ 8:e9414); and the virtual chinrest's results (Li et al. 2020, Sci Rep 10:904).

Reads the export's ``trial_timing`` table (one row per timed, non-practice trial, written by
``humanlike.server.participants.display.trial_timing``) and its ``display`` table (one row per participant)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from humanlike.analysis.io.export import Export
from humanlike.analysis.report.sections import Section, Table

TIMING_TABLE_COLUMNS = ["trial_type", "refresh_hz", "participants", "trials", "requested_ms",
                        "requested_frames", "frames_shown", "on_frames", "max_frame_miss",
                        "duration_error_mean_ms", "duration_error_sd_ms"]


SHORT_NAMES = {"refresh_hz": "Hz", "requested_ms": "req_ms", "requested_frames": "req_frames",
               "frames_shown": "shown_frames", "on_frames": "on_target", "max_frame_miss": "max_miss",
               "duration_error_mean_ms": "error_mean_ms", "duration_error_sd_ms": "error_sd_ms"}
"""The timing table's columns as the report shows them (narrow enough for the page)."""


def timing_table(timing: pd.DataFrame) -> pd.DataFrame:
    """One row per trial type, refresh rate (whole Hz) and requested duration: participants, trials,
    requested ms and frames, mean frames shown, the share of trials on exactly the requested frames,
    the largest miss and the duration error (presented - requested, ms) mean and SD (n - 1)."""
    if timing.empty:
        return pd.DataFrame(columns=TIMING_TABLE_COLUMNS)
    t = timing.assign(refresh_hz=np.round(1000.0 / timing["frame_ms"].astype(float)).astype(int),
                      on=(timing["frame_error"] == 0).astype(float),
                      miss=timing["frame_error"].abs())
    g = t.groupby(["trial_type", "refresh_hz", "requested_ms"], sort=True)
    out = pd.DataFrame({
        "participants": g["participant"].nunique(), "trials": g.size(),
        "requested_frames": g["requested_frames"].median(), "frames_shown": g["frames"].mean(),
        "on_frames": g["on"].mean(), "max_frame_miss": g["miss"].max(),
        "duration_error_mean_ms": g["duration_error_ms"].mean(),
        "duration_error_sd_ms": g["duration_error_ms"].std(ddof=1),
    }).reset_index()
    return out[TIMING_TABLE_COLUMNS]


def calibration_summary(display: pd.DataFrame) -> pd.DataFrame:
    """Medians and interquartile ranges of the calibrated participants' px/mm, viewing distance,
    px/deg and rendered image height in degrees; counts of unsuitable displays by reason."""
    rows = []
    calibrated = display[display["px_per_deg"].notna()] if "px_per_deg" in display else display.iloc[:0]
    for column, label in [("px_per_mm", "pixels per mm"), ("viewing_distance_mm", "viewing distance (mm)"),
                          ("px_per_deg", "pixels per degree"), ("image_height_deg", "image height (deg)"),
                          ("refresh_hz", "refresh rate (Hz)")]:
        values = pd.to_numeric((display if column == "refresh_hz" else calibrated)[column],
                               errors="coerce").dropna()
        if len(values):
            q1, med, q3 = np.percentile(values, [25, 50, 75])
            rows.append({"measure": label, "n": len(values), "median": med, "q1": q1, "q3": q3})
    return pd.DataFrame(rows, columns=["measure", "n", "median", "q1", "q3"])


def display_section(export: Export) -> Section:
    """The timing certificate per study (Bridges et al. 2020 units) and the calibration's results."""
    section = Section("display", "Display and timing certificate")
    if not export.has("trial_timing"):
        section.missing = "the export holds no trial_timing table (exported before issue 30)"
        return section
    timing = export.table("trial_timing")
    excluded = export.excluded_participants()
    timing = timing[~timing["participant"].astype(str).isin(excluded)]
    if timing.empty:
        section.missing = "no analysed trial was timed (every stimulus stayed until the response)"
        return section
    table = timing_table(timing)
    people = export.participants
    if people is not None and "analysed" in people:  # the export's analysed set, as the reader's
        analysed = people.loc[people["analysed"] | export.include_excluded, "participant"]
    else:
        analysed = timing["participant"]
    analysed = analysed.astype(str)
    section.paragraphs.append(
        f"{len(timing)} timed trials of {timing['participant'].nunique()} analysed participants. Each "
        "requested duration was shown as a whole number of frames at the participant's measured "
        "refresh rate (round half up, at least one); durations were measured from "
        "requestAnimationFrame timestamps. Duration error = measured - requested (ms), reported as "
        "mean and SD in the manner of Bridges et al. (2020).")
    shown = table.rename(columns=SHORT_NAMES)
    section.tables.append(Table(shown, "Per trial type, refresh rate (Hz) and requested duration "
                                "(req_ms): frames requested (req_frames) and shown (mean), the share "
                                "of trials on exactly the requested frames (on_target), the largest "
                                "miss in frames, and the duration error (ms) mean and SD."))
    if export.has("display"):
        display = export.table("display")
        display = display[display["participant"].astype(str).isin(set(analysed))]
        summary = calibration_summary(display)
        if len(summary):
            calibrated = int(display["px_per_deg"].notna().sum()) if "px_per_deg" in display else 0
            section.tables.append(Table(summary, (
                f"Display measurements: {display['participant'].nunique()} of the "
                f"{analysed.nunique()} analysed participants have a display record; {calibrated} "
                "of them calibrated with the virtual chinrest (Li et al. 2020). n counts the "
                "participants behind each row (refresh rate: every record; the chinrest's "
                "measures: the calibrated); median and interquartile range over them.")))
    return section
