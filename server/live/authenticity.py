"""The authenticity screen's stored verdicts (``participant_authenticity``): recomputed for every
participant by the live panel's background pass (and by the breaker under ``max_flagged_share``),
read by the dashboard's participants table and page. The screen itself:
``server/export/authenticity.py`` over ``humanlike.analysis.authenticity``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.server.export.authenticity import screen_of, stored_rows
from humanlike.server.extensions import db
from humanlike.server.participants import trial_store
from humanlike.server.tables.authenticity import ParticipantAuthenticity
from humanlike.server.tables.core import Experiment, Participant, utcnow


def _plain(value: Any) -> Any:
    """A JSON-storable scalar (NaN and infinities as None)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
        return number if np.isfinite(number) else None
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


TEXT_COLUMNS = ("stimulus", "response", "category", "condition", "task")
"""Screen-row columns kept as codes into one word list per experiment (a few hundred distinct
words over millions of rows: 4 bytes a cell instead of a string object each)."""


@dataclass
class _Rows:
    """A process's screen rows of one experiment, compactly: per participant (public id) its
    columns (text as codes into ``words``) and the stored trial count they were read at (trials
    are only ever added, so an unchanged count means unchanged rows)."""

    key: str
    words: list[str] = field(default_factory=list)
    code_of: dict[str, int] = field(default_factory=dict)
    rows: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    stamps: dict[str, int] = field(default_factory=dict)

    def encode(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """``frame``'s columns as arrays, its text as codes (-1: missing)."""
        out = {"trial_index": frame["trial_index"].to_numpy(dtype=np.int64),
               "rt_ms": pd.to_numeric(frame["rt_ms"], errors="coerce").to_numpy(dtype=float),
               "correct": frame["correct"].to_numpy(dtype=bool)}
        for column in TEXT_COLUMNS:
            local, uniques = pd.factorize(frame[column].astype(object))  # -1 for missing
            for word in uniques.astype(str):  # new words only: a handful per pass
                self.code_of.setdefault(word, len(self.words))
                if len(self.words) < len(self.code_of):
                    self.words.append(word)
            codes = np.array([self.code_of[w] for w in uniques.astype(str)] + [-1], dtype=np.int32)
            out[column] = codes[local]
        return out

    def frame(self, people: list[str]) -> pd.DataFrame:
        """The screen rows of ``people`` (in that order) as one frame."""
        parts = [self.rows[p] for p in people]
        words = np.array([*self.words, np.nan], dtype=object)  # code -1 reads the NaN at the end
        columns: dict[str, Any] = {"participant": np.repeat(
            np.array(people, dtype=object), [len(p["trial_index"]) for p in parts])}
        for column in ("trial_index", "rt_ms", "correct", *TEXT_COLUMNS):
            values = np.concatenate([p[column] for p in parts]) if parts else np.array([])
            columns[column] = words[values] if column in TEXT_COLUMNS and parts else values
        return pd.DataFrame(columns)


_ROWS: dict[tuple[str, int], _Rows] = {}


def current_rows(exp: Experiment) -> pd.DataFrame:
    """Every participant's screen rows, reading only those whose stored trial count changed since
    this process's last pass (``panel_ratings`` keeps its cells the same way)."""
    counts = trial_store.experiment_stored_counts(exp.id)
    public = dict(db.session.execute(sa.select(Participant.id, Participant.public_id).where(
        Participant.experiment_id == exp.id)).all())
    where = (str(db.engine.url), exp.id)
    cache = _ROWS.get(where)
    if cache is None or cache.key != exp.spec_hash:
        cache = _ROWS[where] = _Rows(exp.spec_hash)
    changed = [pid for pid, n in counts.items() if cache.stamps.get(public.get(pid, "")) != n]
    for gone in set(cache.rows) - set(public.values()):  # withdrawn: their data is deleted
        cache.rows.pop(gone, None)
        cache.stamps.pop(gone, None)
    if changed:
        try:
            fresh = stored_rows(exp, changed)
            grouped = dict(tuple(fresh.groupby("participant", sort=False))) if len(fresh) else {}
            for pid in changed:
                person = public.get(pid)
                if person is not None:
                    cache.rows[person] = cache.encode(grouped.get(person, fresh.iloc[0:0]))
                    cache.stamps[person] = counts[pid]
        except BaseException:
            del _ROWS[where]  # half read: start afresh next time
            raise
    return cache.frame([p for p in public.values() if p in cache.rows])


def refresh_authenticity(exp: Experiment) -> int:
    """Recompute and store every participant's verdict (the screen compares participants with
    each other, so all of them at once; only changed participants' trials are read); how many
    stored."""
    screened = screen_of(exp, current_rows(exp))
    ids = dict(db.session.execute(sa.select(Participant.public_id, Participant.id).where(
        Participant.experiment_id == exp.id)).all())
    db.session.execute(sa.delete(ParticipantAuthenticity).where(
        ParticipantAuthenticity.experiment_id == exp.id))
    now = utcnow()
    rows = []
    for participant, row in screened.iterrows():  # one row per participant
        if participant not in ids:
            continue
        signals = {k: _plain(v) for k, v in row.items()
                   if k not in ("authenticity", "authenticity_reasons")}
        rows.append(ParticipantAuthenticity(
            participant_id=ids[participant], experiment_id=exp.id, verdict=row["authenticity"],
            reasons=row["authenticity_reasons"], signals=signals, computed_at=now))
    db.session.add_all(rows)
    db.session.commit()
    return len(rows)


def stored_verdicts(exp: Experiment, ids: list[int] | None = None) -> dict[int, ParticipantAuthenticity]:
    """The stored verdicts by participant database id (of ``ids`` where given)."""
    stmt = sa.select(ParticipantAuthenticity).where(ParticipantAuthenticity.experiment_id == exp.id)
    if ids is not None:
        stmt = stmt.where(ParticipantAuthenticity.participant_id.in_(ids))
    return {a.participant_id: a for a in db.session.execute(stmt).scalars()}


def authenticity_reasons(stored: ParticipantAuthenticity | None) -> list[str]:
    """A stored verdict's reasons, one per signal (the participant page lists them)."""
    return [r for r in (stored.reasons if stored is not None else "").split("; ") if r]
