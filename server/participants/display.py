"""The display a participant saw: the spec's ``[display]`` table, the calibration record (virtual
chinrest and refresh rate, one table of its own), and the timing certificate (durations as whole
frames; duration errors in the units of Bridges et al. 2020, PeerJ 8:e9414: mean and SD in ms).

Geometry (Li, Joo, Yeatman & Reinecke 2020, Sci Rep 10:904, the virtual chinrest): a card of known
width (ID-1, 85.6 mm) resized on screen gives pixels per millimetre; the blind spot, 13.5 degrees
temporal of fixation, found at ``s`` px from the fixation square gives the viewing distance
``d = (s / px_per_mm) / tan(13.5 deg)``; one degree at the screen centre is then
``px_per_deg = px_per_mm * 2 d tan(0.5 deg)``. The browser (``static/js/display.js``) computes the
same numbers; ``DisplayIn`` refuses a record whose numbers do not follow from its answers.

Frames: a requested duration becomes ``max(1, floor(duration / frame + 1/2))`` whole frames at the
measured frame period (round half up, as ``Math.round`` in ``frame_clock.js``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from humanlike.server.extensions import db
from humanlike.server.study.settings import DisplaySettings
from humanlike.server.tables.core import Participant, utcnow
from humanlike.server.tables.display import DisplayCalibration

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

CARD_WIDTH_MM = 85.6
"""Width of an ID-1 card (ISO/IEC 7810): bank, membership and identity cards."""
BLIND_SPOT_DEG = 13.5
"""Eccentricity of the blind spot's centre assumed by the virtual chinrest (Li et al. 2020)."""
PX_PER_MM_LIMITS = (1.5, 20.0)
"""Plausible CSS pixels per mm (96 dpi is 3.78): a card answer outside is asked again."""
DISTANCE_MM_LIMITS = (200.0, 1500.0)
"""Plausible viewing distances: a blind-spot answer outside is asked again."""
MAX_ATTEMPTS = 3
"""Card or blind-spot answers refused this many times: the display counts as not calibrated."""
CONSISTENT = 1e-3
"""Relative tolerance between a record's numbers and the ones its answers give."""


# --------------------------------------------------------------------------- geometry and frames


def px_per_degree(px_per_mm: float, distance_mm: float) -> float:
    """Pixels per degree at the screen centre: px_per_mm * 2 d tan(0.5 deg) (Li et al. 2020)."""
    return px_per_mm * 2.0 * distance_mm * math.tan(math.radians(0.5))


def viewing_distance_mm(blind_spot_px: float, px_per_mm: float) -> float:
    """Viewing distance from the blind spot's offset: (s / px_per_mm) / tan(13.5 deg) (Li et al. 2020)."""
    return (blind_spot_px / px_per_mm) / math.tan(math.radians(BLIND_SPOT_DEG))


def frames_for(duration_ms: Any, frame_ms: Any) -> np.ndarray:
    """Whole frames for requested durations: max(1, floor(duration / frame + 1/2)) (round half up)."""
    import numpy as np

    return np.maximum(1, np.floor(np.asarray(duration_ms, float) / np.asarray(frame_ms, float) + 0.5))


def off_whole_frames(duration_ms: float, frame_ms: float) -> float:
    """How far a duration is from a whole number of frames, in frames (0 to 0.5)."""
    x = duration_ms / frame_ms
    return abs(x - math.floor(x + 0.5))


# --------------------------------------------------------------------------- storage


UNSUITABLE_REASONS = ("refresh_rate", "whole_frames", "too_small", "calibration_failed")


