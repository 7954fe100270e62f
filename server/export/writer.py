"""The canonical tidy export (DESIGN.md): trials, one table per trial type (ratings, triads,
classifications, debrief answers), participants, stimuli and events, as CSV and Parquet with a
codebook. Each trial's design is read from ``trial.design``.

``write_export`` streams: trials are read by the one trial reader (``trial_store.trial_chunks``: the
driver's cursor, server-side on PostgreSQL) in chunks cut on participant boundaries; each chunk's tables are appended to the CSV files and to Parquet writers,
and its participants' QC is computed from the chunk alone (QC is per participant), so memory is
bounded by the chunk size, not the study's. ``export_frames`` builds the same tables in memory (one
chunk holding everything)."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.server.export import authenticity
from humanlike.server.export import codebook as book
from humanlike.server.export.sink import SinkWriter, TableSink
from humanlike.server.export.stored_records import stored_record_tables
from humanlike.server.extensions import db
from humanlike.server.participants import display, trial_store
from humanlike.server.rights.pseudonyms import pseudonymise_codebook, pseudonymise_frame
from humanlike.server.rights.retention import stored_note
from humanlike.server.study import adaptive
from humanlike.server.study.experiments import version_hashes
from humanlike.server.tables.core import Event, Experiment, Participant, Stimulus
from humanlike.server.trial_types import responses
from humanlike.server.trial_types.base import ExportInput
from humanlike.server.trial_types.registry import TRIAL_TYPES, internal_types

TRIAL_COLUMNS = list(book.TRIAL_COLUMNS)
CHUNK_TRIALS = 8_000  # about 10 participants of an 820-trial study: ~150 MB of frames
# event types counted per participant in the participants table: column -> (type, value or None)
EVENT_COUNTS = {"n_blur": ("blur", None), "n_hidden": ("visibility", "hidden"),
                "n_fullscreen_exit": ("fullscreen_exit", None)}


def _experiment(slug: str) -> Experiment:
    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if exp is None:
        known = db.session.execute(sa.select(Experiment.slug)).scalars().all()
        raise LookupError(f"no experiment {slug!r} in the database (known: {known})")
    return exp


EXPORT_FIELDS = ("participant", "platform_id", "condition", "trial_index", "trial_type", "block",
                 "stimulus", "stimulus_kind", "is_repeat", "repeat_of", "rt_ms", "first_rt_ms",
                 "presented_ms", "frames", "client_time", "server_time", "practice", "response",
                 "design")
"""What the export reads of each trial (``trial_store.FIELDS``): the common columns but the
experiment's slug, plus the stored response and design."""


def _stream(stmt: sa.Select, rows: int) -> sa.CursorResult:
    """Run ``stmt`` on the session's connection (Core rows, no ORM) through a server-side cursor.

    The option is set on the statement: set on the connection it would stay there (a Connection's
    ``execution_options`` changes it in place) and turn the session's later UPDATEs into cursors."""
    return db.session.connection().execute(stmt.execution_options(yield_per=max(rows, 1)))


