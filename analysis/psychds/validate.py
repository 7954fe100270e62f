"""A Psych-DS check written from the published schema (Psych-DS 1.0, the rules of the official
validator's ``defaultSchema.json``; the official validator does not install from a package
registry). Issue codes are the schema's, so a report reads like the official one.

Errors: no ``dataset_description.json`` at the root or not UTF-8 JSON; no schema.org
``@context``; no or another ``@type`` than ``Dataset``; no ``data/`` folder; no data file; a data
file not named ``keyword-value(_keyword-value)*_data.csv``; a required field (name, description,
variableMeasured) missing from a data file's compiled metadata (``dataset_description.json``, then
each ``file_metadata.json`` from ``data/`` down, then the file's ``.json`` sidecar, each key
replaced wholesale); a CSV that is not UTF-8, has no header, repeats a header, has a row of another
length than its header, repeats a ``row_id`` value, or has a column ``variableMeasured`` does not
name. Warnings: unofficial keywords, recommended fields and folders missing, empty files, files
the schema does not cover, variables no data file has."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from humanlike.analysis.psychds.dataset import OFFICIAL_KEYWORDS

DATAFILE = re.compile(r"([a-z]+-[a-zA-Z0-9]+)(_[a-z]+-[a-zA-Z0-9]+)*_data\.csv")
"""A data file's name (the schema's ``fileRegex``; the schema's data files are CSV only)."""
REQUIRED = ("name", "description", "variableMeasured")
RECOMMENDED = ("author", "citation", "license", "funder", "url", "identifier", "privacyPolicy",
               "keywords")
RECOMMENDED_FOLDERS = ("analysis", "results", "materials", "documentation")
SCHEMA_ORG_CONTEXTS = {"http://schema.org", "https://schema.org", "http://schema.org/",
                       "https://schema.org/"}
DATASET_TYPES = {"Dataset", "schema:Dataset", "http://schema.org/Dataset",
                 "https://schema.org/Dataset"}


@dataclass(frozen=True)
class Issue:
    """One finding: the schema's code, ``error`` or ``warning``, the file and what is wrong."""

    code: str
    level: str
    path: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.level.upper()} {self.code} {self.path}" + (
            f": {self.detail}" if self.detail else "")


@dataclass
class Validation:
    """Every issue found; the dataset is valid when none is an error."""

    root: Path
    issues: list[Issue] = field(default_factory=list)
    datafiles: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.level == "error"]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if i.level == "warning"]

    @property
    def valid(self) -> bool:
        return not self.errors

    def add(self, code: str, level: str, path: Path | str, detail: str = "") -> None:
        rel = path.relative_to(self.root).as_posix() if isinstance(path, Path) else path
        self.issues.append(Issue(code, level, "/" + rel.lstrip("/"), detail))

    def summary(self) -> str:
        """'This dataset appears to be Psych-DS compatible' or not, then one line per issue."""
        head = ("This dataset appears to be Psych-DS compatible" if self.valid else
                "This dataset does not appear to be Psych-DS compatible")
        return "\n".join([f"{head} ({len(self.datafiles)} data files, {len(self.errors)} errors, "
                          f"{len(self.warnings)} warnings)", *map(str, self.issues)])


def _read_json(path: Path, report: Validation) -> dict[str, Any] | None:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        report.add("JSON_ENCODING_ERROR", "error", path, "not UTF-8")
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        report.add("JSON_INVALID", "error", path, str(exc))
        return None
    if not isinstance(value, dict):
        report.add("INVALID_JSON_FORMATTING", "error", path, "not a JSON object")
        return None
    return value


def _check_jsonld(meta: dict[str, Any], path: Path, report: Validation) -> None:
    context = meta.get("@context")
    contexts = context if isinstance(context, list) else [context]
    if context is None:
        report.add("INVALID_JSONLD_FORMATTING", "error", path, "no @context")
    elif not any(isinstance(c, str) and c in SCHEMA_ORG_CONTEXTS for c in contexts):
        report.add("UNKNOWN_NAMESPACE", "warning", path, f"@context {context!r}")
    kind = meta.get("@type", meta.get("type"))
    if kind is None:
        report.add("MISSING_DATASET_TYPE", "error", path, "no @type")
    elif not any(isinstance(k, str) and k in DATASET_TYPES
                 for k in (kind if isinstance(kind, list) else [kind])):
        report.add("INCORRECT_DATASET_TYPE", "error", path, f"@type {kind!r}, not Dataset")


def variable_names(meta: dict[str, Any]) -> set[str]:
    """Names ``variableMeasured`` lists: strings, or the ``name`` of PropertyValue objects."""
    names = set()
    for item in meta.get("variableMeasured") or []:
        if isinstance(item, str):
            names.add(item)
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            names.add(item["name"])
    return names


def _compiled(description: dict[str, Any], datafile: Path, data: Path,
              report: Validation) -> dict[str, Any]:
    """The data file's metadata: the description, then each folder's file_metadata.json from
    data/ down, then its sidecar (keys replaced wholesale, never merged)."""
    meta = dict(description)
    folders = [data, *[data / p for p in _prefixes(datafile.parent.relative_to(data).parts)]]
    for folder in folders:
        if (folder / "file_metadata.json").is_file():
            meta.update(_read_json(folder / "file_metadata.json", report) or {})
    sidecar = datafile.with_suffix(".json")
    if sidecar.is_file():
        meta.update(_read_json(sidecar, report) or {})
    return meta