class CalibrationIn(BaseModel):
    """The virtual chinrest's answers and what follows from them."""

    model_config = ConfigDict(extra="forbid", strict=True)
    card_width_px: Annotated[float, Field(gt=0, le=20_000)]
    px_per_mm: Annotated[float, Field(gt=0, le=1000)]
    blind_spot_px: list[Annotated[float, Field(gt=0, le=20_000)]] = Field(min_length=1, max_length=50)
    viewing_distance_mm: Annotated[float, Field(gt=0, le=100_000)]
    px_per_deg: Annotated[float, Field(gt=0, le=100_000)]
    card_attempts: Annotated[int, Field(ge=1, le=100)] = 1
    blind_spot_attempts: Annotated[int, Field(ge=1, le=100)] = 1

    @model_validator(mode="after")
    def _follows_from_answers(self) -> CalibrationIn:
        lo, hi = PX_PER_MM_LIMITS
        if not lo <= self.px_per_mm <= hi:
            raise ValueError(f"px_per_mm must lie in [{lo}, {hi}]")
        lo, hi = DISTANCE_MM_LIMITS
        if not lo <= self.viewing_distance_mm <= hi:
            raise ValueError(f"viewing_distance_mm must lie in [{lo}, {hi}]")
        expected = {
            "px_per_mm": self.card_width_px / CARD_WIDTH_MM,
            "viewing_distance_mm": viewing_distance_mm(
                sum(self.blind_spot_px) / len(self.blind_spot_px), self.px_per_mm),
            "px_per_deg": px_per_degree(self.px_per_mm, self.viewing_distance_mm),
        }
        for name, value in expected.items():
            if not math.isclose(getattr(self, name), value, rel_tol=CONSISTENT):
                raise ValueError(f"{name} does not follow from the answers (expected {value:.4g})")
        return self