def utc_text(times: pd.Series) -> pd.Series:
    """UTC times as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` text (numpy's formatter: strftime's output,
    several times faster)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    times = pd.to_datetime(times, utc=True)
    if times.isna().any():
        return times.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    naive = times.dt.tz_localize(None).to_numpy().astype("datetime64[us]")
    text = pc.binary_join_element_wise(pa.array(np.datetime_as_string(naive, unit="us")), "Z", "")
    return pd.Series(text.to_pandas(), index=times.index)


def empty_trials() -> pd.DataFrame:
    """The trial rows of an experiment without trials (every column text, as always)."""
    return pd.DataFrame(columns=[*TRIAL_COLUMNS, "response", "design"])


def trial_rows_frame(chunk: pd.DataFrame, slug: str) -> pd.DataFrame:
    """A chunk of ``trial_store.trial_chunks(EXPORT_FIELDS)`` as the common trial columns plus
    response and design (their stored JSON text)."""
    if chunk.empty:
        return empty_trials()
    frame = chunk.assign(experiment=slug, server_time=utc_text(chunk["server_time"]))
    return frame[[*TRIAL_COLUMNS, "response", "design"]]


def trial_chunks(exp: Experiment, chunk_trials: int | None = CHUNK_TRIALS) -> Iterator[pd.DataFrame]:
    """Stored trials in frames of about ``chunk_trials`` rows (None: one frame), never splitting a
    participant, through the one trial reader (``trial_store.trial_chunks``)."""
    for chunk in trial_store.trial_chunks(EXPORT_FIELDS, experiment_id=exp.id,
                                          chunk_rows=chunk_trials):
        yield trial_rows_frame(chunk, exp.slug)


def stimulus_frame(exp: Experiment) -> pd.DataFrame:
    """One row per stimulus with its manifest metadata."""
    rows = db.session.execute(
        sa.select(Stimulus).where(Stimulus.experiment_id == exp.id).order_by(Stimulus.key)
    ).scalars().all()
    return pd.DataFrame(
        [{"stimulus": s.key, "kind": s.kind, "true_class": s.true_class, "sha256": s.sha256,
          **(s.meta or {})} for s in rows]
    )


def trial_tables(trials: pd.DataFrame, labels: list[str], stimuli: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``trials`` and one table per registered trial type, from a frame of trial rows.

    Rated types' builders read their responses as stored JSON text (``responses.rating_rows``,
    parsed by Arrow); the other types' responses and designs are parsed into Python objects first."""
    def where(mask: pd.Series) -> pd.DataFrame:  # no copy of a chunk all of whose rows match
        return trials if mask.all() else trials[mask]

    tables = {"trials": where(~trials["trial_type"].isin(internal_types()))[TRIAL_COLUMNS]}
    for t in TRIAL_TYPES.values():
        rows = where(trials["trial_type"] == t.name)
        if not t.rated and len(rows):
            rows = rows.assign(response=responses.json_values(rows["response"]),
                               design=responses.json_values(rows["design"]))
        inp = ExportInput(rows, TRIAL_COLUMNS, labels, stimuli)
        tables[t.table] = t.frame(inp)
        for derived in t.derived:
            tables[derived.table] = derived.frame(tables[t.table], inp)
    return tables


QC_COLUMNS = ["participant", "trial_index", "stimulus", "stimulus_kind", "is_repeat", "rt_ms",
              "practice", "category", "rating"]
"""The columns of the rating long form that the QC reads."""


def qc_input(ratings: pd.DataFrame) -> pd.DataFrame:
    """The rows and columns of the rating long form that the QC reads (practice trials out)."""
    return ratings.loc[~ratings["practice"], QC_COLUMNS].drop(columns=["stimulus_kind", "practice"])


def rating_qc(ratings: pd.DataFrame, stimuli: pd.DataFrame, participants: pd.DataFrame,
              rules: ExclusionRules) -> pd.DataFrame:
    """Per-participant QC and exclusions, computed by the analysis package (one implementation)."""
    return qc_of(qc_input(ratings), stimuli, participants, rules)


QC_EXPORT_NAMES = {"repeat_r": "repeat_reliability", "n_trials": "n_rating_trials"}
"""``participant_qc`` columns that the export (and the stored QC's metrics) name otherwise."""


def qc_of(main: pd.DataFrame, stimuli: pd.DataFrame, participants: pd.DataFrame,
          rules: ExclusionRules) -> pd.DataFrame:
    """``rating_qc`` of the ``qc_input`` rows."""
    from humanlike.analysis.ratings.data import attach_stimuli, clean_ratings, participant_qc

    frame = attach_stimuli(main, stimuli)
    frame = clean_ratings(frame, rules.min_trial_rt_ms)
    qc = participant_qc(frame, participants, rules, respect_export_exclusions=False, validated=True)
    return qc.rename(columns=QC_EXPORT_NAMES)


def _wrapped(value: object) -> object:
    """The API stores a bare event value as ``{"value": v}``."""
    return value.get("value") if isinstance(value, dict) else None


def event_counts(exp: Experiment) -> pd.DataFrame:
    """Per participant id: counts of blur, visibility-hidden and fullscreen-exit events."""
    types = sorted({t for t, _ in EVENT_COUNTS.values()})
    rows = db.session.execute(
        sa.select(Event.participant_id, Event.type, Event.value, sa.func.count())
        .join(Participant, Event.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id, Event.type.in_(types))
        .group_by(Event.participant_id, Event.type, Event.value)
    ).all()
    totals: dict[int, dict[str, int]] = {}
    for pid, type_, value, n in rows:
        for column, (wanted, wanted_value) in EVENT_COUNTS.items():
            if type_ == wanted and wanted_value in (None, value, _wrapped(value)):
                totals.setdefault(pid, dict.fromkeys(EVENT_COUNTS, 0))[column] += n
    return pd.DataFrame.from_dict(totals, orient="index", columns=list(EVENT_COUNTS))


