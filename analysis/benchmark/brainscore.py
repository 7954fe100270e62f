"""A published benchmark as Brain-Score plugins (brain-score/vision's layout): a data plugin
(``data/<name>/``: the rated stimuli as a StimulusSet, ``stimulus_set.csv`` + ``stimuli.zip``, and
the analysed participants' ratings as a BehavioralAssembly, ``ratings.csv``, registered in
``data_registry`` and ``stimulus_set_registry``; ``test.py``) and a benchmark plugin
(``benchmarks/<name>/``: ``__init__.py`` registering the benchmark, ``benchmark.py`` with its
ceiling, ``formulas.py``, ``metadata.yaml``, ``test.py``, ``published.json`` and a reference model's
probabilities). The ratings are those ``humanlike score`` analyses (same cleaning, QC and
exclusions); the ceiling and metric are its leave-one-out noise ceiling and mean Pearson r on the
subset 'all' (Golan, Raju & Kriegeskorte 2020)."""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from string import Template

import numpy as np
import pandas as pd
import yaml  # type: ignore[import-untyped]

from humanlike.analysis.benchmark.package import Package, read_package
from humanlike.analysis.exclusions import as_rules
from humanlike.analysis.psychds.dataset import keyword_value
from humanlike.analysis.ratings.ceilings import masked_r, noise_ceiling
from humanlike.analysis.ratings.data import (
    RatingArray,
    clean_ratings,
    participant_qc,
    rating_array,
)
from humanlike.analysis.ratings.scores import model_predictions
from humanlike.analysis.report.sections import RATING_COLUMNS

TEMPLATES = Path(__file__).parent / "brainscore_plugin"
RATING_SCALE = 100.0
"""Ratings are published 0-100 (percent); the assembly holds them as 0-1."""


@dataclass(frozen=True)
class BrainScorePlugins:
    """Where the plugins were written, their identifiers and the numbers their tests assert."""

    data: Path
    benchmark: Path
    data_identifier: str
    benchmark_identifier: str
    ceiling: float
    reference: dict[str, float | str]


def analysed_ratings(package: Package) -> RatingArray:
    """The participants x stimuli x categories ratings ``humanlike score`` analyses: cleaned,
    QC'd and excluded by the package's rules, first presentations of natural and controversial
    stimuli (:func:`~humanlike.analysis.ratings.analysis.analyze_ratings`' first steps)."""
    export = package.export
    if not export.has("ratings"):
        raise ValueError(f"{package.root}: the study has no rating trials; a Brain-Score "
                         "benchmark of it has nothing to score")
    rules = as_rules(package.rules)
    cleaned = clean_ratings(export.ratings(RATING_COLUMNS), rules.min_trial_rt_ms)
    qc = participant_qc(cleaned, export.participants, rules, not export.include_excluded,
                        validated=True)
    return rating_array(cleaned, participants=qc.loc[~qc["excluded"], "participant"])


def _long(ratings: RatingArray) -> pd.DataFrame:
    p, s, k = np.nonzero(np.isfinite(ratings.values))
    values = ratings.values[p, s, k]
    scale = RATING_SCALE if np.nanmax(ratings.values) > 1 else 1.0
    return pd.DataFrame({"subject": np.asarray(ratings.participants)[p],
                         "stimulus_id": np.asarray(ratings.stimuli)[s],
                         "category": np.asarray(ratings.categories)[k],
                         "stimulus_kind": np.asarray(ratings.kinds)[s],
                         "rating": values / scale})