class DisplayIn(BaseModel):
    """What the browser measured before the first trial (``POST .../display``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    refresh_hz: Annotated[float, Field(gt=0, le=1000)]
    frame_ms: Annotated[float, Field(gt=0, le=1000)]
    n_intervals: Annotated[int, Field(ge=0, le=100_000)]
    calibration: CalibrationIn | None = None
    image_height_px: Annotated[int, Field(gt=0, le=20_000)] | None = None
    image_height_deg: Annotated[float, Field(gt=0, le=180)] | None = None
    window_width: Annotated[int, Field(ge=0, le=100_000)] | None = None
    window_height: Annotated[int, Field(ge=0, le=100_000)] | None = None
    device_pixel_ratio: Annotated[float, Field(gt=0, le=100)] | None = None
    suitable: bool
    reason: str | None = Field(default=None, max_length=64)

    @model_validator(mode="after")
    def _consistent(self) -> DisplayIn:
        if not math.isclose(self.refresh_hz * self.frame_ms, 1000.0, rel_tol=0.01):
            raise ValueError("refresh_hz and frame_ms disagree (refresh_hz * frame_ms must be 1000)")
        if self.reason is not None and self.reason not in UNSUITABLE_REASONS:
            raise ValueError(f"reason must be one of {list(UNSUITABLE_REASONS)}")
        if self.suitable == (self.reason is not None):
            raise ValueError("an unsuitable display needs a reason, a suitable one none")
        if self.image_height_deg is not None and self.calibration is None and self.suitable:
            raise ValueError("a size in degrees needs the calibration")
        return self


def store(participant_id: int, record: DisplayIn) -> DisplayCalibration:
    """Add the record to the session (the caller commits)."""
    cal = record.calibration
    row = DisplayCalibration(
        participant_id=participant_id, created_at=utcnow(), refresh_hz=record.refresh_hz,
        frame_ms=record.frame_ms, n_intervals=record.n_intervals,
        px_per_mm=cal.px_per_mm if cal else None,
        viewing_distance_mm=cal.viewing_distance_mm if cal else None,
        px_per_deg=cal.px_per_deg if cal else None,
        image_height_px=record.image_height_px, image_height_deg=record.image_height_deg,
        window_width=record.window_width, window_height=record.window_height,
        device_pixel_ratio=record.device_pixel_ratio, suitable=record.suitable, reason=record.reason,
        detail=cal.model_dump(include={"card_width_px", "blind_spot_px", "card_attempts",
                                       "blind_spot_attempts"}) if cal else None,
    )
    db.session.add(row)
    return row


CALIBRATION_COLUMNS = {
    "participant": "participant id",
    "refresh_hz": "refresh rate measured before the first trial (median rAF interval), Hz",
    "frame_ms": "one frame at that rate, ms (what durations were rounded to)",
    "px_per_mm": "CSS pixels per mm from the card (85.6 mm wide) resized on screen",
    "viewing_distance_mm": "viewing distance from the blind spot (13.5 deg), mm",
    "px_per_deg": "CSS pixels per degree of visual angle: px_per_mm * 2 d tan(0.5 deg)",
    "image_height_px": "rendered stimulus height, CSS pixels",
    "image_height_deg": "rendered stimulus height, degrees of visual angle (null: not calibrated)",
    "device_pixel_ratio": "device pixels per CSS pixel",
    "suitable": "whether the display met the spec's [display] requirements",
    "unsuitable_reason": "refresh_rate | whole_frames | too_small | calibration_failed",
}


def calibrations(experiment_id: int) -> pd.DataFrame:
    """Per participant (public id) of an experiment: its latest display record (columns as
    ``CALIBRATION_COLUMNS``)."""
    import pandas as pd

    latest = (sa.select(sa.func.max(DisplayCalibration.id))
              .join(Participant, DisplayCalibration.participant_id == Participant.id)
              .where(Participant.experiment_id == experiment_id)
              .group_by(DisplayCalibration.participant_id))
    rows = db.session.execute(
        sa.select(Participant.public_id, DisplayCalibration)
        .join(Participant, DisplayCalibration.participant_id == Participant.id)
        .where(DisplayCalibration.id.in_(latest)).order_by(Participant.id)).all()
    names = list(CALIBRATION_COLUMNS)
    return pd.DataFrame([
        [pid, r.refresh_hz, r.frame_ms, r.px_per_mm, r.viewing_distance_mm, r.px_per_deg,
         r.image_height_px, r.image_height_deg, r.device_pixel_ratio, r.suitable, r.reason]
        for pid, r in rows], columns=names)


# --------------------------------------------------------------------------- the certificate

TIMING_COLUMNS = {
    "participant": "participant id",
    "trial_index": "trial index",
    "trial_type": "trial type",
    "block": "block name",
    "frame_ms": "the participant's measured frame period, ms",
    "requested_ms": "duration the spec asked for, ms",
    "requested_frames": "max(1, floor(requested_ms / frame_ms + 1/2)): whole frames asked of the display",
    "rounding_ms": "requested_frames * frame_ms - requested_ms: the change whole frames make",
    "frames": "frames the stimulus was on screen (rAF timestamps)",
    "frame_error": "frames - requested_frames (positive: shown longer)",
    "presented_ms": "measured on-screen duration, ms (rAF timestamps)",
    "duration_error_ms": "presented_ms - requested_ms (Bridges et al. 2020's duration error)",
}


def requested_ms(designs: list[Any], condition_presentation: list[Mapping[str, Any]]) -> np.ndarray:
    """Per trial: the requested stimulus duration in ms (NaN when shown until the response): the
    design's own ``duration_ms`` (types timed per block) else the condition's presentation's in
    ``"duration"`` mode."""
    import numpy as np

    out = np.full(len(designs), np.nan)
    for i, (design, pres) in enumerate(zip(designs, condition_presentation, strict=True)):
        own = design.get("duration_ms") if isinstance(design, dict) else None
        if own is not None:
            out[i] = float(own)
        elif pres.get("mode") == "duration" and pres.get("duration_ms") is not None:
            out[i] = float(pres["duration_ms"])
    return out


def presentations(spec: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Condition name -> its presentation settings (the override, else the experiment's)."""
    default = spec.get("presentation") or {}
    return {c["name"]: c.get("presentation") or default for c in spec.get("conditions", [])}


