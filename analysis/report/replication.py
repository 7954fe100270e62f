"""The report's replication section: a study run from a published package (``[replication]`` in
its spec, written by ``humanlike replicate``) against the original, score by score and comparison
by comparison, with two one-sided tests of equivalence within declared bounds (TOST; Schuirmann
1987; Lakens, Scheel & Isager 2018).

Both studies showed the same stimuli, so what differs between them is who took part: each test is
a two-sample Welch TOST (``statsmodels.stats.weightstats.ttost_ind``) on the per-participant
values whose mean is the score (a model's Pearson r or MSE with a participant's ratings, or the
participant's leave-one-out r with the others: the noise ceiling's lower bound) or the comparison
(the per-participant difference of two such values). The study's own CIs also resample stimuli,
to generalise to new stimuli; that question is not the replication's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from humanlike.analysis.exclusions import as_rules
from humanlike.analysis.io.export import Export
from humanlike.analysis.report.sections import (
    RATING_COLUMNS,
    Progress,
    ReportSettings,
    Section,
    StudyResults,
    Table,
)

LOWER = "lower"
"""The noise ceiling's lower bound among the scores (the name the study's comparisons use)."""
VERDICTS = ("equivalent", "equivalent, differs", "different", "inconclusive")


def resolve_package(spec: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``spec`` with its ``[replication] package`` made absolute against the spec's ``folder``."""
    spec = dict(spec)
    table = spec.get("replication")
    if isinstance(table, Mapping) and isinstance(table.get("package"), str):
        spec["replication"] = {**table, "package": str(folder / table["package"])}
    return spec


def participant_values(export: Export, models: pd.DataFrame,
                       rules: Any) -> dict[tuple[str, str], pd.DataFrame]:
    """Per (subset, metric): analysed participants x (each model, ``lower``), the values whose
    means are the study's scores and noise-ceiling lower bound (the report's cleaning, QC and
    scoring: ``ratings.analysis.analyze_ratings`` before its bootstrap)."""
    from humanlike.analysis.ratings.bootstrap import SUBSETS
    from humanlike.analysis.ratings.ceilings import (
        leave_one_out_predictions,
        masked_mse,
        masked_r,
        rating_matrix,
    )
    from humanlike.analysis.ratings.data import clean_ratings, participant_qc, rating_array
    from humanlike.analysis.ratings.scores import model_predictions, participant_scores

    rules = as_rules(rules)
    cleaned = clean_ratings(export.ratings(RATING_COLUMNS), rules.min_trial_rt_ms)
    qc = participant_qc(cleaned, export.participants, rules, not export.include_excluded,
                        validated=True)
    ratings = rating_array(cleaned, participants=qc.loc[~qc["excluded"], "participant"])
    predictions = model_predictions(models, ratings)
    kinds = np.asarray(ratings.kinds, dtype=object)
    names = [*predictions.models, LOWER]
    out = {}
    for subset in SUBSETS:
        mask = np.ones(kinds.size, bool) if subset == "all" else kinds == subset
        if not mask.any():
            continue
        part = ratings if mask.all() else ratings.select_stimuli(mask)
        r, mse = participant_scores(part, predictions.probabilities[:, mask])
        x = rating_matrix(part)
        loo = leave_one_out_predictions(x)
        for metric, values in (("pearson_r", np.vstack([r, masked_r(x, loo)])),
                               ("mse", np.vstack([mse, masked_mse(x, loo)]))):
            out[subset, metric] = pd.DataFrame(values.T, columns=names,
                                               index=pd.Index(ratings.participants,
                                                              name="participant"))
    return out


def _rows(values: Mapping[tuple[str, str], pd.DataFrame]) -> list[dict[str, Any]]:
    """Every score (models, lower bound) and comparison (model pairs, model vs lower bound, in the
    study's order) with its per-participant values."""
    rows = []
    for (subset, metric), frame in values.items():
        models = [c for c in frame.columns if c != LOWER]
        for name in frame.columns:
            rows.append({"kind": "score", "subset": subset, "metric": metric, "a": name, "b": "",
                         "values": frame[name].to_numpy(float)})
        pairs = [*combinations(models, 2), *((m, LOWER) for m in models)]
        for a, b in pairs:
            rows.append({"kind": "model vs model" if b != LOWER else "model vs lower bound",
                         "subset": subset, "metric": metric, "a": a, "b": b,
                         "values": (frame[a] - frame[b]).to_numpy(float)})
    return rows