def participant_table(exp: Experiment, ids: list[int] | None = None) -> pd.DataFrame:
    """One row per participant (arrival order): identity, status, timing and event counts; the one
    place that says which participant columns come from the database. ``ids``: only those."""
    stmt = sa.select(Participant).where(Participant.experiment_id == exp.id)
    if ids is not None:
        stmt = stmt.where(Participant.id.in_(ids))
    rows = db.session.execute(stmt.order_by(Participant.id)).scalars().all()
    versions = version_hashes(exp.id)
    frame = pd.DataFrame([
        {"id": p.id, "experiment": exp.slug, "participant": p.public_id, "platform": p.platform,
         "platform_id": p.platform_id, "study_id": p.study_id or p.hit_id,
         "session_id": p.session_id or p.assignment_id, "condition": p.condition,
         "spec_version": versions.get(p.spec_version_id) if p.spec_version_id else None,
         "status": p.status, "simulated": bool(p.simulated), "seed": p.seed,
         "created_at": p.created_at,
         "started_at": p.started_at, "completed_at": p.completed_at,
         "refresh_hz": p.refresh_hz, "user_agent": p.user_agent, "n_trials": p.n_trials,
         "completion_code": p.completion_code, "outcome": p.outcome,
         "bonus": float(p.bonus) if p.bonus is not None else None}
        for p in rows
    ])
    if frame.empty:
        return frame
    for col in ("created_at", "started_at", "completed_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    frame["duration_s"] = (frame["completed_at"] - frame["created_at"]).dt.total_seconds()
    counts = event_counts(exp).reindex(frame["id"]).fillna(0).astype(int)
    for column in EVENT_COUNTS:
        frame[column] = counts[column].to_numpy()
    from humanlike.server.psiturk.progress import psiturk_columns  # records stored, psiTurk mode
    return adaptive.export_columns(psiturk_columns(exp, frame))  # [adaptive]: each draw


def finish_participants(frame: pd.DataFrame, stored: pd.Series, qc: list[pd.DataFrame]) -> pd.DataFrame:
    """Add trials stored, the QC columns of every chunk and exclusions; format the times."""
    if frame.empty:
        return frame
    frame = frame.drop(columns=["id"])
    frame["n_stored"] = frame["participant"].map(stored).fillna(0).astype(int)
    frame["excluded"], frame["exclusion_reasons"] = False, ""
    if qc:
        frame = frame.drop(columns=["excluded", "exclusion_reasons"]).merge(
            pd.concat(qc, ignore_index=True), on="participant", how="left")
        frame["excluded"] = frame["excluded"].fillna(False).astype(bool)
        frame["exclusion_reasons"] = frame["exclusion_reasons"].fillna("")
    for col in ("created_at", "started_at", "completed_at"):
        frame[col] = frame[col].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return frame


def _event_select(exp: Experiment) -> sa.Select:
    return (
        sa.select(Participant.public_id, Event.type, Event.value, Event.client_time, Event.server_time)
        .join(Participant, Event.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id)
        .order_by(Event.id)
    )


def event_rows_frame(rows: list[Any], slug: str) -> pd.DataFrame:
    """One row per logged browser event."""
    frame = pd.DataFrame.from_records(
        rows, columns=["participant", "type", "value", "client_time", "server_time"])
    frame.insert(0, "experiment", slug)
    frame["value"] = [json.dumps(v) if v is not None else None for v in frame["value"]]
    frame["client_time"] = frame["client_time"].astype("float64")
    frame["server_time"] = pd.to_datetime(frame["server_time"], utc=True).dt.strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )
    return frame


def event_chunks(exp: Experiment, chunk_rows: int = CHUNK_TRIALS) -> Iterator[pd.DataFrame]:
    """Logged events in frames of at most ``chunk_rows`` rows (one empty frame when there are none)."""
    result = _stream(_event_select(exp), chunk_rows)
    empty = True
    for part in result.partitions():
        empty = False
        yield event_rows_frame(list(part), exp.slug)
    if empty:
        yield event_rows_frame([], exp.slug)


QC_PROCESS_TRIALS = 200_000
"""From this many stored trials on, ``write_export`` computes the QC in a worker process, in
parallel with reading and writing the next chunks (pandas holds the GIL, so a thread would not do);
below, in this process. Either way the same function on the same rows: the same numbers."""
QC_IN_FLIGHT = 4
"""Chunks the worker process may be behind by (their rating rows wait in memory). Each chunk's
QC is its own call, as in this process: the participants table's column types depend on how the
QC frames are split, so a batch of several chunks would change the Parquet schema."""

_WORKER_INPUT: tuple[pd.DataFrame, pd.DataFrame, ExclusionRules] | None = None