def trial_timing(trials: pd.DataFrame, spec: Mapping[str, Any],
                 frame_ms: Mapping[str, float]) -> pd.DataFrame:
    """One row per timed, non-practice trial (``TIMING_COLUMNS``) from export trial rows (with
    ``condition`` and ``design``) and each participant's frame period."""
    import numpy as np
    import pandas as pd

    from humanlike.server.trial_types.responses import json_values

    names = list(TIMING_COLUMNS)
    if trials.empty:
        return pd.DataFrame(columns=names)
    from humanlike.server.trial_types.registry import internal_types

    rows = trials[~trials["practice"].astype(bool) & ~trials["trial_type"].isin(internal_types())]
    pres = presentations(spec)
    wanted = requested_ms(json_values(rows["design"]),
                          [pres.get(str(c), spec.get("presentation") or {}) for c in rows["condition"]])
    period = rows["participant"].astype(str).map(dict(frame_ms)).to_numpy(float)
    timed = np.isfinite(wanted) & np.isfinite(period)
    rows, wanted, period = rows[timed], wanted[timed], period[timed]
    req_frames = frames_for(wanted, period) if len(rows) else np.zeros(0)
    frames = pd.to_numeric(rows["frames"], errors="coerce").to_numpy(float)
    presented = pd.to_numeric(rows["presented_ms"], errors="coerce").to_numpy(float)
    out = pd.DataFrame({
        "participant": rows["participant"].astype(str).to_numpy(),
        "trial_index": rows["trial_index"].to_numpy(),
        "trial_type": rows["trial_type"].to_numpy(),
        "block": rows["block"].to_numpy(),
        "frame_ms": period, "requested_ms": wanted,
        "requested_frames": req_frames.astype(int),
        "rounding_ms": np.round(req_frames * period - wanted, 3),
        "frames": frames, "frame_error": frames - req_frames,
        "presented_ms": presented, "duration_error_ms": np.round(presented - wanted, 3),
    })
    return out[names]


CERTIFICATE_COLUMNS = {
    "participant": "participant id",
    "trial_type": "trial type",
    "n_timed": "timed, non-practice trials",
    "requested_ms": "mean requested duration, ms",
    "requested_frames": "mean requested whole frames",
    "frames_shown": "mean frames shown",
    "n_off": "trials shown for other than the requested frames",
    "max_frame_miss": "largest |frames - requested_frames|",
    "duration_error_mean_ms": "mean of presented_ms - requested_ms (Bridges et al. 2020)",
    "duration_error_sd_ms": "its standard deviation (n - 1), ms",
}


def certificate(timing: pd.DataFrame) -> pd.DataFrame:
    """Per participant and trial type: frames requested vs shown, trials off, the largest miss and
    the duration error's mean and SD (``CERTIFICATE_COLUMNS``), from ``trial_timing`` rows."""
    import pandas as pd

    names = list(CERTIFICATE_COLUMNS)
    if timing.empty:
        return pd.DataFrame(columns=names)
    t = timing.assign(off=(timing["frame_error"] != 0).astype(int),
                      miss=timing["frame_error"].abs())
    g = t.groupby(["participant", "trial_type"], sort=True)
    out = pd.DataFrame({
        "n_timed": g.size(), "requested_ms": g["requested_ms"].mean(),
        "requested_frames": g["requested_frames"].mean(), "frames_shown": g["frames"].mean(),
        "n_off": g["off"].sum(), "max_frame_miss": g["miss"].max(),
        "duration_error_mean_ms": g["duration_error_ms"].mean(),
        "duration_error_sd_ms": g["duration_error_ms"].std(ddof=1),
    }).reset_index()
    return out[names]


def timing_exclusions(timing: pd.DataFrame, max_frame_miss: int | None) -> pd.Series:
    """Participant -> True where a timed trial missed its frames by more than ``max_frame_miss``
    (the spec's ``[display] max_frame_miss``; None: nobody)."""
    import pandas as pd

    if max_frame_miss is None or timing.empty:
        return pd.Series(dtype=bool)
    worst = timing["frame_error"].abs().groupby(timing["participant"]).max()
    return worst > max_frame_miss