def original_half_widths(package: Any) -> dict[tuple[str, str, str, str], float]:
    """(subset, metric, a, b) -> half the width of the original's published CI of that score
    (b '') or comparison, from the package's ``results/`` (``humanlike publish --models``)."""
    refs = package.definition.get("reference_results") or {}
    missing = [n for n in ("scores", "noise_ceiling", "comparisons") if n not in refs]
    if missing:
        raise ValueError(f"{package.root}: no published {', '.join(missing)} (published without "
                         "--models), so no original CIs to bound by; declare the bounds "
                         "([replication] bounds, humanlike replicate --bound)")

    def read(name: str) -> pd.DataFrame:
        return pd.read_csv(package.root / refs[name], dtype={"model": str, "a": str, "b": str})

    scores, comparisons = read("scores"), read("comparisons")
    lower = read("noise_ceiling").query("bound == 'lower'").assign(model=LOWER)
    keyed = pd.concat([scores.assign(b=""), lower.assign(b=""),
                       comparisons.rename(columns={"a": "model"})], ignore_index=True)
    half = ((keyed["ci_high"] - keyed["ci_low"]) / 2).to_numpy(float)
    keys = zip(keyed["subset"], keyed["metric"], keyed["model"], keyed["b"], strict=True)
    return {(str(s), str(m), str(a), str(b)): float(h)
            for (s, m, a, b), h in zip(keys, half, strict=True)}


def equivalence_tests(original: Mapping[tuple[str, str], pd.DataFrame],
                      replication: Mapping[tuple[str, str], pd.DataFrame],
                      bounds: Mapping[Any, float], alpha: float) -> pd.DataFrame:
    """One row per score and comparison present in both studies: the means, the difference
    (replication - original) with its (1 - 2 alpha) Welch CI, the bound, the TOST p-value
    (``ttost_ind``, unequal variances), the Welch t-test's p-value and the verdict. ``bounds``
    maps a metric, or a (subset, metric, a, b) key, to its bound."""
    from statsmodels.stats.weightstats import (
        CompareMeans,
        DescrStatsW,
        ttest_ind,
        ttost_ind,
    )

    theirs = {(r["kind"], r["subset"], r["metric"], r["a"], r["b"]): r["values"]
              for r in _rows(original)}
    rows = []
    for row in _rows(replication):
        key = (row["kind"], row["subset"], row["metric"], row["a"], row["b"])
        if key not in theirs:
            continue
        x1, x2 = row["values"], theirs[key]
        x1, x2 = x1[np.isfinite(x1)], x2[np.isfinite(x2)]
        bound = bounds.get(key[1:], bounds.get(row["metric"], np.nan))
        record = {k: row[k] for k in ("kind", "subset", "metric", "a", "b")}
        record.update(original=x2.mean() if x2.size else np.nan,
                      replication=x1.mean() if x1.size else np.nan,
                      n_original=x2.size, n_replication=x1.size, bound=bound)
        if min(x1.size, x2.size) < 2 or not np.isfinite(bound) or (
                np.ptp(x1) == 0 and np.ptp(x2) == 0):
            record.update(difference=record["replication"] - record["original"], ci_low=np.nan,
                          ci_high=np.nan, p_tost=np.nan, p_difference=np.nan,
                          verdict="not testable")
            rows.append(record)
            continue
        p_tost = ttost_ind(x1, x2, -bound, bound, usevar="unequal")[0]
        p_difference = ttest_ind(x1, x2, usevar="unequal")[1]
        low, high = CompareMeans(DescrStatsW(x1), DescrStatsW(x2)).tconfint_diff(
            alpha=2 * alpha, usevar="unequal")
        equivalent, different = p_tost < alpha, p_difference < alpha
        verdict = VERDICTS[0 if equivalent and not different else 1 if equivalent else
                           2 if different else 3]
        record.update(difference=x1.mean() - x2.mean(), ci_low=low, ci_high=high,
                      p_tost=float(p_tost), p_difference=float(p_difference), verdict=verdict)
        rows.append(record)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ReplicationResult:
    """The equivalence tests of a replication against its original package."""

    settings: Any
    package: Path
    original_slug: str
    withheld: tuple[str, ...]
    tests: pd.DataFrame
    alpha: float
    bounds_source: str

    def verdict(self, metric: str) -> tuple[int, int]:
        """(tests equivalent, tests run) on ``metric``: the replication is equivalent on it when
        every test is (an intersection-union test, level alpha uncorrected; Berger 1982)."""
        rows = self.tests[(self.tests["metric"] == metric)
                          & (self.tests["verdict"] != "not testable")]
        return int(rows["verdict"].isin(VERDICTS[:2]).sum()), len(rows)


