"""Writing a Psych-DS dataset's parts: ``dataset_description.json`` (schema.org JSON-LD, every
column of every data file in ``variableMeasured``) and data files named by keywords
(``data/study-<slug>_description-<table>_data.csv``). Facts from the Psych-DS 1.0 schema:
keywords are lower-case letters, values letters and digits, the file ends in ``_data.csv``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

#: The keywords the Psych-DS schema names (others are allowed, with a warning).
OFFICIAL_KEYWORDS = ("study", "site", "subject", "session", "task", "condition", "trial",
                     "stimulus", "description")

NEVER_PUBLISHED = ("platform_id", "study_id", "session_id", "user_agent", "completion_code")
"""Columns no published table keeps: the recruitment platform's ids of a person, of the study and
of the session, the browser's User-Agent, and the completion code that proves a submission."""

#: schema.org's namespace, the one Psych-DS metadata is written in.
SCHEMA_ORG = "https://schema.org/"


def keyword_value(text: object) -> str:
    """``text`` as a Psych-DS keyword value: its letters and digits only (``ValueError`` if none)."""
    value = re.sub(r"[^A-Za-z0-9]", "", str(text))
    if not value:
        raise ValueError(f"{text!r} has no letter or digit to name a Psych-DS file with")
    return value


def datafile_name(study: str, description: str) -> str:
    """``study-<study>_description-<description>_data.csv`` (both as keyword values)."""
    return f"study-{keyword_value(study)}_description-{keyword_value(description)}_data.csv"


def public_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the :data:`NEVER_PUBLISHED` columns."""
    return frame.drop(columns=[c for c in NEVER_PUBLISHED if c in frame.columns])


def write_datafile(frame: pd.DataFrame, path: Path) -> Path:
    """One data file: UTF-8 CSV with a header row, '.' decimals, no index (Psych-DS CSV rules)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, encoding="utf-8", lineterminator="\n")
    return path


def variable_measured(columns: Iterable[str],
                      descriptions: Mapping[str, str]) -> list[dict[str, str]]:
    """One schema.org ``PropertyValue`` per column (first seen order), described from the
    codebook where it has the column."""
    seen: dict[str, dict[str, str]] = {}
    for column in columns:
        if column not in seen:
            item = {"@type": "PropertyValue", "name": column}
            if descriptions.get(column):
                item["description"] = descriptions[column]
            seen[column] = item
    return list(seen.values())


LICENSES = {
    "CC0-1.0": "https://creativecommons.org/publicdomain/zero/1.0/",
    "CC-BY-4.0": "https://creativecommons.org/licenses/by/4.0/",
    "CC-BY-SA-4.0": "https://creativecommons.org/licenses/by-sa/4.0/",
    "CC-BY-NC-4.0": "https://creativecommons.org/licenses/by-nc/4.0/",
    "ODC-By-1.0": "https://opendatacommons.org/licenses/by/1-0/",
    "PDDL-1.0": "https://opendatacommons.org/licenses/pddl/1-0/",
}
"""Licences ``humanlike publish --license`` offers (SPDX identifier -> the licence's page)."""


def dataset_description(
    *,
    name: str,
    description: str,
    variables: Sequence[Mapping[str, str]],
    license: str,
    authors: Sequence[str] = (),
    keywords: Sequence[str] = (),
    citation: str | None = None,
    date_published: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``dataset_description.json`` object: a schema.org ``Dataset`` with the fields the
    Psych-DS schema requires (name, description, variableMeasured) and recommends (author,
    citation, license, keywords)."""
    record: dict[str, Any] = {
        "@context": SCHEMA_ORG,
        "@type": "Dataset",
        "name": name,
        "description": description,
        "schemaVersion": "Psych-DS 1.0.0",
        "license": LICENSES.get(license, license),
        "variableMeasured": [dict(v) for v in variables],
        "keywords": list(keywords),
        "author": [{"@type": "Person", "name": a} for a in authors],
    }
    if citation:
        record["citation"] = citation
    if date_published:
        record["datePublished"] = date_published
    record.update(extra or {})
    return record
