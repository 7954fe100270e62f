"""The trial table's one home (DESIGN.md, Storage): every write and every bulk read of ``trial``.

Writing: ``trial_values`` (the row a participant's trial becomes: its design from the timeline,
``practice`` included), ``insert`` (one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` that checks
the participant's status and token in the statement itself) and ``check_replay`` (a trial index
stored already is acknowledged again only for the same body).

Reading: ``trial_chunks``, the one streamed reader that the export, QC, the live panel and the
participant page use. It runs its statement on the database driver's own cursor (server-side on
PostgreSQL) in the session's transaction and builds typed pandas columns straight from the driver's
values, with no per-row SQLAlchemy processing; ``response`` and ``design`` come as their stored
JSON text, parsed only where read (``trial_types/responses.py``).

pandas, numpy and pyarrow are imported inside the readers, so the web app's trial insert does not
load them."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Collection, Iterator, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from humanlike.server.database import autocommit_engine, write_lock
from humanlike.server.extensions import db
from humanlike.server.lifecycle import PRE_TRIAL, RESUME_STARTED, START, TRIAL_GATE, TRIAL_STORABLE
from humanlike.server.tables.core import Participant, Stimulus, Trial, utcnow

if TYPE_CHECKING:
    import pandas as pd

    from humanlike.server.participants.payloads import TrialIn

# --------------------------------------------------------------------------- writing

INSERT_COLUMNS = ("participant_id", "trial_index", "trial_type", "design", "block", "stimulus_id",
                  "stimuli", "response", "rt_ms", "first_rt_ms", "presented_ms", "frames",
                  "is_repeat", "repeat_of", "practice", "client_time", "server_time")
"""The columns a new trial row sets (``id`` is the database's)."""
SENT = ("trial_type", "response", "rt_ms", "first_rt_ms", "presented_ms", "frames", "client_time")
"""What the browser sent: a replay must send the same."""
FAST_STATUSES = frozenset(s.value for s in TRIAL_GATE.allowed - PRE_TRIAL)
"""Statuses whose trials are one autocommitted insert (no status change comes with them)."""
STORABLE_STATUSES = frozenset(s.value for s in TRIAL_STORABLE)
"""Statuses a trial can be stored in (the first trial moves the participant along ``START``)."""


def trial_values(trial: TrialIn, design: dict[str, Any], participant_id: int,
                 stimulus_id: int | None, token_hash: str) -> dict[str, Any]:
    """The row of a participant's trial: what the browser sent, the design from its timeline entry
    (never from the browser), and ``token_hash`` and ``attempt``, checked by ``insert`` and not
    stored."""
    return {
        "participant_id": participant_id,
        "trial_index": trial.trial_index,
        "trial_type": trial.trial_type,
        "design": design,
        "block": design.get("block"),
        "stimulus_id": stimulus_id,
        "stimuli": design.get("stimuli"),
        "response": trial.response,
        "rt_ms": trial.rt_ms,
        "first_rt_ms": trial.first_rt_ms,
        "presented_ms": trial.presented_ms,
        "frames": trial.frames,
        "is_repeat": bool(design.get("is_repeat")),
        "repeat_of": design.get("repeat_of"),
        "practice": bool(design.get("practice")),
        "client_time": trial.client_time,
        "server_time": utcnow(),
        "token_hash": token_hash,
        "attempt": trial.attempt,
    }


@functools.cache
def _insert_statement(dialect: str, statuses: frozenset[str]) -> sa.Insert:
    """INSERT ... SELECT <values> WHERE <the participant's status is in ``statuses``>
    ON CONFLICT (participant_id, trial_index) DO NOTHING RETURNING id, built once.

    The status, token and attempt checks sit in the statement itself, so a status changed by
    another process (a decline, a time-out), a token it reissued (a resume), a block it restarted
    (``resume_policy``) or a participant it deleted is seen even when this process's cached copy
    is stale. The participant's row is read FOR KEY SHARE on PostgreSQL (SQLite has one writer at
    a time), so a block restart in progress is waited for, never overtaken."""
    module = postgresql if dialect == "postgresql" else sqlite
    table = Trial.__table__
    columns = [table.c[name] for name in INSERT_COLUMNS]
    params: dict[str, Any] = {c.name: sa.bindparam(c.name, type_=c.type) for c in columns}
    # PostgreSQL types a SELECT list's parameters only when told; SQLite must not cast (affinity)
    values = [sa.cast(params[c.name], c.type) if dialect == "postgresql" else params[c.name]
              for c in columns]
    people = Participant.__table__
    source = sa.select(*values).select_from(people).where(
        people.c.id == params["participant_id"],
        people.c.status.in_(sorted(statuses)),
        people.c.token_hash == sa.bindparam("token_hash", type_=people.c.token_hash.type),
        people.c.attempt == sa.bindparam("attempt", type_=people.c.attempt.type),
    )
    if dialect == "postgresql":  # wait for a block restart holding the row (resume_policy.lock),
        # then check the row as it committed; inserts of one participant do not wait on each other
        source = source.with_for_update(read=True, key_share=True, of=people)
    stmt = module.insert(table).from_select(columns, source)
    stmt = stmt.on_conflict_do_nothing(index_elements=["participant_id", "trial_index"])
    return stmt.returning(table.c.id)


def insert(values: dict[str, Any], status_update: bool) -> bool:
    """Insert unless (participant, trial_index) exists, the participant's status forbids it, its
    token is no longer ``values["token_hash"]`` or its block attempt no longer
    ``values["attempt"]``; True when a new row was written.

    The usual trial is one autocommitted statement (one round trip to PostgreSQL), taken only by
    a started (or finished) participant; the first trial, or the first after a time-out, also
    moves the participant along ``START`` (or back to ``started``) in the same transaction."""
    engine = db.engine
    if not status_update:
        stmt = _insert_statement(engine.dialect.name, FAST_STATUSES)
        with autocommit_engine().connect() as conn, write_lock():
            return conn.execute(stmt, values).first() is not None
    stmt = _insert_statement(engine.dialect.name, STORABLE_STATUSES)
    with write_lock(), engine.begin() as conn:
        created = conn.execute(stmt, values).first() is not None
        if created:
            now, people = utcnow(), Participant.__table__
            conn.execute(
                sa.update(people)
                .where(people.c.id == values["participant_id"],
                       people.c.status.in_(START.sources))
                .values(**START.values(now))
            )
            conn.execute(  # a timed-out participant who sends a trial has come back
                sa.update(people)
                .where(people.c.id == values["participant_id"],
                       people.c.status.in_(RESUME_STARTED.sources))
                .values(**RESUME_STARTED.values(now),
                        started_at=sa.func.coalesce(people.c.started_at, now))
            )
    return created


class ReplayRefused(Exception):
    """A trial index that was not newly stored and is not an identical replay: ``error`` and
    ``detail`` are what the API answers (409)."""

    def __init__(self, error: str, detail: dict[str, Any]):
        super().__init__(error)
        self.error, self.detail = error, detail


def check_replay(values: dict[str, Any]) -> None:
    """A trial index that was not newly stored must be a replay of the body already stored:
    ``ReplayRefused("trial_conflict")`` when the stored body differs (the first version stays),
    ``ReplayRefused("trial_not_stored")`` when nothing is stored under it (never acknowledge what
    is not stored)."""
    table = Trial.__table__
    with autocommit_engine().connect() as conn:
        stored = conn.execute(
            sa.select(*(table.c[name] for name in SENT))
            .where(table.c.participant_id == values["participant_id"],
                   table.c.trial_index == values["trial_index"])
        ).one_or_none()
    if stored is None:
        raise ReplayRefused("trial_not_stored", {
            "trial_index": values["trial_index"],
            "message": "this trial could not be stored in the participant's current state"})
    differ = [name for name in sorted(SENT) if stored._mapping[name] != values[name]]
    if differ:
        raise ReplayRefused("trial_conflict", {
            "trial_index": values["trial_index"], "fields": differ,
            "message": "a different trial is already stored under this index; the first one stays"})


def remove(participant_id: int, indices: Collection[int]) -> list[Trial]:
    """Delete a participant's trials at ``indices`` (a block restarted on resume) in the session's
    transaction; returns the rows as they were, for the record of what was asked again."""
    rows = list(db.session.execute(sa.select(Trial).where(
        Trial.participant_id == participant_id, Trial.trial_index.in_(indices))).scalars())
    db.session.execute(sa.delete(Trial).where(Trial.participant_id == participant_id,
                                              Trial.trial_index.in_(indices)))
    return rows


def stored_indices(participant_id: int) -> list[int]:
    """The trial indices stored for a participant, in order."""
    return list(db.session.execute(
        sa.select(Trial.trial_index).where(Trial.participant_id == participant_id)
        .order_by(Trial.trial_index)).scalars())


# --------------------------------------------------------------------------- reading

def experiment_stored_counts(experiment_id: int) -> dict[int, int]:
    """Trials stored per participant (database id) of the whole experiment (an index-only count)."""
    return dict(db.session.execute(  # type: ignore[arg-type]
        sa.select(Trial.participant_id, sa.func.count())
        .join(Participant, Trial.participant_id == Participant.id)
        .where(Participant.experiment_id == experiment_id).group_by(Trial.participant_id)).all())


CHUNK_ROWS = 50_000
"""Rows a reader fetches at a time unless told otherwise."""

_INT, _NULLABLE_INT, _FLOAT, _BOOL, _TEXT, _TIME, _JSON = range(7)
FIELDS: dict[str, tuple[Any, int]] = {
    "participant_id": (Trial.participant_id, _INT),
    "participant": (Participant.public_id, _TEXT),
    "platform_id": (Participant.platform_id, _TEXT),
    "condition": (Participant.condition, _TEXT),
    "trial_index": (Trial.trial_index, _INT),
    "trial_type": (Trial.trial_type, _TEXT),
    "block": (Trial.block, _TEXT),
    "stimulus_id": (Trial.stimulus_id, _NULLABLE_INT),
    "stimulus": (Stimulus.key, _TEXT),
    "stimulus_kind": (Stimulus.kind, _TEXT),
    "is_repeat": (Trial.is_repeat, _BOOL),
    "repeat_of": (Trial.repeat_of, _NULLABLE_INT),
    "practice": (Trial.practice, _BOOL),
    "rt_ms": (Trial.rt_ms, _FLOAT),
    "first_rt_ms": (Trial.first_rt_ms, _FLOAT),
    "presented_ms": (Trial.presented_ms, _FLOAT),
    "frames": (Trial.frames, _NULLABLE_INT),
    "client_time": (Trial.client_time, _FLOAT),
    "server_time": (Trial.server_time, _TIME),
    "response": (sa.cast(Trial.response, sa.Text), _JSON),
    "design": (sa.cast(Trial.design, sa.Text), _JSON),
}
"""What a reader may ask for: name -> (SQL expression, how its values become a column).

Columns of the frames ``trial_chunks`` yields: int64 for ids and indices, Int64 where NULL is
allowed, float64, bool, pandas' text dtype, UTC datetimes for ``server_time``, and the stored JSON
text (object) for ``response`` and ``design``."""
_PARTICIPANT_FIELDS = {"participant", "platform_id", "condition"}
_STIMULUS_FIELDS = {"stimulus", "stimulus_kind"}


def _statement(names: Sequence[str], experiment_id: int | None,
               participant_ids: Sequence[int] | None, trial_types: Collection[str] | None,
               ordered: bool) -> sa.Select:
    stmt = sa.select(*(FIELDS[name][0].label(name) for name in names)).select_from(Trial)
    if experiment_id is not None or _PARTICIPANT_FIELDS & set(names):
        stmt = stmt.join(Participant, Trial.participant_id == Participant.id)
    if _STIMULUS_FIELDS & set(names):
        stmt = stmt.outerjoin(Stimulus, Trial.stimulus_id == Stimulus.id)
    if experiment_id is not None:
        stmt = stmt.where(Participant.experiment_id == int(experiment_id))
    if participant_ids is not None:
        stmt = stmt.where(Trial.participant_id.in_([int(i) for i in participant_ids]))
    if trial_types is not None:
        stmt = stmt.where(Trial.trial_type.in_(sorted(trial_types)))
    if ordered:
        stmt = stmt.order_by(Trial.participant_id, Trial.trial_index)
    return stmt


def _cursor_rows(stmt: sa.Select, size: int | None) -> Iterator[Sequence[Any]]:
    """The rows of ``stmt`` in lists of ``size`` (None: all at once) plain DBAPI tuples, read
    through the driver's own cursor (a server-side one on PostgreSQL) in the session's transaction.

    The driver's values as they come (SQLite: booleans as 0 / 1, times as text): SQLAlchemy's
    per-row processing would cost more than the rest of a reader. Not through a streaming
    SQLAlchemy result: that keeps the first row in its own buffer, and reading its cursor beside
    it lost that row. The statement holds only ids and trial types, rendered as literals."""
    connection = db.session.connection()
    sql = str(stmt.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
    driver = connection.connection  # the DBAPI connection
    cursor = (driver.cursor(name=f"humanlike_trials_{uuid.uuid4().hex[:12]}")
              if connection.dialect.name == "postgresql" else driver.cursor())
    try:
        cursor.execute(sql)
        if size is None:
            rows = cursor.fetchall()
            if rows:
                yield rows
            return
        while rows := cursor.fetchmany(size):
            yield rows
    finally:
        cursor.close()


def columns_of(rows: Sequence[Any], n: int) -> list[list[Any]]:
    """The ``n`` columns of ``rows`` as lists."""
    # itemgetter in C: unlike zip(*rows) it makes no object per row, so a chunk does not set off
    # the garbage collector over and over
    return [list(map(itemgetter(i), rows)) for i in range(n)]


def _times(values: list[Any]) -> pd.Series:
    """Stored times as UTC datetimes (SQLite gives the stored text, PostgreSQL aware datetimes)."""
    import pandas as pd

    if values and isinstance(values[0], str):
        times = pd.to_datetime(values, utc=True, format="ISO8601")
    else:
        times = pd.to_datetime(values, utc=True)
    return pd.Series(times).astype("datetime64[us, UTC]")  # what the database stores


def _column(values: list[Any], kind: int) -> Any:
    import numpy as np
    import pandas as pd

    if kind == _INT:
        return np.array(values, dtype=np.int64)
    if kind == _FLOAT:
        return np.array(values, dtype=np.float64)  # None -> NaN
    if kind == _BOOL:
        return np.array(values, dtype=bool)
    if kind == _NULLABLE_INT:
        return pd.array(values, dtype="Int64")
    if kind == _TIME:
        return _times(values)
    if kind == _JSON:
        return pd.Series(values, dtype=object)
    return pd.Series(values)  # text: pandas infers its string dtype, as for any text column


def _frame(rows: Sequence[Any], names: Sequence[str]) -> pd.DataFrame:
    import pandas as pd

    columns = columns_of(rows, len(names)) if rows else [[] for _ in names]
    data = {name: _column(values, FIELDS[name][1]) for name, values in zip(names, columns)}
    frame = pd.DataFrame(data)
    if not rows:  # typed although empty
        for name in names:
            if FIELDS[name][1] == _TEXT:
                frame[name] = frame[name].astype("str")
    return frame


def trial_chunks(fields: Sequence[str], *, experiment_id: int | None = None,
                 participant_ids: Sequence[int] | None = None,
                 trial_types: Collection[str] | None = None, ordered: bool = True,
                 chunk_rows: int | None = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """Stored trials as frames of the ``fields`` (names of ``FIELDS``), streamed from the database.

    Which trials: those of ``experiment_id``, of the participants ``participant_ids`` (database
    ids) and of the ``trial_types``, where given. ``ordered``: by participant, then trial index,
    and a frame holds whole participants: once ``chunk_rows`` rows are read, those up to the last
    participant begun (fewer than twice ``chunk_rows``, unless one participant has more).
    Unordered: as the database reads them, ``chunk_rows`` at a time, however participants fall
    (the live panel's table scan). ``chunk_rows`` None: everything in one frame. At least one
    frame comes, empty (and typed) when no trial matches."""
    names = list(dict.fromkeys(["participant_id", *fields]))
    keep = list(dict.fromkeys(fields))
    if participant_ids is not None and not len(participant_ids):
        yield _frame([], names)[keep]
        return
    size = None if chunk_rows is None else max(int(chunk_rows), 1)
    if ordered:  # a few participants a query: read in index order, no sort of every row
        ids = _participants_in_order(experiment_id, participant_ids)
        statements = [_statement(names, experiment_id, ids[i:i + IDS_PER_QUERY], trial_types, True)
                      for i in range(0, len(ids), IDS_PER_QUERY)]
    else:
        statements = [_statement(names, experiment_id, participant_ids, trial_types, False)]
    parts = (rows for stmt in statements for rows in _cursor_rows(stmt, size))
    if size is None:
        rows = [row for part in parts for row in part]
        yield _frame(rows, names)[keep]
        return
    if not ordered:
        empty = True
        for part in parts:
            empty = False
            yield _frame(part, names)[keep]
        if empty:
            yield _frame([], names)[keep]
        return
    empty = True
    pending: list[Any] = []
    for rows in _exactly(parts, size):  # as one cursor's fetches: the same cuts at any batching
        pending.extend(rows)
        if len(pending) < size:
            continue
        last, cut = pending[-1][0], len(pending)
        while cut > 0 and pending[cut - 1][0] == last:
            cut -= 1
        if cut > 0:
            empty = False
            yield _frame(pending[:cut], names)[keep]
            pending = pending[cut:]
    if pending or empty:
        yield _frame(pending, names)[keep]


IDS_PER_QUERY = 16
"""Participants an ordered reader reads per query: SQLite and PostgreSQL then walk the
(participant, trial index) index in order instead of sorting the whole study's trials first (a
temporary B-tree of every row and its JSON before the first row came, at 2,000 x 820)."""


def _participants_in_order(experiment_id: int | None,
                           participant_ids: Sequence[int] | None) -> list[int]:
    """The participants to read, by database id."""
    if participant_ids is not None:
        return sorted({int(i) for i in participant_ids})
    stmt = sa.select(Participant.id).order_by(Participant.id)
    if experiment_id is not None:
        stmt = stmt.where(Participant.experiment_id == int(experiment_id))
    return list(db.session.execute(stmt).scalars())


def _exactly(parts: Iterator[Sequence[Any]], size: int) -> Iterator[list[Any]]:
    """The rows of ``parts`` regrouped into lists of ``size`` (the last may be shorter)."""
    group: list[Any] = []
    for part in parts:
        group.extend(part)
        while len(group) >= size:
            yield group[:size]
            group = group[size:]
    if group:
        yield group