def _start_qc_worker(stimuli: pd.DataFrame, participants: pd.DataFrame,
                     rules: ExclusionRules) -> None:
    global _WORKER_INPUT
    _WORKER_INPUT = (stimuli, participants, rules)


def _qc_in_worker(main: pd.DataFrame) -> pd.DataFrame:
    assert _WORKER_INPUT is not None
    return qc_of(main, *_WORKER_INPUT)


class _Export:
    """One pass over an experiment's trials: each chunk's tables go to ``emit``; QC is collected
    (computed here, or by a worker process when ``qc_process``)."""

    def __init__(self, exp: Experiment, qc_process: bool = False) -> None:
        self.exp = exp
        self.labels = [c["label"] for c in exp.spec.get("categories", [])]
        self.rules = ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))
        self.stimuli = stimulus_frame(exp)
        self.participants = participant_table(exp)
        self.calibrations = display.calibrations(exp.id)  # the display table (server/participants/display.py)
        self.frame_ms = display.frame_periods(self.calibrations, self.participants)
        self.inclusion = adaptive.inclusion_lookup(exp.id)  # [adaptive]: each draw's probabilities
        self.timing: list[pd.DataFrame] = []  # each chunk's frame errors, for [display] max_frame_miss
        self.stored: dict[str, int] = {}
        self.qc: list[Any] = []  # frames, or futures of frames
        self.pool: Any = None
        if qc_process and not self.participants.empty:
            self.pool = _qc_pool(self.stimuli, self.participants, self.rules)

    def tables(self, trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """The per-trial tables of one chunk (whole participants); records its QC and counts."""
        tables = trial_tables(trials, self.labels, self.stimuli)
        for t in TRIAL_TYPES.values():
            if t.rated:
                tables[t.table] = adaptive.with_inclusion(tables[t.table], self.inclusion)
        tables["trial_timing"] = display.trial_timing(trials, self.exp.spec, self.frame_ms)
        self.timing.append(tables["trial_timing"][["participant", "frame_error"]])
        self.stored.update({str(k): int(n) for k, n in trials.groupby("participant").size().items()})
        rated = [tables[t.table] for t in TRIAL_TYPES.values() if t.rated]  # what QC reads
        ratings = rated[0] if len(rated) == 1 else pd.concat(rated, ignore_index=True) \
            if rated else pd.DataFrame()
        if not ratings.empty and not self.participants.empty:
            if self.pool is None:
                self.qc.append(rating_qc(ratings, self.stimuli, self.participants, self.rules))
            else:
                self._wait(QC_IN_FLIGHT)
                self.qc.append(self.pool.submit(_qc_in_worker, qc_input(ratings)))
        return tables

    def _wait(self, in_flight: int) -> None:
        """Until at most ``in_flight`` QC computations are pending."""
        from concurrent.futures import FIRST_COMPLETED, wait

        while (pending := [f for f in self.qc if not isinstance(f, pd.DataFrame) and not f.done()]) \
                and len(pending) > in_flight:
            wait(pending, return_when=FIRST_COMPLETED)

    def participant_frame(self) -> pd.DataFrame:
        """The participants table, once every chunk has been seen (researcher overrides applied,
        then who is analysed: ``analysis.sample.decide_analysed``)."""
        from humanlike.analysis.sample import decide_analysed
        from humanlike.server.participants.overrides import apply_overrides, overrides

        qc = [q if isinstance(q, pd.DataFrame) else q.result() for q in self.qc]
        frame = finish_participants(self.participants, pd.Series(self.stored, dtype=int), qc)
        frame = display.exclude_by_timing(frame, self.timing, self.exp.spec)
        frame = self.with_authenticity(frame)
        frame = apply_overrides(frame, overrides(self.exp.id))
        if frame.empty:
            return frame
        return decide_analysed(frame, self.rules.analyse_partial_data,
                               self.rules.analyse_simulated)

    def with_authenticity(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The authenticity screen's columns (``analysis.authenticity.verdict.COLUMNS``); a flagged
        participant is excluded only where ``[exclusion] exclude_authenticity_flagged`` says so."""
        if frame.empty:
            return frame
        columns = authenticity.participants_columns(self.exp, frame["participant"])
        frame = pd.concat([frame.reset_index(drop=True), columns], axis=1)
        if self.rules.exclude_authenticity_flagged:
            flagged = (frame["authenticity"] == "flagged").to_numpy()
            frame.loc[flagged, "excluded"] = True
            frame.loc[flagged, "exclusion_reasons"] = [
                ";".join(filter(None, [old, "authenticity flagged"]))
                for old in frame.loc[flagged, "exclusion_reasons"]]
        return frame

    def close(self) -> None:
        """Stop the QC worker process, if any."""
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


def _qc_pool(stimuli: pd.DataFrame, participants: pd.DataFrame, rules: ExclusionRules) -> Any:
    """One worker process for the QC, or None where this process should not start one.

    The worker is forked at once, while this process runs one thread (before the writer thread and
    the trial cursor exist), so it inherits no lock another thread holds; a process running other
    threads (a web server's) or a daemonic one computes its QC itself. The worker only computes:
    it never touches the database connections it inherits, and leaves through ``os._exit``."""
    import gc
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    if multiprocessing.current_process().daemon or threading.active_count() > 1:
        return None
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"),
                               initializer=_start_qc_worker,
                               initargs=(stimuli, participants, rules))
    gc.freeze()  # the worker's garbage collector leaves the inherited objects (and their pages) be
    try:
        pool.submit(int).result()  # fork now
    finally:
        gc.unfreeze()
    return pool


def stored_trials(exp: Experiment) -> int:
    """How many trials the experiment has stored (an index-only count)."""
    from humanlike.server.tables.core import Trial

    return int(db.session.execute(
        sa.select(sa.func.count()).select_from(Trial)
        .join(Participant, Trial.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id)).scalar_one())


def _table_order() -> list[str]:
    public = [table for t in TRIAL_TYPES.values() if not t.internal
              for table in (t.table, *(d.table for d in t.derived))]
    internal = [t.table for t in TRIAL_TYPES.values() if t.internal]
    return ["trials", *public, "trial_timing", "participants", "display", "stimuli", "events",
            *internal]


def export_frames(slug: str) -> dict[str, pd.DataFrame]:
    """All export tables of an experiment as DataFrames, in memory (inside an app context)."""
    exp = _experiment(slug)
    run = _Export(exp)
    trials = next(trial_chunks(exp, chunk_trials=None))
    frames = run.tables(trials)
    frames["participants"] = run.participant_frame()
    frames["display"] = run.calibrations
    frames["stimuli"] = run.stimuli
    frames["events"] = pd.concat(list(event_chunks(exp)), ignore_index=True)
    return {name: frames[name] for name in _table_order()}


def write_export(slug: str, out: Path, chunk_trials: int = CHUNK_TRIALS,
                 raw_parquet: bool = True, pseudonym_key: bytes | None = None,
                 tables: Collection[str] | None = None) -> dict[str, int]:
    """Stream every table into ``out`` as CSV and Parquet plus codebook.json; return row counts.

    CSV cells that a spreadsheet would run as a formula are neutralised; Parquet keeps the raw
    values unless ``raw_parquet`` is false. With ``pseudonym_key`` the platform, study and
    session ids are replaced by keyed pseudonyms in every table. With ``tables`` only those tables
    are written (the participants table's QC still comes from every trial)."""
    out.mkdir(parents=True, exist_ok=True)
    exp = _experiment(slug)
    run = _Export(exp, qc_process=stored_trials(exp) >= QC_PROCESS_TRIALS)
    sinks = {name: TableSink(out, name, raw_parquet) for name in _table_order()
             if tables is None or name in tables}
    writer = SinkWriter()  # the files are written on threads while the next chunks are built

    def write(name: str, frame: pd.DataFrame) -> None:
        if name not in sinks:
            return
        if pseudonym_key is not None:
            frame = pseudonymise_frame(frame, pseudonym_key, slug)
        writer.write(sinks[name], frame)

    try:
        for trials in trial_chunks(exp, chunk_trials):
            for name, frame in run.tables(trials).items():
                write(name, frame)
        write("participants", run.participant_frame())
        write("display", run.calibrations)
        write("stimuli", run.stimuli)
        for events in event_chunks(exp, chunk_trials):
            write("events", events)
        for name, frame in stored_record_tables(exp, tables).items():  # e.g. psiTurk's records
            sinks[name] = TableSink(out, name, raw_parquet)
            write(name, frame)
        writer.close()
    finally:
        run.close()
        try:
            writer.close()
        finally:
            for sink in sinks.values():
                sink.close()
    codebook = book.codebook()
    codebook["stored"] = stored_note(slug)
    if pseudonym_key is not None:
        codebook = pseudonymise_codebook(codebook)
    (out / "codebook.json").write_text(json.dumps(codebook, indent=2))
    return {name: sink.rows for name, sink in sinks.items()}