def _render(template: str, target: Path, values: dict[str, str]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    target.write_text(Template(text).substitute(values), encoding="utf-8")


def write_brainscore_plugins(root: str | Path, out: str | Path) -> BrainScorePlugins:
    """Write both plugins for the published folder ``root`` under ``out`` (``data/`` and
    ``benchmarks/``, as in brain-score/vision's ``brainscore_vision/``); ``out`` must be new."""
    package = read_package(root)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty; give a new folder")
    study = keyword_value(package.definition.get("study", "study"))
    name = f"humanlike_{study.lower()}"
    data_id, benchmark_id = f"humanlike.{study}", f"humanlike.{study}-pearson_r"
    ratings = analysed_ratings(package)
    x = ratings.values.reshape(len(ratings.participants), -1)
    ceiling = float(noise_ceiling(x, mse=False).lower)
    reference: dict[str, float | str] = {}
    models_path = package.root / package.definition.get("reference_results", {}).get(
        "model_responses", "results/model_responses.csv")
    responses = None
    if models_path.is_file():
        responses = pd.read_csv(models_path, dtype={"stimulus": str, "category": str})
        first = str(responses["model"].iloc[0])
        responses = responses[responses["model"] == first]
        predictions = model_predictions(responses, ratings)
        r = masked_r(x, predictions.probabilities[0].reshape(-1))
        reference = {"model": first, "pearson_r": float(np.nanmean(r))}
    data, bench = out / "data" / name, out / "benchmarks" / name
    data.mkdir(parents=True)
    bench.mkdir(parents=True)
    frame = _long(ratings)
    frame.to_csv(data / "ratings.csv", index=False)
    stimuli = _stimulus_set(package, ratings)
    stimuli.to_csv(data / "stimulus_set.csv", index=False)
    with zipfile.ZipFile(data / "stimuli.zip", "w", zipfile.ZIP_STORED) as archive:
        for filename in stimuli["filename"].astype(str):
            info = zipfile.ZipInfo(filename, date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, (package.manifest.parent / filename).read_bytes())
    published = {"ceiling": ceiling, "reference": reference, "n_stimuli": len(stimuli),
                 "n_ratings": len(frame), "n_subjects": len(ratings.participants),
                 "source": "humanlike score: noise_ceiling.csv (subset all, pearson_r, lower) "
                           "and scores.csv (subset all, pearson_r)"}
    values = {"study": study, "data_identifier": data_id, "benchmark_identifier": benchmark_id,
              "bibtex": _bibtex(package, study), "visual_degrees": "8",
              "reference": str(reference.get("model", ""))}
    for folder in (data, bench):
        (folder / "published.json").write_text(json.dumps(published, indent=2) + "\n")
    _render("data__init__.py.in", data / "__init__.py", values)
    _render("data_test.py.in", data / "test.py", values)
    _render("benchmark__init__.py.in", bench / "__init__.py", values)
    _render("benchmark.py.in", bench / "benchmark.py", values)
    _render("benchmark_test.py.in", bench / "test.py", values)
    shutil.copyfile(TEMPLATES / "formulas.py", bench / "formulas.py")
    if responses is not None:
        responses[["model", "stimulus", "category", "probability"]].to_csv(
            bench / "reference_model.csv", index=False)
    (bench / "metadata.yaml").write_text(yaml.safe_dump(
        _metadata(benchmark_id, name, stimuli, ratings, package), sort_keys=False))
    return BrainScorePlugins(data, bench, data_id, benchmark_id, ceiling, reference)


def _stimulus_set(package: Package, ratings: RatingArray) -> pd.DataFrame:
    """stimulus_id, filename, stimulus_kind, image_label (a natural image's class), sha256."""
    manifest = pd.read_csv(package.manifest, dtype=str)
    table = manifest.set_index("stimulus")
    rows = table.loc[list(ratings.stimuli)]
    missing = [s for s, f in zip(ratings.stimuli, rows["file"].astype(str), strict=True)
               if not (package.manifest.parent / f).is_file()]
    if missing:
        raise ValueError(f"{package.manifest}: no file for rated stimuli {missing[:3]}")
    return pd.DataFrame({"stimulus_id": list(ratings.stimuli), "filename": rows["file"].to_numpy(),
                         "stimulus_kind": list(ratings.kinds),
                         "image_label": rows["true_class"].to_numpy()
                         if "true_class" in rows else None,
                         "sha256": rows["sha256"].to_numpy() if "sha256" in rows else None})


def _bibtex(package: Package, study: str) -> str:
    return ("@misc{humanlike_" + study.lower() + ",\n  title={" + study
            + " (humanlike study)},\n  note={Published with humanlike publish; cite the dataset "
              "as its CITATION.cff says}\n}")


def _metadata(identifier: str, name: str, stimuli: pd.DataFrame, ratings: RatingArray,
              package: Package) -> dict:
    """``metadata.yaml`` in Brain-Score's schema: per benchmark, stimulus_set, data, metric."""
    size = sum((package.manifest.parent / f).stat().st_size
               for f in stimuli["filename"].astype(str))
    link = f"brainscore_vision/data/{name}"
    return {"benchmarks": {identifier: {
        "stimulus_set": {"num_stimuli": len(stimuli), "datatype": "image",
                         "stimuli_subtype": "natural and controversial images",
                         "total_size_mb": round(size / 1e6, 4), "brainscore_link": link,
                         "extra_notes": "rated stimuli of a humanlike study"},
        "data": {"benchmark_type": "behavioral", "task": "multi-label probability rating",
                 "region": None, "hemisphere": None, "num_recording_sites": None,
                 "duration_ms": None, "species": "Homo sapiens", "datatype": "behavioral",
                 "num_subjects": len(ratings.participants),
                 "pre_processing": "humanlike exclusions and trial cleaning (analysis/benchmark.json rules)",
                 "brainscore_link": link, "extra_notes": None},
        "metric": {"type": "pearson_r", "reference": "Golan, Raju & Kriegeskorte 2020",
                   "public": True, "brainscore_link": f"brainscore_vision/benchmarks/{name}",
                   "extra_notes": "mean over subjects of Pearson r; ceiling leave-one-out"},
    }}}
