"""psiTurk participants' progress from their stored records: records stored per participant (the
assignment's ``trials_seen``, which counts the records stored at positions below it), the psiTurk
mode, and a live panel of the study's own numbers (participants, completion, records and time taken
per mode). psiTurk tasks have no timeline, so there is no planned trial count to compare with."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.lifecycle import ParticipantStatus
from humanlike.server.psiturk import participants as pp
from humanlike.server.tables.core import Experiment, Participant
from humanlike.server.tables.psiturk import PsiturkAssignment
from humanlike.server.trial_types.registry import PSITURK_KIND


def is_psiturk(exp: Experiment) -> bool:
    """True for the experiment row of a psiTurk project (served or imported)."""
    return (exp.spec or {}).get("kind") == PSITURK_KIND


def record_counts(participant_ids: list[int]) -> dict[int, int]:
    """psiTurk trial records stored per participant (database id), for the listed ones that are
    psiTurk participants (one indexed query)."""
    if not participant_ids:
        return {}
    a = PsiturkAssignment
    return {int(pid): int(n or 0) for pid, n in db.session.execute(
        sa.select(a.participant_id, a.trials_seen).where(a.participant_id.in_(participant_ids)))}


def psiturk_columns(exp: Experiment, frame: pd.DataFrame) -> pd.DataFrame:
    """``participants`` rows (``export.participant_table``) of a psiTurk experiment with
    ``n_trials`` the records stored and ``psiturk_mode`` (debug, sandbox or live) added; any other
    experiment's frame unchanged."""
    if not is_psiturk(exp) or frame.empty:
        return frame
    a = PsiturkAssignment
    rows = pd.DataFrame(db.session.execute(
        sa.select(a.participant_id, a.trials_seen, a.mode).where(a.experiment_id == exp.id)).all(),
        columns=["id", "records", "mode"])
    merged = frame[["id"]].merge(rows, on="id", how="left")
    out = frame.copy()
    out["n_trials"] = merged["records"].fillna(0).astype(int).to_numpy()
    out["psiturk_mode"] = merged["mode"].to_numpy()
    return out


PANEL_STATUSES = {ParticipantStatus.COMPLETED: (pp.COMPLETED, pp.SUBMITTED, pp.CREDITED, pp.BONUSED),
                  ParticipantStatus.QUIT_EARLY: (pp.QUITEARLY,),
                  "in_progress": (pp.ALLOCATED, pp.STARTED)}
"""The panel's status groups, by psiTurk status code."""


def psiturk_panel(exp: Experiment) -> dict[str, Any]:
    """The live panel of a psiTurk study: per mode, participants, how many completed (psiTurk
    statuses 3, 4, 5, 7), quit early or are in progress, and the median and range of records stored
    and of minutes taken (arrival to end of HIT, completed participants)."""
    a = PsiturkAssignment
    frame = pd.DataFrame(db.session.execute(
        sa.select(a.mode, a.status, a.trials_seen, Participant.created_at, a.endhit)
        .join(Participant, Participant.id == a.participant_id)
        .where(a.experiment_id == exp.id)).all(),
        columns=["mode", "status", "records", "arrived", "ended"])
    modes: list[dict[str, Any]] = []
    n_completed = 0
    for mode, group in frame.groupby(frame["mode"].fillna("unknown"), sort=True):
        status = group["status"].to_numpy(dtype=int)
        done = np.isin(status, PANEL_STATUSES[ParticipantStatus.COMPLETED])
        records = group["records"].fillna(0).to_numpy(dtype=float)
        ended = pd.to_datetime(group["ended"], utc=True)
        arrived = pd.to_datetime(group["arrived"], utc=True)
        minutes = ((ended - arrived).dt.total_seconds() / 60).to_numpy(dtype=float)[done]
        minutes = minutes[np.isfinite(minutes)]
        n_completed += int(done.sum())
        modes.append({
            "mode": str(mode), "n": len(group),
            **{str(name): int(np.isin(status, codes).sum()) for name, codes in PANEL_STATUSES.items()},
            "records_median": float(np.median(records)) if len(records) else None,
            "records_min": int(records.min()) if len(records) else None,
            "records_max": int(records.max()) if len(records) else None,
            "minutes_median": float(np.median(minutes)) if len(minutes) else None,
            "minutes_max": float(minutes.max()) if len(minutes) else None})
    return {"kind": "psiturk", "n_participants": len(frame),
            "n_completed": n_completed, "modes": modes}
