"""The streamed export: equal to the in-memory one, the same at any chunk size, CSV cells that a
spreadsheet would run neutralised, and per-participant counts of attention events."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from humanlike.server.export.sink import is_formula_like
from humanlike.server.export.writer import _experiment, export_frames, trial_chunks, write_export
from tests.server.conftest import auth, enter
from tests.server.test_export import run_participant

HOSTILE = ['=HYPERLINK("http://evil.example","click")', "+1+1", "-2+3+cmd|' /C calc'!A0",
           "@SUM(A1:A2)", "\tcell", "\rcell"]


@pytest.fixture
def study(app):
    """Three completed participants with attention events and one hostile debrief answer each."""
    rng = np.random.default_rng(1)
    for i in range(3):
        c = app.test_client()
        pid, token = enter(c, f"PROLIFIC_PID=S{i}")
        for kind, value in [("blur", None)] * i + [("visibility", "hidden"), ("visibility", "visible"),
                                                    ("fullscreen_exit", None)] * (i % 2):
            assert c.post(f"/api/v1/participants/{pid}/events", headers=auth(token),
                          json={"type": kind, "value": value}).status_code == 201
        run_participant(c, pid, token, rng)
    return app


def plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Values as Python objects with one missing marker (None), whatever the dtypes."""
    frame = frame.reset_index(drop=True).astype(object)
    return frame.where(frame.notna(), None)


def test_streamed_export_equals_the_in_memory_one(study, tmp_path):
    with study.app_context():
        frames = export_frames("small")
        counts = write_export("small", tmp_path)
    assert counts == {name: len(frame) for name, frame in frames.items()}
    for name, frame in frames.items():
        stored = pd.read_parquet(tmp_path / f"{name}.parquet")
        pd.testing.assert_frame_equal(plain(stored), plain(frame), check_dtype=False, obj=name)
        csv = pd.read_csv(tmp_path / f"{name}.csv")
        assert list(csv.columns) == list(frame.columns) and len(csv) == len(frame), name


def test_chunking_at_a_tiny_size_gives_identical_files(study, tmp_path):
    with study.app_context():
        write_export("small", tmp_path / "one", chunk_trials=1)
        write_export("small", tmp_path / "big", chunk_trials=1_000_000)
    names = sorted(p.name for p in (tmp_path / "big").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "one").iterdir()) and "ratings.csv" in names
    for name in names:
        if name.endswith(".parquet"):
            assert pq.read_table(tmp_path / "one" / name).equals(pq.read_table(tmp_path / "big" / name)), name
        else:
            assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "big" / name).read_bytes(), name
    assert pq.ParquetFile(tmp_path / "one" / "ratings.parquet").num_row_groups == 3  # one per participant


def test_chunks_hold_whole_participants(study):
    with study.app_context():
        chunks = list(trial_chunks(_experiment("small"), chunk_trials=5))
    seen = [set(chunk["participant"]) for chunk in chunks]
    assert len(chunks) == 3 and all(len(s) == 1 for s in seen) and len(set.union(*seen)) == 3


def test_attention_events_are_counted_per_participant(study, tmp_path):
    with study.app_context():
        write_export("small", tmp_path)
    people = pd.read_csv(tmp_path / "participants.csv").set_index("platform_id")
    assert people.loc[["S0", "S1", "S2"], "n_blur"].tolist() == [0, 1, 2]
    assert people.loc[["S0", "S1", "S2"], "n_hidden"].tolist() == [0, 1, 0]
    assert people.loc[["S0", "S1", "S2"], "n_fullscreen_exit"].tolist() == [0, 1, 0]


def test_formula_cells_are_neutralised_in_csv_and_kept_raw_in_parquet(app, tmp_path):
    c = app.test_client()
    pid, token = enter(c, "PROLIFIC_PID=EVIL")
    c.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    tl = c.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    debrief = next(t for t in tl["trials"] if t["type"] == "debrief")
    answers = {f"q{i}": text for i, text in enumerate([*HOSTILE, "-3.5", "fine"])}
    assert c.post(f"/api/v1/participants/{pid}/trials", headers=auth(token), json={
        "trial_index": debrief["index"], "trial_type": "debrief",
        "response": {"answers": answers}}).status_code == 201
    with app.app_context():
        write_export("small", tmp_path / "raw")
        write_export("small", tmp_path / "safe", raw_parquet=False)
    csv = pd.read_csv(tmp_path / "raw" / "debrief.csv", keep_default_na=False)
    exported = dict(zip(csv["question"], csv["answer"]))
    for i, text in enumerate(HOSTILE):
        assert exported[f"q{i}"] == "'" + text and not is_formula_like(exported[f"q{i}"])
    assert exported[f"q{len(HOSTILE)}"] == "-3.5" and exported[f"q{len(HOSTILE) + 1}"] == "fine"
    raw = pd.read_parquet(tmp_path / "raw" / "debrief.parquet")
    assert sorted(raw["answer"]) == sorted(answers.values())
    safe = pd.read_parquet(tmp_path / "safe" / "debrief.parquet")
    assert sorted(safe["answer"]) == sorted(
        "'" + a if is_formula_like(a) else a for a in answers.values())


@pytest.mark.parametrize("value, expected", [
    ("=1+1", True), ("+cmd", True), ("-2+3", True), ("@SUM(A1)", True), ("\tx", True), ("\rx", True),
    ("-3.5", False), ("+1e3", False), ("abc", False), ("", False), (3, False), (None, False),
])
def test_formula_like_cells(value, expected):
    assert is_formula_like(value) is expected


def test_export_cli_can_neutralise_parquet_too(app, database_url, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from humanlike.cli import main

    c = app.test_client()
    pid, token = enter(c, "PROLIFIC_PID=CLI")
    c.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    tl = c.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    debrief = next(t for t in tl["trials"] if t["type"] == "debrief")
    c.post(f"/api/v1/participants/{pid}/trials", headers=auth(token), json={
        "trial_index": debrief["index"], "trial_type": "debrief",
        "response": {"answers": {"q": "=1+1"}}})
    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path))
    result = CliRunner().invoke(main, ["export", "small", "--out", str(tmp_path / "o"),
                                       "--neutralise-parquet", "--database-url", database_url])
    assert result.exit_code == 0, result.output
    assert list(pd.read_parquet(tmp_path / "o" / "debrief.parquet")["answer"]) == ["'=1+1"]