def participant_certificate(participant: Participant, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The certificate of one participant for its page: the latest display record and one row per
    trial type (``certificate``), with the spec's QC verdict."""
    from humanlike.server.participants import trial_store

    record = db.session.execute(
        sa.select(DisplayCalibration).where(DisplayCalibration.participant_id == participant.id)
        .order_by(DisplayCalibration.id.desc()).limit(1)).scalar_one_or_none()
    frame_ms = record.frame_ms if record else (1000.0 / participant.refresh_hz
                                               if participant.refresh_hz else None)
    fields = ("participant", "trial_index", "trial_type", "block", "condition", "practice",
              "presented_ms", "frames", "design")
    rows: list[dict[str, Any]] = []
    if frame_ms:
        [trials] = trial_store.trial_chunks(fields, participant_ids=[participant.id], chunk_rows=None)
        timing = trial_timing(trials, spec, {participant.public_id: frame_ms})
        rows = [{str(k): v for k, v in r.items()} for r in certificate(timing).to_dict("records")]
    limit = DisplaySettings.model_validate(spec.get("display") or {}).max_frame_miss
    worst = max((int(r["max_frame_miss"]) for r in rows), default=0)
    return {"record": record, "frame_ms": frame_ms, "by_type": rows, "max_frame_miss": limit,
            "excluded": limit is not None and worst > limit}


# --------------------------------------------------------------------------- the export


def frame_periods(calibration: pd.DataFrame, participants: pd.DataFrame) -> dict[str, float]:
    """Participant -> frame period (ms): the display record's, else 1000 / the environment event's
    refresh rate (participants measured before the display record existed)."""
    import pandas as pd

    out: dict[str, float] = {}
    if not participants.empty and "refresh_hz" in participants.columns:
        hz = pd.to_numeric(participants["refresh_hz"], errors="coerce")
        out.update({str(p): 1000.0 / h for p, h in zip(participants["participant"], hz, strict=True)
                    if h == h and h > 0})
    if not calibration.empty:
        out.update({str(p): float(f) for p, f in zip(calibration["participant"],
                                                      calibration["frame_ms"], strict=True)})
    return out


def exclude_by_timing(frame: pd.DataFrame, timing: list[pd.DataFrame],
                      spec: Mapping[str, Any]) -> pd.DataFrame:
    """The participants table with the spec's ``[display] max_frame_miss`` rule applied: a
    participant with a timed trial off by more than that many frames is excluded, with the reason."""
    import pandas as pd

    limit = DisplaySettings.model_validate(spec.get("display") or {}).max_frame_miss
    rows = [t for t in timing if not t.empty]
    if frame.empty or limit is None or not rows:
        return frame
    failed = timing_exclusions(pd.concat(rows, ignore_index=True), limit)
    hit = frame["participant"].astype(str).map(failed).fillna(False).astype(bool).to_numpy()
    if not hit.any():
        return frame
    frame = frame.copy()
    reason = f"frames missed by more than {limit}"
    old = frame.loc[hit, "exclusion_reasons"].fillna("").astype(str)
    frame.loc[hit, "exclusion_reasons"] = [f"{o};{reason}" if o else reason for o in old]
    frame.loc[hit, "excluded"] = True
    return frame


def stored_calibration(participant_id: int) -> dict[str, Any] | None:
    """The participant's latest calibration (the answers and what follows from them), for the
    browser to reuse after a reload or a resume instead of asking again; None if never calibrated."""
    row = db.session.execute(
        sa.select(DisplayCalibration).where(DisplayCalibration.participant_id == participant_id,
                                            DisplayCalibration.px_per_deg.is_not(None))
        .order_by(DisplayCalibration.id.desc()).limit(1)).scalar_one_or_none()
    if row is None:
        return None
    detail = row.detail or {}
    return {"card_width_px": detail.get("card_width_px"), "px_per_mm": row.px_per_mm,
            "blind_spot_px": detail.get("blind_spot_px"),
            "viewing_distance_mm": row.viewing_distance_mm, "px_per_deg": row.px_per_deg,
            "card_attempts": detail.get("card_attempts", 1),
            "blind_spot_attempts": detail.get("blind_spot_attempts", 1)}
