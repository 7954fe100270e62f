"""A finished study's export as a Psych-DS dataset with a benchmark package in it.

Layout (``DIR``)::

    dataset_description.json  README.md  CHANGES.md  CITATION.cff  LICENSE  .psychdsignore
    data/study-<slug>_description-<table>_data.csv      the analysed tables, ids pseudonymous
    materials/stimuli/...  manifest.csv  SHA256SUMS      the stimuli as shown, with checksums
    documentation/spec-<hash12>/spec.json, <text>.html   each spec version and the texts shown
    analysis/benchmark.json                              tables, metric, ceiling, settings, rules
    results/                                             the study's models scored (with --models)

Never published: the platform's participant, study and session ids, user agents, completion codes
(:data:`~humanlike.analysis.psychds.dataset.NEVER_PUBLISHED`), the event log, free-text answers
(the ``debrief`` table) unless asked for, the spec's keys outside its allow-list and times finer
than the day unless asked for (:mod:`~humanlike.analysis.psychds.disclosure`)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from humanlike.analysis.io.export import find_table, read_table
from humanlike.analysis.psychds.dataset import (
    NEVER_PUBLISHED,
    datafile_name,
    dataset_description,
    public_columns,
    variable_measured,
    write_datafile,
)
from humanlike.analysis.psychds.disclosure import coarsen_times, public_spec
from humanlike.analysis.psychds.validate import Validation, validate_dataset
from humanlike.analysis.report.sections import ReportSettings

PUBLISHED_TABLES = ("trials", "ratings", "decisions", "triads", "classifications", "trial_timing",
                    "display", "participants", "stimuli")
"""Export tables a dataset holds (in this order); ``debrief`` (free text) only when asked."""
FREE_TEXT_TABLES = ("debrief",)
MANIFEST = "materials/stimuli/manifest.csv"

@dataclass(frozen=True)
class SpecVersion:
    """One version of the spec participants saw: its hash, spec mapping and rendered texts; its
    manifest rows in manifest order and the texts' Markdown sources (for a replication:
    :mod:`~humanlike.analysis.psychds.replication`)."""

    hash: str
    spec: Mapping[str, Any]
    texts: Mapping[str, str]
    stimuli: Sequence[Mapping[str, Any]] = ()
    sources: Mapping[str, str] = field(default_factory=dict)


def sha256_file(path: Path) -> str:
    """The file's sha256 (hex), as the study recorded its stimuli's."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def publish_export(
    export: Path,
    out: Path,
    *,
    study: str,
    title: str,
    license: str,
    stimulus_root: Path,
    versions: Sequence[SpecVersion],
    settings: ReportSettings,
    rules: Mapping[str, Any] | None,
    categories: list[str],
    authors: Sequence[str] = (),
    description: str | None = None,
    models: pd.DataFrame | None = None,
    include_free_text: bool = False,
    times: str = "day",
    date: str | None = None,
) -> Validation:
    """Write the dataset for the ``humanlike export`` folder ``export`` into ``out`` (which must
    not exist yet) and return its Psych-DS validation; its times are published as ``times`` says
    (:func:`~humanlike.analysis.psychds.disclosure.coarsen_times`). ``ValueError`` when a stimulus
    file is missing or its bytes are not those the study recorded."""
    from humanlike.analysis.benchmark.package import DEFINITION, write_definition

    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty; publish into a new folder")
    date = date or _dt.date.today().isoformat()
    codebook = json.loads((export / "codebook.json").read_text()) if (
        export / "codebook.json").is_file() else {}
    tables = [*PUBLISHED_TABLES, *(FREE_TEXT_TABLES if include_free_text else ())]
    written: dict[str, str] = {}
    columns: list[str] = []
    descriptions: dict[str, str] = {}
    frames: dict[str, pd.DataFrame] = {}
    for name in tables:
        path = find_table(export, name)
        if name in FREE_TEXT_TABLES and (export / f"{name}.csv").is_file():
            path = export / f"{name}.csv"  # its formula-like answers neutralised by the export
        if path is None:
            continue
        frame = public_columns(read_table(path))
        if frame.empty:
            continue
        frames[name] = frame
    if "stimuli" not in frames:
        raise ValueError(f"{export}: no stimuli table to publish")
    frames, time_notes = coarsen_times(frames, times, rules)
    _check_stimuli(frames["stimuli"], stimulus_root)
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        rel = f"data/{datafile_name(study, name)}"
        write_datafile(frame, out / rel)
        written[name] = rel
        columns += list(frame.columns)
        for column, text in (codebook.get(name) or {}).items():
            descriptions.setdefault(column, text)
    for column, note in time_notes.items():
        descriptions[column] = f"{descriptions[column]}; {note}" if descriptions.get(column) else note
    _copy_stimuli(frames["stimuli"], stimulus_root, out)
    for version in versions:
        folder = out / "documentation" / f"spec-{version.hash[:12]}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spec.json").write_text(json.dumps(public_spec(version.spec), indent=2) + "\n")
        for name, text in version.texts.items():
            (folder / f"{name}.html").write_text(text or "", encoding="utf-8")
        _replication_records(folder, version)
    (out / "analysis").mkdir(exist_ok=True)
    reference = {}
    if models is not None:
        (out / "results").mkdir(exist_ok=True)
        models.to_csv(out / "results" / "model_responses.csv", index=False)
        reference["model_responses"] = "results/model_responses.csv"
    write_definition(out, study=study, tables=written, settings=settings, rules=rules,
                     manifest=MANIFEST, categories=categories, reference=reference)
    if models is not None:
        from humanlike.analysis.benchmark.score import score_package

        scores = score_package(out, models)
        saved = scores.save(out / "results")
        reference.update({p.stem: p.relative_to(out).as_posix() for p in saved})
        write_definition(out, study=study, tables=written, settings=settings, rules=rules,
                         manifest=MANIFEST, categories=categories, reference=reference)
    text = description or (
        f"{title}: the trials, participants (pseudonymous ids, quality control and exclusions) "
        "and stimuli of a humanlike study, with a benchmark that scores models against the "
        f"human responses as the study did ({DEFINITION}).")
    record = dataset_description(
        name=title, description=text, variables=variable_measured(columns, descriptions),
        license=license, authors=authors, keywords=["psychophysics", "humanlike", study],
        citation="CITATION.cff", date_published=date)
    (out / "dataset_description.json").write_text(json.dumps(record, indent=2) + "\n",
                                                  encoding="utf-8")
    _texts(out, study=study, title=title, license=license, authors=authors, date=date,
           written=written, include_free_text=include_free_text, times=times)
    return validate_dataset(out)


