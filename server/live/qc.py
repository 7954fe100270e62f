"""Per-participant QC stored for the dashboard (``participant_qc``): the export's QC (one
implementation, ``humanlike.server.export.writer.rating_qc`` over the analysis package) recomputed only for
participants whose stored trial count changed since the last pass, so sorting and filtering by QC
columns is an indexed join at any study size rather than a computation per page view. A batch's
trials come from the one trial reader (``trial_store.trial_chunks``: plain driver rows, no ORM
objects), their responses parsed by Arrow, and only the ratings table the QC reads is built (the
export's long form, ``responses.rating_rows``), not every export table.

The live panel's background pass (``humanlike.server.live.panel.refresh``) calls ``refresh_qc``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from humanlike.analysis.exclusions import ExclusionRules, as_rules
from humanlike.analysis.ratings.data import RULE_CHECKS
from humanlike.server.database import as_utc
from humanlike.server.export.writer import (
    QC_COLUMNS,
    QC_EXPORT_NAMES,
    event_counts,
    participant_table,
    rating_qc,
    stimulus_frame,
)
from humanlike.server.extensions import db
from humanlike.server.participants import trial_store
from humanlike.server.tables.core import Experiment, Participant, ParticipantQC, Trial, utcnow
from humanlike.server.trial_types import responses
from humanlike.server.trial_types.registry import TRIAL_TYPES, rated_types

DEFAULT_TOO_FAST_MS = 100.0
"""Trials faster than this count as too fast when the spec sets no ``exclusion.min_trial_rt_ms``."""
BATCH = 100
"""Participants whose QC is computed together (about 82,000 trials of an 820-trial study)."""


def _rules(exp: Experiment) -> ExclusionRules:
    return ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))


def too_fast_ms(exp: Experiment) -> float:
    """The experiment's too-fast threshold (ms)."""
    value = _rules(exp).min_trial_rt_ms
    return float(value) if value is not None else DEFAULT_TOO_FAST_MS


TRIAL_FIELDS = ("participant", "trial_index", "trial_type", "stimulus", "stimulus_kind",
                "is_repeat", "repeat_of", "rt_ms", "server_time", "practice", "response")
"""What the QC reads of each trial (``trial_store.FIELDS``)."""


def _trials(exp: Experiment, ids: list[int]) -> pd.DataFrame:
    """The stored trials of the participants ``ids``: what the QC reads, one row per trial, in one
    frame (a batch is small) from the one trial reader."""
    return next(trial_store.trial_chunks(TRIAL_FIELDS, experiment_id=exp.id, participant_ids=ids,
                                         chunk_rows=None))


