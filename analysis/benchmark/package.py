"""The benchmark definition a published dataset carries (``analysis/benchmark.json``): which data
files hold which tables, the stimulus manifest, the metric, the noise ceiling, the analysis
settings (resamples, seed, confidence, alpha) and the exclusion rules the study's report ran with.
Everything the scorer needs is in the folder: :func:`read_package` needs nothing else."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from humanlike.analysis.io.export import Export
from humanlike.analysis.report.sections import ReportSettings

DEFINITION = "analysis/benchmark.json"
"""Where the definition lives, relative to the dataset's root."""
FORMAT = "humanlike-benchmark/1"

METRIC = {
    "name": "pearson_r",
    "definition": "per participant, Pearson r between the model's probabilities and the "
                  "participant's ratings over the (stimulus, category) entries the participant "
                  "rated; averaged over analysed participants (Golan, Raju & Kriegeskorte 2020, "
                  "Methods). Second measure: mean squared error ('mse').",
    "subsets": ["natural", "controversial", "all"],
    "ci": "percentile bootstrap over participants and, independently, stimuli within strata "
          "(each targeted model pair, natural images); humanlike.analysis.ratings.bootstrap",
    "comparisons": "paired bootstrap differences (model vs model, model vs the noise ceiling's "
                   "lower bound), two-sided percentile-test p-values, Holm-Sidak corrected "
                   "within each subset and measure",
}
NOISE_CEILING = {
    "lower": "mean over participants of r(participant, mean of the other participants) "
             "(leave one out)",
    "upper": "max over predictions y of the mean over participants of r(y, participant) "
             "(closed form ||zbar|| / sqrt(n) without missing ratings; L-BFGS otherwise)",
    "source": "Golan, Raju & Kriegeskorte (2020); humanlike.analysis.ratings.ceilings",
    "ci": "the bounds' bootstrap distributions re-centred on their estimates (Efron & "
          "Tibshirani 1993, ch. 10)",
}
ERROR_CONSISTENCY = {
    "definition": "Cohen's kappa on trial-by-trial correctness between observers (Geirhos et al. "
                  "2020); rating trials read as decisions (the highest-rated category); a model's "
                  "decision is its most probable category",
    "ci": "bootstrap over stimuli; independence test by simulation, Holm-Sidak over pairs",
}

ALIGNMENT = {
    "metrics": {
        "accuracy": "share correct per condition, averaged over conditions",
        "accuracy_difference": "a_m - mean_h a_h (Geirhos et al. 2021)",
        "observed_consistency": "c_obs, the share of images model and human both get right or "
                                "both get wrong (Geirhos, Meding & Wichmann 2020, eq. 1)",
        "error_consistency": "Cohen's kappa (c_obs - c_exp) / (1 - c_exp) on correctness "
                             "(Geirhos et al. 2020, eqs. 2-3)",
        "accuracy_distance": "1 - |a_m - a_h| / max(1 - a_h, a_h - chance), chance 0; ceiling: "
                             "each human against the pooled others (Brain-Score "
                             "AccuracyDistance)",
        "accuracy_distance_ceiled": "accuracy_distance / its ceiling, per resample",
        "shape_match": "share of cue-conflict responses naming the shape category (Hermann, "
                       "Chen & Kornblith 2020)",
        "shape_bias": "shape / (shape + texture) on cue-conflict images (Geirhos et al. 2019)",
    },
    "aggregation": "per human and condition, averaged over conditions, then over the humans "
                   "(Brain-Score)",
    "trials": "classifications, and rating trials read as decisions ('<experiment>-ratings'); a "
              "model's decision is its most probable category; experiments with humans and "
              "models (humanlike.analysis.alignment.inputs.profile_trials)",
    "regimes": "every metric also per human-difficulty bin [0, .25], (.25, .5], (.5, .75], "
               "(.75, 1] of the share of humans right (Xu et al. 2026; edges declared)",
    "ci": "percentile bootstrap: one draw of images (within conditions) and humans shared by "
          "every metric, model and regime (humanlike.analysis.alignment.profile)",
    "comparisons": "paired bootstrap difference of two models on each metric (higher = more "
                   "humanlike; accuracy_difference as -|d|), two-sided percentile-test p-value, "
                   "Holm-corrected over the model pairs of each experiment and metric",
    "agreement": "Spearman's rho (CI over the shared resamples) and Kendall's tau across models "
                 "between each pair of metrics (Ahlert et al. 2024)",
    "source": "docs/alignment-profile.md; humanlike.analysis.alignment",
}


@dataclass(frozen=True)
class Package:
    """A published benchmark folder and its definition."""

    root: Path
    definition: Mapping[str, Any]

    @property
    def export(self) -> Export:
        """The published tables as an export (the participants table says who is analysed)."""
        paths = {name: self.root / rel for name, rel in self.definition["tables"].items()}
        return Export(self.root / "data", paths, include_excluded=False)

    @property
    def settings(self) -> ReportSettings:
        """The analysis settings of the study's report (resamples, seed, confidence, alpha)."""
        return ReportSettings(**self.definition["settings"])

    @property
    def rules(self) -> Mapping[str, Any]:
        """The study's exclusion rules (its spec's ``[exclusion]`` table)."""
        return dict(self.definition.get("rules") or {})

    @property
    def manifest(self) -> Path:
        """The stimulus manifest (``file`` relative to its folder), for scoring models directly."""
        return self.root / self.definition["stimuli"]["manifest"]


def write_definition(root: Path, *, study: str, tables: Mapping[str, str],
                     settings: ReportSettings, rules: Mapping[str, Any] | None,
                     manifest: str, categories: list[str],
                     reference: Mapping[str, str] | None = None) -> Path:
    """Write ``analysis/benchmark.json`` under ``root``."""
    record = {
        "format": FORMAT,
        "study": study,
        "tables": dict(tables),
        "stimuli": {"manifest": manifest},
        "categories": categories,
        "metric": METRIC,
        "noise_ceiling": NOISE_CEILING,
        "error_consistency": ERROR_CONSISTENCY,
        "alignment": ALIGNMENT,
        "settings": asdict(settings),
        "rules": dict(rules or {}),
        "reference_results": dict(reference or {}),
        "score": "humanlike score DIR --models responses.csv (model, stimulus, category, "
                 "probability[, logit]); in Python: humanlike.analysis.benchmark.score_package",
    }
    path = root / DEFINITION
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def read_package(root: str | Path) -> Package:
    """The benchmark at ``root``; ``ValueError`` naming the file and field that is wrong."""
    root = Path(root)
    path = root / DEFINITION
    try:
        definition = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{root}: no {DEFINITION}; not a `humanlike publish` folder") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(definition, dict) or definition.get("format") != FORMAT:
        raise ValueError(f"{path}: field 'format' is not {FORMAT!r}")
    for key in ("tables", "settings", "stimuli"):
        if not isinstance(definition.get(key), dict):
            raise ValueError(f"{path}: field {key!r} missing or not an object")
    known = {f.name for f in fields(ReportSettings)}
    unknown = set(definition["settings"]) - known
    if unknown:
        raise ValueError(f"{path}: field 'settings' has unknown keys {sorted(unknown)}")
    for name, rel in definition["tables"].items():
        if not (root / rel).is_file():
            raise ValueError(f"{path}: field 'tables.{name}' names {rel}, which is not in {root}")
    return Package(root, definition)
