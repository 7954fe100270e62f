"""psiTurk data in: import a psiTurk ``participants.db`` (its assignments table, any name); the way
out (psiTurk's three CSVs, the tidy trial table) is ``server/export/psiturk.py``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.platforms import Platform
from humanlike.server.psiturk import participants as pp
from humanlike.server.psiturk.modes import Mode
from humanlike.server.tables.core import Experiment
from humanlike.server.tables.psiturk import (
    BlobError,
    PsiturkAssignment,
    store_blob,
)
from humanlike.server.trial_types.registry import PSITURK_KIND

#: columns every psiTurk assignments table has (psiTurk 3.3.1's models.py)
PSITURK_COLUMNS = {"uniqueid", "assignmentid", "workerid", "hitid", "status", "datastring"}


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