def rating_rows(trials: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """The rated trials in the export's long form (``responses.rating_rows``), the QC's
    columns only."""
    columns = [c for c in QC_COLUMNS if c not in responses.RATING_LONG_COLUMNS]
    rated = trials[trials["trial_type"].isin(rated_types())]
    return responses.rating_rows(rated, columns, labels)


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def timing(trials: pd.DataFrame, threshold: float) -> tuple[dict[Any, float], dict[Any, float]]:
    """Median RT and share of RTs below ``threshold`` per participant, over the non-practice
    trials with an RT (a row mask, whatever the ``practice`` column's dtype: an empty batch's is
    object-typed and would select columns)."""
    scoring = ~trials["practice"].fillna(False).astype(bool).to_numpy()
    rt = pd.to_numeric(trials["rt_ms"], errors="coerce").to_numpy(dtype=float)
    keep = scoring & np.isfinite(rt)
    people, rts = trials["participant"].to_numpy()[keep], rt[keep]
    if not len(rts):
        return {}, {}
    frame = pd.DataFrame({"participant": people, "rt": rts, "fast": rts < threshold})
    grouped = frame.groupby("participant")
    return grouped["rt"].median().to_dict(), grouped["fast"].mean().to_dict()


def type_metrics(trials: pd.DataFrame) -> dict[Any, dict[str, float | None]]:
    """Per participant: the metrics each trial type's ``participant_qc`` computes from its own
    trials (position bias and repeat consistency of odd-one-out triplets, ...)."""
    found: dict[Any, dict[str, float | None]] = {}
    for t in TRIAL_TYPES.values():
        if t.participant_qc is None:
            continue
        own = trials[trials["trial_type"].to_numpy() == t.name]
        if own.empty:
            continue
        for person, values in t.participant_qc(own).to_dict("index").items():
            found.setdefault(person, {}).update({str(k): _finite(v) for k, v in values.items()})
    return found


def _compute(exp: Experiment, ids: list[int], people: pd.DataFrame,
             stimuli: pd.DataFrame) -> list[dict[str, Any]]:
    """QC rows for the participants ``ids`` (database ids)."""
    trials = _trials(exp, ids)
    public = dict(db.session.execute(
        sa.select(Participant.public_id, Participant.id).where(Participant.id.in_(ids))).all())
    ratings = rating_rows(trials, [str(c["label"]) for c in exp.spec.get("categories", [])])
    qc = pd.DataFrame()
    if not ratings.empty and not people.empty:
        qc = rating_qc(ratings, stimuli, people, _rules(exp)).set_index("participant")
    median_rt, too_fast = timing(trials, too_fast_ms(exp))
    per_type = type_metrics(trials)
    stored = trials.groupby("participant").size().to_dict()
    last = trials.groupby("participant")["server_time"].max().to_dict()
    qc_rows = qc.to_dict("index")
    rows = []
    for pub, pid in public.items():
        row: dict[str, Any] = {"participant_id": pid, "experiment_id": exp.id,
                               "n_stored": int(stored.get(pub, 0)), "catch_accuracy": None,
                               "repeat_reliability": None, "median_rt_ms": None,
                               "too_fast_share": None, "qc_failed": False, "qc_reasons": "",
                               "metrics": None,
                               "last_trial_at": (pd.Timestamp(last[pub]).to_pydatetime()
                                                 if pub in last else None)}
        if pub in too_fast:
            row["too_fast_share"] = float(too_fast[pub])
            row["median_rt_ms"] = float(median_rt[pub])
        if pub in qc_rows:
            q = qc_rows[pub]
            row["catch_accuracy"] = _finite(q.get("catch_accuracy"))
            row["repeat_reliability"] = _finite(q.get("repeat_reliability"))
            row["median_rt_ms"] = _finite(q.get("median_rt_ms")) or row["median_rt_ms"]
            row["qc_failed"] = bool(q.get("excluded"))
            row["qc_reasons"] = str(q.get("exclusion_reasons") or "")
            row["metrics"] = {str(k): _finite(v) for k, v in q.items()
                              if k not in ("excluded", "exclusion_reasons")}
        if row["too_fast_share"] is not None:
            row["metrics"] = {**(row.get("metrics") or {}), "too_fast_share": row["too_fast_share"]}
        if pub in per_type:
            row["metrics"] = {**(row.get("metrics") or {}), **per_type[pub]}
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


def _store(ids: list[int], rows: list[dict[str, Any]]) -> None:
    """Replace the batch's QC rows, skipping participants deleted meanwhile (a withdrawal during
    the pass: their rows are gone, and an insert for them would break the foreign key)."""
    for _attempt in range(3):
        present = set(db.session.execute(sa.select(Participant.id).where(
            Participant.id.in_(ids))).scalars())
        db.session.execute(sa.delete(ParticipantQC).where(ParticipantQC.participant_id.in_(ids)))
        now = utcnow()
        db.session.add_all(ParticipantQC(**row, n_blur=0, n_fullscreen_exit=0, computed_at=now)
                           for row in rows if row["participant_id"] in present)
        try:
            # commit each batch: SQLite's write lock must not be held while the next batch is
            # computed, or participants' trial inserts wait past the busy timeout
            db.session.commit()
            return
        except IntegrityError:  # deleted between the check and the insert: check again
            db.session.rollback()
    raise RuntimeError("participants kept being deleted while their QC was stored")


def refresh_qc(exp: Experiment, everyone: bool = False) -> int:
    """Recompute the changed (or ``everyone``'s) stored QC and event counts; how many recomputed."""
    stale = (list(db.session.execute(sa.select(Participant.id).where(
        Participant.experiment_id == exp.id).order_by(Participant.id)).scalars())
             if everyone else stale_participants(exp))
    if stale:
        people = participant_table(exp, stale)
        stimuli = stimulus_frame(exp)
        for start in range(0, len(stale), BATCH):
            ids = stale[start:start + BATCH]
            _store(ids, _compute(exp, ids, people, stimuli))
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


METRIC_WORDS: dict[str, tuple[str, str]] = {
    "natural_accuracy": ("natural-image accuracy", ""),
    "catch_accuracy": ("catch-trial accuracy", ""),
    "repeat_r": ("repeat reliability r", ""),
    "all_zero_share": ("share of natural images left at zero", ""),
    "identical_run_share": ("longest identical-response run (share of trials)", ""),
    "median_rt_ms": ("median RT", " ms"),
    "completion_s": ("completion time", " s"),
}
"""A QC column in words and its unit (``RULE_CHECKS`` names the column of each rule)."""


def _pair(value: float, threshold: float, unit: str) -> tuple[str, str]:
    """``value`` and ``threshold`` as text: two decimals for shares and r, whole numbers for
    times, with more digits where rounding would print a value that differs as its threshold."""
    digits = 0 if unit else 2
    while True:
        a, b = f"{value:.{digits}f}", f"{threshold:.{digits}f}"
        if a != b or value == threshold or digits >= 6:
            return a + unit, b + unit
        digits += 1


def qc_in_words(rules: ExclusionRules | dict[str, Any] | None,
                metrics: dict[str, Any] | None) -> list[dict[str, str]]:
    """Each active rule of the spec's ``[exclusion]`` block against the participant's QC metric
    (``ParticipantQC.metrics``, the export's QC column names), in words: "natural-image accuracy 0.42, below the 0.50 the spec
    requires: excluded". Rows: ``rule``, ``verdict`` (excluded / passes / not measured /
    trial cleaning) and ``text``; the verdict uses the QC's own comparison (``RULE_CHECKS``)."""
    metrics = metrics or {}
    rows = []
    for rule, threshold in as_rules(rules).active().items():
        if rule == "min_trial_rt_ms":
            share = _finite(metrics.get("too_fast_share"))
            limit = f"{threshold:g} ms"
            text = (f"trials faster than {limit} count as missing: "
                    + (f"{share:.0%} of this participant's trials" if share is not None
                       else "no timed trials yet"))
            rows.append({"rule": rule, "verdict": "trial cleaning", "text": text})
            continue
        column, op = RULE_CHECKS[rule]
        name, unit = METRIC_WORDS[column]
        value = _finite(metrics.get(QC_EXPORT_NAMES.get(column, column)))  # the stored name
        verb = "requires" if op == "<" else "allows"
        if value is None:
            shown = f"{threshold:g}{unit}"
            rows.append({"rule": rule, "verdict": "not measured",
                         "text": f"{name} not measured (too few trials for it yet); the spec {verb} "
                                 f"{'at least' if op == '<' else 'at most'} {shown}: "
                                 "this rule does not apply"})
            continue
        failed = value < threshold if op == "<" else value > threshold
        shown, limit = _pair(value, threshold, unit)
        if failed:
            relation = "below" if op == "<" else "above"
        else:
            relation = "at or above" if op == "<" else "at or below"
        verdict = "excluded" if failed else "passes"
        rows.append({"rule": rule, "verdict": verdict,
                     "text": f"{name} {shown}, {relation} the {limit} the spec {verb}: {verdict}"})
    return rows


__all__ = ["as_utc", "qc_in_words", "refresh_qc", "stale_participants"]
