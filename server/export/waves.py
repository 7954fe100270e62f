"""The waves of a longitudinal study exported together: every table of waves 1..k (each wave an
experiment whose ``[recruitment.prolific]`` names ``wave`` and ``previous_wave``, stored with its
listing at ``create``) stacked, with a
``wave`` column first. Pseudonyms are keyed with wave 1's slug for every wave, so one participant
(one Prolific id) has the same pseudonym in all waves and the waves join on ``platform_id``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from humanlike.server.export import codebook as book
from humanlike.server.export.sink import TableSink
from humanlike.server.export.writer import export_frames
from humanlike.server.extensions import db
from humanlike.server.rights.pseudonyms import pseudonymise_codebook, pseudonymise_frame
from humanlike.server.study import experiments
from humanlike.server.tables.core import Experiment

WAVE_NOTE = ("the wave of the longitudinal study this row comes from (1, 2, ...: "
             "recruitment.prolific.wave of its experiment)")


def wave_of(exp: Experiment) -> tuple[int, str | None]:
    """(wave, previous_wave) of a served experiment: as stored when its listing was created
    (``recruitment_meta``), else from its spec file as served here; (1, None) when neither says."""
    meta = exp.recruitment_meta or {}
    if "wave" in meta:
        return int(meta["wave"]), meta.get("previous_wave")
    loaded = experiments.registry().get(exp.slug)
    table = loaded.spec.recruitment.prolific if loaded and loaded.spec.recruitment else None
    if table is None:
        return 1, None
    return table.wave or 1, table.previous_wave


def wave_series(slug: str) -> list[tuple[int, str]]:
    """(wave, slug) of wave 1 up to ``slug``, following ``previous_wave``; a LookupError names a
    missing wave, a wave number that does not count down by one, or a loop."""
    series: list[tuple[int, str]] = []
    current: str | None = slug
    while current is not None:
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == current)
                                 ).scalar_one_or_none()
        if exp is None:
            named = f" (previous_wave of {series[-1][1]!r})" if series else ""
            raise LookupError(f"no experiment {current!r} is served here{named}")
        wave, previous = wave_of(exp)
        if series and wave != series[-1][0] - 1:
            raise LookupError(f"{series[-1][1]!r} is wave {series[-1][0]} but its previous_wave "
                              f"{current!r} is wave {wave}, not {series[-1][0] - 1}")
        if any(s == current for _, s in series):
            raise LookupError(f"previous_wave loops back to {current!r}")
        series.append((wave, current))
        current = previous
    if series[-1][0] != 1:
        raise LookupError(f"{series[-1][1]!r} is wave {series[-1][0]} and names no previous_wave")
    return series[::-1]


def wave_frames(slug: str, pseudonym_key: bytes | None = None) -> dict[str, pd.DataFrame]:
    """Every export table of all waves up to ``slug``, stacked with a ``wave`` column (inside an
    app context); ids pseudonymised with wave 1's slug when ``pseudonym_key`` is given."""
    series = wave_series(slug)
    first = series[0][1]
    stacked: dict[str, list[pd.DataFrame]] = {}
    for wave, each in series:
        for name, frame in export_frames(each).items():
            if pseudonym_key is not None:
                frame = pseudonymise_frame(frame, pseudonym_key, first)
            stacked.setdefault(name, []).append(frame.assign(wave=wave)[
                ["wave", *[c for c in frame.columns if c != "wave"]]])
    return {name: pd.concat(frames, ignore_index=True) for name, frames in stacked.items()}


def write_wave_export(slug: str, out: Path, pseudonym_key: bytes | None = None) -> dict[str, int]:
    """``wave_frames`` as CSV and Parquet files and codebook.json (``wave`` described) in ``out``; row counts."""
    out.mkdir(parents=True, exist_ok=True)
    frames = wave_frames(slug, pseudonym_key)
    counts = {}
    for name, frame in frames.items():  # CSV cells a spreadsheet would run are neutralised
        sink = TableSink(out, name, raw_parquet=True)
        try:
            sink.write(frame)
        finally:
            sink.close()
        counts[name] = sink.rows
    codebook = {table: {"wave": WAVE_NOTE, **columns} for table, columns in book.codebook().items()}
    if pseudonym_key is not None:
        codebook = pseudonymise_codebook(codebook)
    (out / "codebook.json").write_text(json.dumps(codebook, indent=2))
    return counts