def _replication_records(folder: Path, version: SpecVersion) -> None:
    """``stimuli.json`` (manifest rows in order), ``version.json`` (version and design hashes)
    and each text's Markdown source (``<text>.md``), what ``humanlike replicate`` rebuilds the
    version from."""
    from humanlike.analysis.psychds.replication import (
        STIMULI_RECORD,
        VERSION_RECORD,
        version_record,
    )

    rows = [dict(r) for r in version.stimuli]
    (folder / STIMULI_RECORD).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    record = version_record(version.spec, version.texts, rows, version.hash)
    (folder / VERSION_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    for name, source in version.sources.items():
        (folder / f"{name}.md").write_text(source, encoding="utf-8")


def _check_stimuli(stimuli: pd.DataFrame, root: Path) -> None:
    for key, expected in zip(stimuli["stimulus"].astype(str), stimuli["sha256"], strict=True):
        path = root / key
        if not path.is_file():
            raise ValueError(f"stimulus {key}: no file {path}")
        if isinstance(expected, str) and expected and sha256_file(path) != expected:
            raise ValueError(f"stimulus {key}: {path} is not the file the study showed "
                             "(its sha256 differs from the recorded one)")


def _copy_stimuli(stimuli: pd.DataFrame, root: Path, out: Path) -> None:
    """Each stimulus file under materials/stimuli/, a manifest (``file`` column) and SHA256SUMS."""
    folder = out / "materials" / "stimuli"
    lines = []
    for key in stimuli["stimulus"].astype(str):
        target = folder / key
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / key, target)
        lines.append(f"{sha256_file(target)}  {key}")
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    stimuli.assign(file=stimuli["stimulus"]).to_csv(out / MANIFEST, index=False)


_TIMES_TEXT = {
    "day": "Times are published as their UTC date only, and durations in whole minutes, so that no "
           "row can be\nlinked to a recruitment platform's submission list by its arrival time.",
    "offsets": "Times are published as seconds since the participant's own arrival (server "
               "times) or first trial\n(browser times); no time of day is published.",
    "exact": "Times are published as recorded (UTC).",
}


def _texts(out: Path, *, study: str, title: str, license: str, authors: Sequence[str], date: str,
           written: Mapping[str, str], include_free_text: bool, times: str) -> None:
    from humanlike.analysis.psychds.dataset import LICENSES

    people = ", ".join(authors) or "the study's authors"
    files = "\n".join(f"- `{rel}`: the `{name}` table" for name, rel in written.items())
    never = ", ".join(f"`{c}`" for c in NEVER_PUBLISHED)
    (out / "README.md").write_text(f"""# {title}

A Psych-DS dataset of the humanlike study `{study}`, published {date} by {people}
under {license} (see LICENSE).

## Data (`data/`)
{files}

Each participant appears under a random id (`participant`), never under a recruitment platform's id.
Not published: the columns {never}, the browser event log{'' if include_free_text else
', free-text answers'}. Columns are described in `dataset_description.json` (variableMeasured).
A row is identified by (participant, trial_index) in the trial tables (and category in `ratings`),
by participant in `participants` and by stimulus in `stimuli`.
{_TIMES_TEXT[times]}

## Materials and documentation
`materials/stimuli/` holds every stimulus as shown, `manifest.csv` and `SHA256SUMS`
(`sha256sum -c SHA256SUMS` there checks them). `documentation/spec-*/` holds each spec version
participants ran under and the consent and instruction texts they saw.

## Benchmark
`analysis/benchmark.json` names the tables, the metric, the noise ceiling and the settings the
study's report ran with. Score a model (columns model, stimulus, category, probability):

    humanlike score . --models responses.csv --out scores/

or in Python: `humanlike.analysis.benchmark.score_package(".", responses)`. `results/` holds the
study's own models scored this way.
""", encoding="utf-8")
    (out / "CHANGES.md").write_text(f"# Changes\n\n- {date}: first publication.\n")
    (out / ".psychdsignore").write_text("# nothing ignored\n")
    url = LICENSES.get(license, license)
    (out / "LICENSE").write_text(f"{title}\n\nLicensed under {license}: {url}\n")
    author_lines = "\n".join(f"  - name: {json.dumps(a)}" for a in authors) or '  - name: "anonymous"'
    (out / "CITATION.cff").write_text(f"""cff-version: 1.2.0
message: "If you use this dataset, please cite it as below."
type: dataset
title: {json.dumps(title)}
authors:
{author_lines}
date-released: "{date}"
license: "{license}"
keywords:
  - psychophysics
  - humanlike
""", encoding="utf-8")