def replication_result(export: Export, spec: Mapping[str, Any], settings: ReportSettings,
                       ) -> ReplicationResult:
    """The replication's per-participant values against its package's, tested for equivalence
    with the spec's declared bounds; ``ValueError`` says what is missing."""
    from pydantic import ValidationError

    from humanlike.analysis.benchmark.package import read_package
    from humanlike.analysis.psychds.replication import ReplicationSettings, read_version
    from humanlike.analysis.ratings.scores import load_model_responses

    try:
        declared = ReplicationSettings.model_validate(spec["replication"])
    except ValidationError as exc:
        raise ValueError(f"the spec's [replication] table is invalid: {exc}") from None
    package = read_package(declared.package)
    refs = package.definition.get("reference_results") or {}
    if "model_responses" not in refs:
        raise ValueError(f"{package.root}: no published model responses (results/; published "
                         "without --models): nothing to score both studies with")
    if not export.has("ratings"):
        raise ValueError("the replication has no rating trials")
    models = load_model_responses(package.root / refs["model_responses"])
    version = read_version(package.root / "documentation" / f"spec-{declared.version[:12]}")
    original = participant_values(package.export, models, package.rules)
    replication = participant_values(export, models, spec.get("exclusion"))
    if declared.bounds == "original_ci":
        bounds: Mapping[Any, float] = original_half_widths(package)
        source = ("each score's and comparison's own half-width of the original's "
                  f"{package.settings.confidence_level:.0%} CI (the package's results/): a "
                  "difference the original could not resolve")
    else:
        bounds = dict(declared.bounds)
        source = "declared per metric: " + ", ".join(f"{m} +-{v:g}" for m, v in bounds.items())
    tests = equivalence_tests(original, replication, bounds, settings.alpha)
    return ReplicationResult(declared, package.root, str(version.spec.get("slug")),
                             version.withheld, tests, settings.alpha, source)


def replication_sections(export: Export, spec: Mapping[str, Any] | None,
                         settings: ReportSettings, results: StudyResults,
                         progress: Progress) -> list[Section]:
    """The replication section, for a spec with ``[replication]`` (none otherwise)."""
    if not spec or "replication" not in spec:
        return []
    section = Section("replication", "Replication of a published study")
    progress("replication: equivalence tests")
    try:
        result = replication_result(export, spec, settings)
    except ValueError as exc:
        section.missing = str(exc)
        return [section]
    results.replication = result
    _render(section, result, settings)
    return [section]