def _prefixes(parts: tuple[str, ...]) -> Iterator[Path]:
    for i in range(1, len(parts) + 1):
        yield Path(*parts[:i])


def _check_csv(path: Path, meta: dict[str, Any], report: Validation) -> set[str]:
    """CSV rules of one data file; returns its header."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        report.add("CSV_FORMATTING_ERROR", "error", path, "not UTF-8")
        return set()
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        report.add("CSV_FORMATTING_ERROR", "error", path, str(exc))
        return set()
    if not rows or not any(cell.strip() for cell in rows[0]):
        report.add("CSV_HEADER_MISSING", "error", path)
        return set()
    header = [h.lstrip("\ufeff") for h in rows[0]]
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        report.add("CSV_HEADER_REPEATED", "error", path, f"columns {repeated}")
    bad = [i + 2 for i, row in enumerate(rows[1:]) if len(row) != len(header)]
    if bad:
        report.add("CSV_HEADER_LENGTH_MISMATCH", "error", path,
                   f"{len(bad)} rows (first: line {bad[0]}) have not {len(header)} cells")
    elif "row_id" in header:
        k = header.index("row_id")
        ids = [row[k] for row in rows[1:]]
        if len(set(ids)) != len(ids):
            report.add("ROWID_VALUES_NOT_UNIQUE", "error", path)
    missing = [h for h in header if h not in variable_names(meta)]
    if missing:
        report.add("CSV_COLUMN_MISSING_FROM_METADATA", "error", path, f"columns {missing}")
    return set(header)


def validate_dataset(root: str | Path) -> Validation:
    """Check the folder ``root`` against the Psych-DS schema (errors and warnings)."""
    root = Path(root)
    report = Validation(root)
    desc_path = root / "dataset_description.json"
    description: dict[str, Any] = {}
    if not desc_path.is_file():
        report.add("MISSING_DATASET_DESCRIPTION", "error", "dataset_description.json")
    else:
        description = _read_json(desc_path, report) or {}
        if description:
            _check_jsonld(description, desc_path, report)
    for stem in ("README", "CHANGES"):
        if not any((root / f"{stem}{ext}").is_file() for ext in (".md", ".txt")):
            report.add(f"MISSING_{stem}_DOC", "warning", f"{stem}.md")
    for folder in RECOMMENDED_FOLDERS:
        if not (root / folder).is_dir():
            report.add(f"MISSING_{folder.upper()}_DIRECTORY", "warning", folder)
    if not (root / ".psychdsignore").is_file():
        report.add("MISSING_PSYCHDSIGNORE", "warning", ".psychdsignore")
    data = root / "data"
    if not data.is_dir():
        report.add("MISSING_DATA_DIRECTORY", "error", "data")
        return report
    columns: set[str] = set()
    unrecommended: dict[str, list[str]] = {}  # recommended key -> data files lacking it
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        if path.stat().st_size == 0:
            report.add("FILE_EMPTY", "warning", path)
            continue
        if path.suffix == ".json":
            if path.name == "dataset_description.json":
                report.add("WRONG_METADATA_LOCATION", "warning", path)
            continue  # file_metadata.json and sidecars: read with their data files
        if not path.name.endswith("_data.csv"):
            if path.suffix == ".csv":
                report.add("FILENAME_KEYWORD_FORMATTING_ERROR", "error", path)
            else:
                report.add("FILE_NOT_CHECKED", "warning", path)
            continue
        if not DATAFILE.fullmatch(path.name):
            report.add("FILENAME_KEYWORD_FORMATTING_ERROR", "error", path)
            continue
        keywords = [pair.split("-", 1)[0] for pair in path.name[: -len("_data.csv")].split("_")]
        unofficial = [k for k in keywords if k not in OFFICIAL_KEYWORDS]
        if unofficial:
            report.add("FILENAME_UNOFFICIAL_KEYWORD_WARNING", "warning", path,
                       f"keywords {unofficial}")
        meta = _compiled(description, path, data, report)
        for key in REQUIRED:
            if key not in meta or meta[key] in (None, "", []):
                report.add("JSON_KEY_REQUIRED", "error", path, f"no {key!r} in its metadata")
        for key in RECOMMENDED:
            if key not in meta:
                unrecommended.setdefault(key, []).append(path.name)
        columns |= _check_csv(path, meta, report)
        report.datafiles.append(path.relative_to(root).as_posix())
    for key, names in unrecommended.items():
        report.add("JSON_KEY_RECOMMENDED", "warning", "dataset_description.json",
                   f"no {key!r} in the metadata of {len(names)} data files")
    if not report.datafiles:
        report.add("MISSING_DATAFILE", "error", "data",
                   "no valid <keyword>-<value>_data.csv file under data/")
    unused = sorted(variable_names(description) - columns)
    if report.datafiles and unused:
        report.add("VARIABLE_MISSING_FROM_CSV_COLUMNS", "warning", "dataset_description.json",
                   f"variables {unused}")
    return report
