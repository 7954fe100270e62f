"""psiTurk data out: ``export --format psiturk`` writes psiTurk's own three CSVs
(trialdata, questiondata, eventdata), and the humanlike export's ``psiturk_trials`` table is
``tidy_trials`` (one row per stored record, one column per trialdata key)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from humanlike.server.export.sink import is_formula_like, neutralise_csv_cells
from humanlike.server.extensions import db
from humanlike.server.tables.core import Experiment
from humanlike.server.tables.psiturk import PsiturkAssignment, PsiturkTrial, stored_lists

CSV_FILES = ("trialdata", "questiondata", "eventdata")


def _assignments(exp: Experiment) -> list[PsiturkAssignment]:
    return list(db.session.execute(sa.select(PsiturkAssignment).where(
        PsiturkAssignment.experiment_id == exp.id).order_by(PsiturkAssignment.id)).scalars())


def _csv(rows: list[tuple[Any, ...]]) -> str:
    """psiTurk's CSV of ``rows``, formula-like text cells prefixed by ``'`` as in the native export
    (``export_sink.is_formula_like``; psiTurk's own writes them verbatim)."""
    safe = [tuple("'" + c if is_formula_like(c) else c for c in row) for row in rows]
    with io.StringIO() as out:
        csv.writer(out).writerows(safe)
        return out.getvalue()


def write_tidy_csv(tidy: pd.DataFrame, path: Path) -> None:
    """``psiturk_trials.csv``: the tidy table with its text cells neutralised by the native
    export's ``export_sink.neutralise_csv_cells``."""
    import pyarrow as pa

    frame = tidy.copy()
    for name in frame.columns:
        if not (frame[name].dtype == object or pd.api.types.is_string_dtype(frame[name])):
            continue
        try:
            column = pa.array(frame[name], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed cells: each as its text
            column = pa.array(frame[name].map(lambda v: v if v is None or v != v else str(v)),
                              from_pandas=True)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            safe = neutralise_csv_cells(pa.table({"cell": column})).column(0)
            frame[name] = pd.Series(safe.to_pylist(), index=frame.index, dtype=object)
    frame.to_csv(path, index=False)


def psiturk_csv_texts(part: PsiturkAssignment) -> dict[str, str]:
    """psiTurk's three CSV fragments of one participant (``get_trial_data`` etc.: an empty string
    when there is no data or a record lacks a field psiTurk reads)."""
    if part.meta is None and not part.trials_seen and not part.events_seen:
        return dict.fromkeys(CSV_FILES, "")
    data, questions, events = stored_lists(part.id)
    out: dict[str, str] = {}
    try:
        out["trialdata"] = _csv([(part.uniqueid, t["current_trial"], t["dateTime"],
                                  json.dumps(t["trialdata"])) for t in data])
    except (KeyError, TypeError):
        out["trialdata"] = ""
    try:
        out["eventdata"] = _csv([(part.uniqueid, e["eventtype"], e["interval"], e["value"],
                                  e["timestamp"]) for e in events])
    except (KeyError, TypeError):
        out["eventdata"] = ""
    out["questiondata"] = _csv([(part.uniqueid, k, v) for k, v in questions.items()])
    return out


def write_psiturk_csvs(slug: str, out: Path) -> dict[str, int]:
    """Write trialdata.csv, questiondata.csv and eventdata.csv of experiment ``slug`` into ``out``."""
    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if exp is None:
        raise LookupError(f"no experiment {slug!r} in this database")
    out.mkdir(parents=True, exist_ok=True)
    handles = {name: (out / f"{name}.csv").open("w", encoding="utf-8", newline="")
               for name in CSV_FILES}
    counts = dict.fromkeys(CSV_FILES, 0)
    try:
        for part in _assignments(exp):
            for name, text in psiturk_csv_texts(part).items():
                handles[name].write(text)
                counts[name] += text.count("\r\n")
            db.session.expunge(part)
    finally:
        for handle in handles.values():
            handle.close()
    return counts


def tidy_trials(slug: str) -> pd.DataFrame:
    """psiTurk trial records as a tidy table: participant (public id), platform_id (workerId),
    assignment_id, condition, counterbalance, position, current_trial, dateTime, then one column per
    trialdata key (in first-seen order; a key that clashes with those gets a ``trialdata_`` prefix;
    lists and objects as JSON text)."""
    from humanlike.server.tables.core import Participant

    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if exp is None:
        raise LookupError(f"no experiment {slug!r} in this database")
    a, t, p = PsiturkAssignment, PsiturkTrial, Participant
    rows = db.session.execute(
        sa.select(p.public_id, a.workerid, a.assignmentid, a.cond, a.counterbalance, t.position,
                  t.record)
        .join(t, t.assignment_id == a.id).join(p, p.id == a.participant_id)
        .where(a.experiment_id == exp.id).order_by(a.id, t.position)).all()
    records = [json.loads(r.record) for r in rows]
    base = pd.DataFrame({
        "participant": [r.public_id for r in rows], "platform_id": [r.workerid for r in rows],
        "assignment_id": [r.assignmentid for r in rows],
        "condition": [r.cond for r in rows], "counterbalance": [r.counterbalance for r in rows],
        "position": [r.position for r in rows],
        "current_trial": [rec.get("current_trial") for rec in records],
        "dateTime": [rec.get("dateTime") for rec in records],
    })
    data = pd.json_normalize([rec.get("trialdata") if isinstance(rec.get("trialdata"), dict)
                              else {"trialdata": rec.get("trialdata")} for rec in records],
                             max_level=0)
    data = data.rename(columns={c: f"trialdata_{c}" for c in data.columns if c in base.columns})
    for column in data.columns:  # lists and objects as JSON text (one cell, Parquet-safe)
        if data[column].dtype == object:
            values = data[column].map(lambda v: json.dumps(v) if isinstance(v, dict | list) else v)
            kinds = {type(v) for v in values if v is not None and v == v}
            if len(kinds) > 1:  # a key holding numbers here and text there: all as text
                values = values.map(lambda v: v if v is None or v != v else str(v))
            data[column] = values
    return pd.concat([base, data], axis=1)