def _render(section: Section, result: ReplicationResult, settings: ReportSettings) -> None:
    tests, alpha = result.tests, result.alpha
    n_o = int(tests["n_original"].max()) if len(tests) else 0
    n_r = int(tests["n_replication"].max()) if len(tests) else 0
    withheld = ", ".join(result.withheld) or "nothing"
    section.paragraphs.append(
        f"This study replicates version {result.settings.version[:12]} of the published study "
        f"'{result.original_slug}' ({result.package}): the same design hash "
        f"{result.settings.design_hash[:12]} (the published spec without its slug, platform, "
        "completion and replication tables; the texts participants read; the manifest rows in "
        "order), so the same stimuli, texts and seeded timelines. The platform is this study's "
        f"own (the package withholds the original's: {withheld}). {n_r} analysed participants "
        f"here against {n_o} in the original, both scored with the package's model responses.")
    section.paragraphs.append(
        "Each score and comparison is tested for equivalence with two one-sided Welch t-tests "
        "(TOST; Schuirmann 1987) on the per-participant values of the two studies: equivalent "
        f"when the difference (replication - original) is shown to lie within +-bound at "
        f"alpha = {alpha:g}, i.e. its {1 - 2 * alpha:.0%} CI lies inside the bounds; different "
        "when the Welch t-test rejects a zero difference; both ('equivalent, differs'): a "
        f"difference too small to matter; neither: inconclusive. Bounds: {result.bounds_source}.")
    lines = []
    for metric in ("pearson_r", "mse"):
        k, n = result.verdict(metric)
        if n:
            lines.append(f"{metric}: {k} of {n} tests equivalent"
                         + (" - the replication is equivalent on it (every test rejects: an "
                            "intersection-union test at level alpha, Berger 1982)" if k == n
                            else ""))
    section.paragraphs.append("; ".join(lines) + ".")
    ci = f"{1 - 2 * alpha:.0%} CI"
    shown = tests.copy()
    shown["score"] = tests["a"].where(tests["b"] == "", tests["a"] + " - " + tests["b"])
    shown[ci] = [f"[{low:.2g}, {high:.2g}]" if np.isfinite(low) else ""
                 for low, high in zip(tests["ci_low"], tests["ci_high"], strict=True)]
    columns = ["score", "subset", "metric", "original", "replication", "difference", ci, "bound",
               "p_tost", "p_difference", "verdict"]
    shown = shown.rename(columns={"p_difference": "p_diff"})
    columns[columns.index("p_difference")] = "p_diff"
    section.tables.append(Table(shown.loc[shown["kind"] == "score", columns], (
        f"Scores in both studies (mean per-participant value; '{LOWER}': the noise ceiling's "
        f"lower bound), the difference (replication - original) with its {ci} (Welch), the "
        "equivalence bound, the TOST and difference p-values, and the verdict.")))
    section.tables.append(Table(
        shown.loc[shown["kind"] != "score", columns].rename(columns={"score": "comparison"}), (
            "Comparisons (a - b per participant: model vs model, model vs the lower bound, as "
            "the study's comparisons) in both studies, tested the same way.")))
    figure = _figure(tests, settings)
    if figure is not None:
        section.figure(figure)


def _figure(tests: pd.DataFrame, settings: ReportSettings) -> Any:
    """Differences (replication - original) of the Pearson-r scores and comparisons on all
    stimuli with their (1 - 2 alpha) CIs and bounds."""
    import matplotlib.pyplot as plt

    from humanlike.analysis.figures import set_caption

    rows = tests[(tests["metric"] == "pearson_r") & (tests["subset"] == "all")]
    rows = rows[np.isfinite(rows["ci_low"].to_numpy(float))]
    if rows.empty:
        return None
    labels = [a if b == "" else f"{a} - {b}" for a, b in zip(rows["a"], rows["b"], strict=True)]
    y = np.arange(len(rows))[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(rows) + 1.4))
    ax.barh(y, 2 * rows["bound"], left=-rows["bound"], height=0.7, color="#dde8f3",
            label="equivalence bounds")
    ok = rows["verdict"].isin(VERDICTS[:2]).to_numpy()
    for mask, colour, name in ((ok, "#1b6e3a", "equivalent"), (~ok, "#b33", "not shown")):
        if mask.any():
            ax.errorbar(rows["difference"][mask], y[mask],
                        xerr=[rows["difference"][mask] - rows["ci_low"][mask],
                              rows["ci_high"][mask] - rows["difference"][mask]],
                        fmt="o", color=colour, capsize=2, label=name)
    ax.axvline(0, color="#444", lw=0.8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel(f"difference in mean Pearson r, replication - original "
                  f"({1 - 2 * settings.alpha:.0%} CI)")
    ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("Replication: scores and comparisons on all stimuli against their bounds",
                 fontsize=10)
    fig.tight_layout()
    return set_caption(fig, (
        "Each row a score (a model, or 'lower': the noise ceiling's lower bound) or a comparison "
        "(a - b) on all stimuli: the dot is the difference of its mean per-participant Pearson r "
        f"between the replication and the original, the whiskers its {1 - 2 * settings.alpha:.0%}"
        " Welch CI, the shaded band the equivalence bounds. Green: equivalent (TOST rejects, the "
        "CI inside the band); red: equivalence not shown."))
