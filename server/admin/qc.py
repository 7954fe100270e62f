"""Per-participant QC stored for the dashboard (``participant_qc``): the export's QC (one
implementation, ``humanlike.server.export.rating_qc`` over the analysis package) recomputed only for
participants whose stored trial count changed since the last pass, so sorting and filtering by QC
columns is an indexed join at any study size rather than a computation per page view.

The live panel's background pass (``humanlike.server.admin.panel.refresh``) calls ``refresh_qc``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.server.admin.stats import as_utc
from humanlike.server.export import (
    _trial_select,
    event_counts,
    participant_table,
    rating_qc,
    stimulus_frame,
    trial_rows_frame,
    trial_tables,
)
from humanlike.server.extensions import db
from humanlike.server.models import Experiment, Participant, ParticipantQC, Trial, utcnow

DEFAULT_TOO_FAST_MS = 100.0
"""Trials faster than this count as too fast when the spec sets no ``exclusion.min_trial_rt_ms``."""
BATCH = 40
"""Participants whose QC is computed together (about 33,000 trials of an 820-trial study)."""


def _rules(exp: Experiment) -> ExclusionRules:
    return ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))


def too_fast_ms(exp: Experiment) -> float:
    """The experiment's too-fast threshold (ms)."""
    value = _rules(exp).min_trial_rt_ms
    return float(value) if value is not None else DEFAULT_TOO_FAST_MS


def _frames(exp: Experiment, ids: list[int],
            stimuli: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The stored trials of the participants ``ids`` and their export tables."""
    result = db.session.execute(_trial_select(exp).where(Trial.participant_id.in_(ids)))
    trials = trial_rows_frame(list(result), list(result.keys()), exp.slug)
    labels = [c["label"] for c in exp.spec.get("categories", [])]
    return trials, trial_tables(trials, labels, stimuli)


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def _compute(exp: Experiment, ids: list[int], people: pd.DataFrame,
             stimuli: pd.DataFrame) -> list[dict[str, Any]]:
    """QC rows for the participants ``ids`` (database ids)."""
    trials, tables = _frames(exp, ids, stimuli)
    public = dict(db.session.execute(
        sa.select(Participant.public_id, Participant.id).where(Participant.id.in_(ids))).all())
    ratings = tables.get("ratings")
    qc = pd.DataFrame()
    if ratings is not None and not ratings.empty and not people.empty:
        qc = rating_qc(ratings, stimuli, people, _rules(exp)).set_index("participant")
    threshold = too_fast_ms(exp)
    scored = trials[~trials["practice"]] if not trials.empty else trials
    rt = scored.groupby("participant")["rt_ms"] if not scored.empty else None
    stored = trials.groupby("participant").size() if not trials.empty else pd.Series(dtype=int)
    last = (trials.groupby("participant")["server_time"].max() if not trials.empty
            else pd.Series(dtype=object))
    rows = []
    for pub, pid in public.items():
        row: dict[str, Any] = {"participant_id": pid, "experiment_id": exp.id,
                               "n_stored": int(stored.get(pub, 0)), "catch_accuracy": None,
                               "repeat_reliability": None, "median_rt_ms": None,
                               "too_fast_share": None, "qc_failed": False, "qc_reasons": "",
                               "metrics": None,
                               "last_trial_at": (pd.Timestamp(last[pub]).to_pydatetime()
                                                 if pub in last.index else None)}
        if rt is not None and pub in rt.groups:
            times = scored.loc[rt.groups[pub], "rt_ms"].dropna()
            if len(times):
                row["too_fast_share"] = float((times < threshold).mean())
                row["median_rt_ms"] = float(times.median())
        if pub in qc.index:
            q = qc.loc[pub]
            row["catch_accuracy"] = _finite(q.get("catch_accuracy"))
            row["repeat_reliability"] = _finite(q.get("repeat_reliability"))
            row["median_rt_ms"] = _finite(q.get("median_rt_ms")) or row["median_rt_ms"]
            row["qc_failed"] = bool(q.get("excluded"))
            row["qc_reasons"] = str(q.get("exclusion_reasons") or "")
            row["metrics"] = {str(k): _finite(v) for k, v in q.items()
                              if k not in ("excluded", "exclusion_reasons")}
        if row["too_fast_share"] is not None:
            row["metrics"] = {**(row.get("metrics") or {}), "too_fast_share": row["too_fast_share"]}
        rows.append(row)
    return rows


def stale_participants(exp: Experiment) -> list[int]:
    """Participants whose stored trial count differs from their QC row's (or who have none)."""
    counts = (sa.select(Trial.participant_id.label("pid"), sa.func.count().label("n"))
              .join(Participant, Trial.participant_id == Participant.id)
              .where(Participant.experiment_id == exp.id)
              .group_by(Trial.participant_id).subquery())
    stmt = (sa.select(Participant.id)
            .outerjoin(counts, counts.c.pid == Participant.id)
            .outerjoin(ParticipantQC, ParticipantQC.participant_id == Participant.id)
            .where(Participant.experiment_id == exp.id,
                   sa.or_(ParticipantQC.participant_id.is_(None),
                          ParticipantQC.n_stored != sa.func.coalesce(counts.c.n, 0))))
    return list(db.session.execute(stmt).scalars())


def refresh_qc(exp: Experiment) -> int:
    """Recompute the stored QC of the experiment's changed participants and every participant's
    event counts; commit and return how many participants' QC was recomputed."""
    stale = stale_participants(exp)
    if stale:
        people = participant_table(exp, stale)
        stimuli = stimulus_frame(exp)
        for start in range(0, len(stale), BATCH):
            ids = stale[start:start + BATCH]
            rows = _compute(exp, ids, people, stimuli)
            db.session.execute(sa.delete(ParticipantQC).where(ParticipantQC.participant_id.in_(ids)))
            now = utcnow()
            db.session.add_all(ParticipantQC(**row, n_blur=0, n_fullscreen_exit=0, computed_at=now)
                               for row in rows)
            # commit each batch: SQLite's write lock must not be held while the next batch is
            # computed, or participants' trial inserts wait past the busy timeout
            db.session.commit()
    events = event_counts(exp)
    if not events.empty:
        for pid, blur, exits in zip(events.index, events["n_blur"], events["n_fullscreen_exit"]):
            db.session.execute(sa.update(ParticipantQC).where(
                ParticipantQC.participant_id == int(pid),
                sa.or_(ParticipantQC.n_blur != int(blur),
                       ParticipantQC.n_fullscreen_exit != int(exits)))
                .values(n_blur=int(blur), n_fullscreen_exit=int(exits)))
    db.session.commit()
    return len(stale)


__all__ = ["as_utc", "refresh_qc", "stale_participants"]
