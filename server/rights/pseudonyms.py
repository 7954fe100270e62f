"""Pseudonyms for exports and the audit log: platform, study and session ids replaced by a keyed
hash per experiment (HMAC-SHA256 over ``slug NUL id``), stable across exports with the same key."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import pandas as pd

#: Hex digits kept in an exported pseudonym (64 bits: collisions are negligible within a study).
PSEUDONYM_HEX = 16
#: Export columns that hold platform identifiers.
ID_COLUMNS = ("platform_id", "study_id", "session_id")
PREFIX = "pn-"
_PURPOSE = b"humanlike pseudonym key v1"
MIN_KEY_BYTES = 16


def key_from_secret(secret_key: str | bytes) -> bytes:
    """The pseudonym key derived from the app's SECRET_KEY (HMAC-SHA256, so the secret is not reused)."""
    secret = secret_key.encode() if isinstance(secret_key, str) else secret_key
    return hmac.new(secret, _PURPOSE, hashlib.sha256).digest()


def key_from_file(path: Path) -> bytes:
    """The pseudonym key read from a file (surrounding whitespace ignored); at least 16 bytes."""
    key = path.read_bytes().strip()
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{path}: a pseudonym key needs at least {MIN_KEY_BYTES} bytes")
    return key


def keyed_hash(key: bytes, slug: str, value: str) -> str:
    """HMAC-SHA256(key, slug NUL value) as 64 hex digits."""
    message = slug.encode() + b"\x00" + value.encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def pseudonym(key: bytes, slug: str, value: str) -> str:
    """``PREFIX`` + the first ``PSEUDONYM_HEX`` digits of the keyed hash (the prefix keeps CSV
    readers from taking a pseudonym such as ``4745686079e23652`` for a number)."""
    return PREFIX + keyed_hash(key, slug, value)[:PSEUDONYM_HEX]


def pseudonymise_frame(frame: pd.DataFrame, key: bytes, slug: str) -> pd.DataFrame:
    """A copy of an export table with every id column replaced by its pseudonym (NULLs stay, and so
    do ids already replaced by ``humanlike retention``, which stores this very pseudonym)."""
    present = [c for c in ID_COLUMNS if c in frame.columns]
    if not present:
        return frame
    frame = frame.copy()
    for column in present:
        frame[column] = [None if pd.isna(v) else str(v) if str(v).startswith(PREFIX)
                         else pseudonym(key, slug, str(v)) for v in frame[column]]
    return frame


def pseudonymise_codebook(codebook: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The codebook with the id columns described as pseudonyms."""
    note = (f"pseudonym: '{PREFIX}' + the first {PSEUDONYM_HEX} hex digits of HMAC-SHA256 of the "
            "experiment slug and the {} (same key -> same pseudonym across exports)")
    return {table: {col: note.format(col) if col in ID_COLUMNS else text
                    for col, text in columns.items()}
            for table, columns in codebook.items()}
