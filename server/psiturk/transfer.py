"""psiTurk data in and out: import a psiTurk ``participants.db`` (its assignments table, any name),
export psiTurk's ``trialdata.csv``, ``questiondata.csv`` and ``eventdata.csv`` byte for byte as
psiTurk's ``download_datafiles`` writes them, and the tidy trial table (one column per trialdata key)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.models import Experiment
from humanlike.server.platforms import Platform
from humanlike.server.psiturk import participants as pp
from humanlike.server.psiturk.models import PsiturkAssignment, PsiturkTrial
from humanlike.server.psiturk.modes import Mode
from humanlike.server.psiturk.storage import BlobError, store_blob, stored_lists
from humanlike.server.trial_types import PSITURK_KIND

#: columns every psiTurk assignments table has (psiTurk 3.3.1's models.py)
PSITURK_COLUMNS = {"uniqueid", "assignmentid", "workerid", "hitid", "status", "datastring"}
CSV_FILES = ("trialdata", "questiondata", "eventdata")


class ImportProblem(ValueError):
    """The source is not a psiTurk database (the message names the source and what is missing)."""


def source_engine(source: str) -> sa.Engine:
    """A SQLite file path or a database URL."""
    if "://" in source:
        from humanlike.server.config import normalise_database_url

        return sa.create_engine(normalise_database_url(source))
    path = Path(source)
    if not path.is_file():
        raise ImportProblem(f"{source}: no such file (a psiTurk SQLite file or a database URL)")
    return sa.create_engine(f"sqlite:///file:{path.resolve()}?mode=ro&uri=true")


def find_table(engine: sa.Engine, source: str, table: str | None) -> str:
    """The assignments table: the one named, else the one with psiTurk's participant columns."""
    inspector = sa.inspect(engine)
    names = inspector.get_table_names()
    candidates = [table] if table else names
    for name in candidates:
        if name not in names:
            raise ImportProblem(f"{source}: no table {name!r} (tables: {', '.join(names) or 'none'})")
        columns = {c["name"].lower() for c in inspector.get_columns(name)}
        if columns >= PSITURK_COLUMNS:
            return name
        if table:
            missing = ", ".join(sorted(PSITURK_COLUMNS - columns))
            raise ImportProblem(f"{source}: table {name!r} lacks psiTurk's columns {missing}")
    raise ImportProblem(f"{source}: no table with psiTurk's participant columns "
                        f"({', '.join(sorted(PSITURK_COLUMNS))}); tables: {', '.join(names) or 'none'}")


@dataclass
class ImportResult:
    """What an import did."""

    table: str
    imported: int = 0
    skipped: int = 0
    trials: int = 0
    problems: list[str] = field(default_factory=list)


def _aware(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value if isinstance(value, dt.datetime) else None


def import_psiturk(source: str, slug: str, table: str | None = None,
                   progress: Callable[[Iterator[Any], int], Iterator[Any]] | None = None) -> ImportResult:
    """Bring a psiTurk study's participants, statuses and data into experiment ``slug``; a
    participant already imported (same uniqueId) is skipped, so re-running is harmless."""
    engine = source_engine(source)
    try:
        name = find_table(engine, source, table)
        result = ImportResult(table=name)
        src = sa.Table(name, sa.MetaData(), autoload_with=engine)
        exp = pp.experiment_row(slug, {"slug": slug, "title": slug, "kind": PSITURK_KIND,
                                       "psiturk": {"imported_from": name}}, source)
        with engine.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(src)).scalar_one()
            rows: Iterator[Any] = iter(conn.execute(sa.select(src)).mappings())
            if progress is not None:
                rows = progress(rows, total)
            for row in rows:
                _import_row(exp, dict(row), result)
    finally:
        engine.dispose()
    return result


def _import_row(exp: Experiment, row: dict[str, Any], result: ImportResult) -> None:
    row = {k.lower(): v for k, v in row.items()}
    uniqueid = str(row["uniqueid"])
    if db.session.execute(sa.select(PsiturkAssignment.id).where(
            PsiturkAssignment.uniqueid == uniqueid)).first():
        result.skipped += 1
        return
    mode = row.get("mode") or Mode.LIVE
    hit_id = str(row.get("hitid") or "")
    part, _token = pp.create_assignment(
        exp, hit_id=hit_id, assignment_id=str(row["assignmentid"]), worker_id=str(row["workerid"]),
        mode=mode, cond=row.get("cond") or 0, counterbalance=row.get("counterbalance") or 0,
        code_version=row.get("codeversion") or "", platform=pp.platform_of(mode, hit_id, False),
        client={"ip": row.get("ipaddress"), "browser": row.get("browser"),
                "platform": row.get("platform"), "language": row.get("language"),
                "user_agent": None})
    part.cond, part.counterbalance = row.get("cond"), row.get("counterbalance")
    part.uniqueid = uniqueid
    part.beginhit = _aware(row.get("beginhit"))
    part.beginexp = _aware(row.get("beginexp"))
    part.endhit = _aware(row.get("endhit"))
    part.bonus = row.get("bonus")
    part.status = int(row.get("status") or pp.ALLOCATED)  # mirrored onto the participant row
    participant = part.participant
    participant.created_at = part.beginhit or participant.created_at
    participant.started_at = part.beginexp
    participant.completed_at = part.endhit if part.status in pp.FINISHED_CODES else None
    if part.participant.platform == Platform.LOCAL.value:
        part.participant.platform_id = uniqueid[:128]
    db.session.commit()
    text = row.get("datastring")
    if text:
        try:
            store_blob(part, json.loads(text))
        except (ValueError, BlobError) as exc:
            result.problems.append(f"{uniqueid}: data not imported ({exc})")
    result.trials += part.trials_seen or 0
    result.imported += 1


def _assignments(exp: Experiment) -> list[PsiturkAssignment]:
    return list(db.session.execute(sa.select(PsiturkAssignment).where(
        PsiturkAssignment.experiment_id == exp.id).order_by(PsiturkAssignment.id)).scalars())


def _csv(rows: list[tuple[Any, ...]]) -> str:
    """psiTurk's CSV of ``rows``, formula-like text cells prefixed by ``'`` as in the native export
    (``export_sink.is_formula_like``; psiTurk's own writes them verbatim)."""
    from humanlike.server.export_sink import is_formula_like

    safe = [tuple("'" + c if is_formula_like(c) else c for c in row) for row in rows]
    with io.StringIO() as out:
        csv.writer(out).writerows(safe)
        return out.getvalue()


def write_tidy_csv(tidy: pd.DataFrame, path: Path) -> None:
    """``psiturk_trials.csv``: the tidy table with its text cells neutralised by the native
    export's ``export_sink.neutralise_csv_cells``."""
    import pyarrow as pa

    from humanlike.server.export_sink import neutralise_csv_cells

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
    from humanlike.server.models import Participant

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
