"""The trial table's one home (``humanlike.server.participants.trial_store``): migration 0011's practice column,
the one streamed reader (whole participants, every row, typed columns), the override rule stated
once in SQL and once in pandas, the export's QC in a worker process and its CSV neutralising."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import secrets

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from flask_migrate import upgrade

from humanlike.server import create_app, database
from humanlike.server.export import writer as export
from humanlike.server.export.sink import _FORMULA, _NUMBER_FULL, neutralise_csv_cells
from humanlike.server.extensions import db
from humanlike.server.participants import overrides, trial_store
from humanlike.server.tables.core import (
    Experiment,
    JSONType,
    Participant,
    ParticipantQC,
    Stimulus,
    Trial,
)
from humanlike.server.trial_types import responses as parsed
from humanlike.server.trial_types.registry import rated_types
from humanlike.vocabulary import AnalysisOverride

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

# --------------------------------------------------------------------------- migration 0011

EXPERIMENT = sa.table("experiment", *(sa.column(c) for c in (
    "id", "slug", "title", "spec_hash", "root", "status", "platform")),
    sa.column("spec", JSONType), sa.column("created_at", sa.DateTime(timezone=True)))
PARTICIPANT = sa.table("participant", *(sa.column(c) for c in (
    "id", "public_id", "experiment_id", "platform", "platform_id", "condition", "token_hash",
    "seed", "n_trials", "status")), sa.column("timeline", JSONType),
    sa.column("created_at", sa.DateTime(timezone=True)))
DESIGNS = {  # practice value in the design -> what the column must hold (bool(design.get(...)))
    "true": (True, True), "false": (False, False), "missing": (None, False), "null": (None, False),
    "one": (1, True), "zero": (0, False), "zero_float": (0.0, False), "text": ("yes", True),
    "empty_text": ("", False), "list": ([1], True), "empty_list": ([], False),
    "object": ({"a": 1}, True), "empty_object": ({}, False),
}


def test_migration_0011_backfills_practice_from_each_design(database_url):
    application = create_app({"TESTING": True, "SECRET_KEY": "t",
                              "SQLALCHEMY_DATABASE_URI": database_url, "EXPERIMENT_PATHS": []})
    try:
        with application.app_context():
            upgrade(revision="0010")
            trial = sa.table("trial", sa.column("participant_id"), sa.column("trial_index"),
                             sa.column("trial_type"), sa.column("design", JSONType),
                             sa.column("block"), sa.column("response", JSONType),
                             sa.column("is_repeat"),
                             sa.column("server_time", sa.DateTime(timezone=True)))
            with db.engine.begin() as conn:
                conn.execute(sa.insert(EXPERIMENT).values(
                    id=1, slug="old", title="Old", spec={}, spec_hash="h", root="/",
                    status="live", platform="local", created_at=NOW))
                conn.execute(sa.insert(PARTICIPANT).values(
                    id=1, public_id="p1", experiment_id=1, platform="local", platform_id="p1",
                    condition="A", token_hash="t", seed=1, timeline={}, n_trials=len(DESIGNS),
                    status="started", created_at=NOW))
                for index, (name, (value, _)) in enumerate(DESIGNS.items()):
                    design = {"type": "rating", "block": "b", "name": name}
                    if name != "missing":
                        design["practice"] = value
                    conn.execute(sa.insert(trial).values(
                        participant_id=1, trial_index=index, trial_type="rating", design=design,
                        block="b", response={"ratings": {}}, is_repeat=False, server_time=NOW))
            upgrade()
            rows = db.session.execute(sa.select(Trial.design, Trial.practice)).all()
            column = {c["name"]: c for c in sa.inspect(db.engine).get_columns("trial")}["practice"]
    finally:
        database.dispose(application)
    assert {design["name"]: practice for design, practice in rows} == {
        name: expected for name, (_, expected) in DESIGNS.items()}
    assert column["nullable"] is False


def test_an_insert_without_practice_takes_its_designs_flag(app):
    """Inserts that name no ``practice`` (bulk loads, tests) get ``bool(design.get('practice'))``."""
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        person = _participant(exp, "x")
        db.session.execute(sa.insert(Trial), [
            {"participant_id": person.id, "trial_index": i, "trial_type": "rating",
             "design": design, "response": {"ratings": {}}, "is_repeat": False,
             "server_time": NOW}
            for i, design in enumerate([{"practice": True}, {"practice": False}, {}])])
        db.session.add(Trial(participant_id=person.id, trial_index=3, trial_type="rating",
                             design={"practice": 1}, response={}, server_time=NOW))
        db.session.commit()
        stored = db.session.execute(sa.select(Trial.practice).order_by(Trial.trial_index)).scalars()
        assert list(stored) == [True, False, False, True]


# --------------------------------------------------------------------------- the reader


def _participant(exp: Experiment, name: str, **values) -> Participant:
    person = Participant(public_id=secrets.token_hex(8), experiment_id=exp.id, platform="local",
                         platform_id=name, condition="A", token_hash="0" * 64, seed=1,
                         timeline={}, n_trials=0, status="completed", created_at=NOW, **values)
    db.session.add(person)
    db.session.flush()
    return person


TRIAL_COUNTS = [5, 1, 0, 12, 3, 7, 2]


@pytest.fixture
def stored(app):
    """Participants with the trial counts of ``TRIAL_COUNTS``, stored out of order, some without
    a stimulus, a repeat, practice trials and a trial of another type."""
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        stimuli = db.session.execute(sa.select(Stimulus.id).where(
            Stimulus.experiment_id == exp.id).order_by(Stimulus.id)).scalars().all()
        rows = []
        for j, n in enumerate(TRIAL_COUNTS):
            person = _participant(exp, f"r{j}")
            for i in range(n):
                rows.append({
                    "participant_id": person.id, "trial_index": i,
                    "trial_type": "debrief" if i == n - 1 and j == 3 else "rating",
                    "design": {"practice": i == 0, "block": "ratings"}, "block": "ratings",
                    "stimulus_id": None if i % 4 == 3 else stimuli[i % len(stimuli)],
                    "response": {"ratings": {str(d): d / 10 for d in range(10)}},
                    "rt_ms": None if i == 2 else 100.0 * i, "frames": 60 if i % 2 else None,
                    "is_repeat": i == 4, "repeat_of": 1 if i == 4 else None,
                    "server_time": NOW + dt.timedelta(seconds=i, microseconds=j)})
        rows.reverse()
        db.session.execute(sa.insert(Trial), rows)
        db.session.commit()
    return app


FIELDS = ("participant", "trial_index", "trial_type", "stimulus", "stimulus_id", "rt_ms",
          "frames", "is_repeat", "repeat_of", "practice", "server_time", "response", "design")


@pytest.mark.parametrize("chunk_rows", [1, 3, 7, 20, None])
def test_the_reader_returns_every_row_in_whole_participants(stored, chunk_rows):
    with stored.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        chunks = list(trial_store.trial_chunks(FIELDS, experiment_id=exp.id, chunk_rows=chunk_rows))
        expected = db.session.execute(sa.select(Participant.public_id, Trial.trial_index).join(
            Participant).order_by(Trial.participant_id, Trial.trial_index)).all()
    got = [(p, i) for c in chunks for p, i in zip(c["participant"], c["trial_index"])]
    assert got == [tuple(r) for r in expected] and len(got) == sum(TRIAL_COUNTS)
    owners = [set(c["participant"]) for c in chunks]
    assert all(not (a & b) for a, b in itertools.combinations(owners, 2))  # never split
    if chunk_rows is not None:  # cut at the last whole participant once chunk_rows are read
        assert all(len(c) < 2 * chunk_rows or c["participant"].nunique() == 1 for c in chunks)
    else:
        assert len(chunks) == 1


@pytest.mark.parametrize("chunk_rows", [1, 3, 7, None])
def test_the_reader_cuts_the_same_chunks_however_many_participants_a_query_reads(
        stored, chunk_rows, monkeypatch):
    """An ordered reader reads a few participants per query; its chunks are those of one query
    over the whole study (the export's Parquet row groups follow them)."""
    def chunks(per_query: int) -> list[list[tuple[str, int]]]:
        monkeypatch.setattr(trial_store, "IDS_PER_QUERY", per_query)
        with stored.app_context():
            exp = db.session.execute(sa.select(Experiment)).scalar_one()
            return [list(zip(c["participant"], c["trial_index"])) for c in trial_store.trial_chunks(
                ("participant", "trial_index"), experiment_id=exp.id, chunk_rows=chunk_rows)]

    assert chunks(1) == chunks(2) == chunks(10_000)


def test_the_readers_columns_are_typed_and_hold_the_stored_values(stored):
    with stored.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        frame = next(trial_store.trial_chunks(FIELDS, experiment_id=exp.id, chunk_rows=None))
        orm = db.session.execute(sa.select(Trial).order_by(Trial.participant_id,
                                                            Trial.trial_index)).scalars().all()
        empty = next(trial_store.trial_chunks(FIELDS, experiment_id=exp.id, participant_ids=[]))
    dtypes = frame.dtypes.astype(str).to_dict()
    assert dtypes["trial_index"] == "int64" and dtypes["rt_ms"] == "float64"
    assert dtypes["frames"] == dtypes["repeat_of"] == dtypes["stimulus_id"] == "Int64"
    assert dtypes["is_repeat"] == dtypes["practice"] == "bool"
    assert dtypes["server_time"] == "datetime64[us, UTC]" and dtypes["participant"] == "str"
    assert list(frame["practice"]) == [t.practice for t in orm]
    assert list(frame["is_repeat"]) == [t.is_repeat for t in orm]
    assert [None if pd.isna(v) else v for v in frame["rt_ms"]] == [t.rt_ms for t in orm]
    assert [None if pd.isna(v) else v for v in frame["frames"]] == [t.frames for t in orm]
    assert parsed.json_values(frame["response"]) == [t.response for t in orm]
    assert parsed.json_values(frame["design"]) == [t.design for t in orm]
    assert [t.to_pydatetime() for t in frame["server_time"]] == [
        (t.server_time if t.server_time.tzinfo else t.server_time.replace(tzinfo=dt.UTC))
        for t in orm]
    assert empty.empty and empty.dtypes.astype(str).to_dict() == dtypes  # typed although empty


def test_the_unordered_reader_returns_every_rated_row_in_fixed_size_chunks(stored):
    with stored.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        chunks = list(trial_store.trial_chunks(
            ["trial_index", "response"], experiment_id=exp.id, trial_types=rated_types(),
            ordered=False, chunk_rows=4))
        n = db.session.execute(sa.select(sa.func.count()).select_from(Trial).where(
            Trial.trial_type.in_(rated_types()))).scalar_one()
    assert [len(c) for c in chunks[:-1]] == [4] * (len(chunks) - 1) and 0 < len(chunks[-1]) <= 4
    assert sum(map(len, chunks)) == n


def test_rating_values_parse_text_and_objects_alike():
    labels = ["b", "a", "c"]
    responses = [{"ratings": {"a": 0.25, "b": 1, "c": 0.1}}, {"ratings": {"a": 0, "b": 0.5}}]
    texts = [json.dumps(r) for r in responses]
    expected = np.array([[1.0, 0.25, 0.1], [0.5, 0.0, np.nan]])
    np.testing.assert_array_equal(parsed.rating_values(texts, labels), expected)
    np.testing.assert_array_equal(parsed.rating_values(responses, labels), expected)
    assert parsed.rating_values([], labels).shape == (0, 3)


# --------------------------------------------------------------------------- the override rule

OVERRIDES = [None, AnalysisOverride.INCLUDE.value, AnalysisOverride.EXCLUDE.value]
QC_FAILED = [None, False, True]


def test_the_override_rule_in_sql_and_in_pandas_agree_on_every_combination(app):
    combos = list(itertools.product(OVERRIDES, QC_FAILED))
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        for k, (decision, failed) in enumerate(combos):
            person = _participant(exp, f"o{k}", analysis_override=decision,
                                  analysis_override_reason=f"why {k}" if decision else None)
            if failed is not None:
                db.session.add(ParticipantQC(participant_id=person.id, experiment_id=exp.id,
                                             n_stored=0, qc_failed=failed, n_blur=0,
                                             n_fullscreen_exit=0,
                                             qc_reasons="catch_accuracy 0 < 0.5" if failed else ""))
        db.session.commit()
        clause = overrides.excluded_clause(Participant.analysis_override, ParticipantQC.qc_failed)
        rows = db.session.execute(
            sa.select(Participant.platform_id, Participant.analysis_override,
                      Participant.analysis_override_reason, ParticipantQC.qc_failed,
                      ParticipantQC.qc_reasons, clause.label("sql"), (~clause).label("not_sql"))
            .outerjoin(ParticipantQC, ParticipantQC.participant_id == Participant.id)
            .order_by(Participant.id)).all()
    frame = pd.DataFrame(rows, columns=["who", "override", "why", "qc_failed", "qc_reasons",
                                        "sql", "not_sql"])
    excluded, reasons = overrides.decide(frame["override"], frame["why"], frame["qc_failed"],
                                         frame["qc_reasons"])
    assert len(frame) == 9
    assert [bool(v) for v in frame["sql"]] == list(excluded)
    assert [bool(v) for v in frame["not_sql"]] == [not v for v in excluded]  # never NULL
    expected = {(d, f): d == "exclude" or (f is True and d != "include") for d, f in combos}
    assert list(excluded) == [expected[c] for c in combos]
    assert list(reasons) == [
        ("researcher: " + f"why {k}" + (";catch_accuracy 0 < 0.5" if f else "")) if d == "exclude"
        else ("researcher include: " + f"why {k}" + (";catch_accuracy 0 < 0.5" if f else ""))
        if d == "include" else ("catch_accuracy 0 < 0.5" if f else "")
        for k, (d, f) in enumerate(combos)]


def test_the_override_rule_for_one_participant_agrees_with_the_pandas_rule_on_every_combination():
    """The dashboard's page rows ask ``overrides.excluded`` (one participant); it says what
    ``decide`` says for every decision and QC outcome (QC None: no QC row)."""
    combos = list(itertools.product(OVERRIDES, QC_FAILED))
    frame = pd.DataFrame(combos, columns=["override", "qc_failed"])
    empty = pd.Series([""] * len(frame))
    excluded, _ = overrides.decide(frame["override"], empty, frame["qc_failed"], empty)
    assert [overrides.excluded(d, f) for d, f in combos] == list(excluded)
    assert [overrides.excluded(d, f) for d, f in combos] == [
        d == "exclude" or (f is True and d != "include") for d, f in combos]


# --------------------------------------------------------------------------- the export


def test_the_export_computes_the_same_qc_in_a_worker_process(app, tmp_path, monkeypatch):
    """Above ``QC_PROCESS_TRIALS`` stored trials the QC runs in a forked worker process (when
    this process runs no other thread); the files are those of the QC computed in-process."""
    import threading

    from tests.server.conftest import enter
    from tests.server.test_export import run_participant

    rng = np.random.default_rng(5)
    for i in range(3):
        c = app.test_client()
        pid, token = enter(c, f"PROLIFIC_PID=W{i}")
        run_participant(c, pid, token, rng)
    with app.app_context():
        export.write_export("small", tmp_path / "here", chunk_trials=10)
        monkeypatch.setattr(export, "QC_PROCESS_TRIALS", 0)
        pools = []
        monkeypatch.setattr(export, "_qc_pool", lambda *a, f=export._qc_pool: pools.append(
            f(*a)) or pools[-1])
        export.write_export("small", tmp_path / "worker", chunk_trials=10)
    assert len(pools) == 1 and (pools[0] is not None or threading.active_count() > 1)
    for name in sorted(p.name for p in (tmp_path / "here").iterdir()):
        if name.endswith(".csv") or name.endswith(".json"):
            assert (tmp_path / "here" / name).read_bytes() == (
                tmp_path / "worker" / name).read_bytes(), name


CELLS = ["=1+1", "+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx", "-3.5", "+1e3", "-.5", "abc", "", None,
         "é=", "=é", "'=x", " =x", "-", "+", "1-2", "=", "-1e-7", "--1", "@", "x\n=y"]


@pytest.mark.parametrize("large", [False, True])
def test_csv_neutralising_matches_the_regex_rule_cell_by_cell(large):
    """The first-byte check that finds formula-like cells gives what the two regular expressions
    (``_FORMULA`` and not ``_NUMBER_FULL``) give, sliced and chunked arrays and nulls included."""
    kind = pa.large_string() if large else pa.string()
    column = pa.chunked_array([pa.array(CELLS, kind).slice(2), pa.array(CELLS[:5], kind),
                               pa.array([], kind)])
    table = pa.table({"text": column, "n": pa.array(range(len(column)), pa.int64())})
    risky = pc.and_(pc.match_substring_regex(column, _FORMULA.pattern),
                    pc.invert(pc.match_substring_regex(column, _NUMBER_FULL.pattern)))
    quoted = pc.binary_join_element_wise(pa.scalar("'", kind), column, pa.scalar("", kind))
    expected = pc.if_else(risky, quoted, column)
    got = neutralise_csv_cells(table)
    assert got.column("text").to_pylist() == expected.to_pylist()
    assert got.column("n").equals(table.column("n"))
