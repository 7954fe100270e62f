"""Stimulus manifests: a CSV of ``file, kind, true_class`` plus metadata columns, checked on load."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from humanlike.server.study.spec import SpecError
from humanlike.vocabulary import STIMULUS_KINDS, StimulusKind

CORE_COLUMNS = ("file", "kind", "true_class")


@dataclass(frozen=True)
class StimulusRecord:
    """One manifest row: its key (path relative to the manifest), kind, class, hash and metadata."""

    key: str
    kind: str
    true_class: str | None
    sha256: str
    meta: dict[str, Any] = field(default_factory=dict)


def _coerce(value: str) -> Any:
    """Metadata cells become int or float when they look like one, else stay text ('' -> None)."""
    if value == "":
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_mlds_row(path: Path, row_no: int, row: dict[str, Any], columns: Sequence[str]) -> None:
    """An MLDS row needs a non-empty ``sequence`` and an integer ``level`` (1-based)."""
    for needed in ("sequence", "level"):
        if needed not in columns:
            raise SpecError(f"{path}: mlds stimuli need a column '{needed}' (columns: {columns})")
    if not (row.get("sequence") or "").strip():
        raise SpecError(f"{path}: row {row_no}: column 'sequence' is empty (mlds rows need one)")
    level = (row.get("level") or "").strip()
    try:
        value = int(level)
    except ValueError:
        value = 0
    if value < 1:
        raise SpecError(
            f"{path}: row {row_no}: column 'level' is {level!r}, expected an integer >= 1"
        )


def read_manifest(path: str | Path) -> list[StimulusRecord]:
    """Load a manifest; raise ``SpecError`` naming the file, row and column of any problem."""
    path = Path(path)
    root = path.parent.resolve()
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        columns = reader.fieldnames or []
        for needed in ("file", "kind"):
            if needed not in columns:
                raise SpecError(f"{path}: missing column '{needed}' (columns: {columns})")
        records: list[StimulusRecord] = []
        seen: set[str] = set()
        for row_no, row in enumerate(reader, start=2):
            key = (row.get("file") or "").strip()
            kind = (row.get("kind") or "").strip()
            if not key:
                raise SpecError(f"{path}: row {row_no}: column 'file' is empty")
            if kind not in STIMULUS_KINDS:
                raise SpecError(
                    f"{path}: row {row_no}: column 'kind' is {kind!r}, expected one of {STIMULUS_KINDS}"
                )
            target = (root / key).resolve()
            if not target.is_relative_to(root):
                raise SpecError(f"{path}: row {row_no}: file {key!r} lies outside the manifest folder")
            if not target.is_file():
                raise SpecError(f"{path}: row {row_no}: file {key!r} not found")
            if key in seen:
                raise SpecError(f"{path}: row {row_no}: file {key!r} listed twice")
            seen.add(key)
            true_class = (row.get("true_class") or "").strip() or None
            meta = {k: _coerce(v or "") for k, v in row.items() if k not in CORE_COLUMNS and k}
            if kind == StimulusKind.MLDS:
                _check_mlds_row(path, row_no, row, columns)
            records.append(StimulusRecord(key, kind, true_class, sha256_of(target), meta))
    if not records:
        raise SpecError(f"{path}: the manifest lists no stimuli")
    return records
