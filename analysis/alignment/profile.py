"""The alignment profile: every metric per model and difficulty regime, on one set of resamples.

One call draws the bootstrap resample counts once (images stratified by condition, and humans;
:func:`humanlike.analysis._resampling.draw_resample_counts`), turns every count-weighted sum the
metrics need into one matrix product per (regime, condition) cell, and computes each metric for the
observed data (row 0) and every resample at once. Intervals are percentile intervals; because all
metrics share the resamples, their bootstrap rows can be compared (ranks, differences) directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from humanlike.analysis._resampling import (
    MAX_BATCH_ELEMENTS,
    RandomState,
    as_rng,
    check_confidence_level,
    check_n_resamples,
    draw_resample_counts,
    percentile_interval,
    quiet_nan_warnings,
)
from humanlike.analysis.alignment.accuracy import (
    accuracy_difference,
    accuracy_distance,
    leave_one_out_targets,
)
from humanlike.analysis.alignment.conditional_ec import baseline_mask, same_image
from humanlike.analysis.alignment.data import AlignmentData, alignment_data
from humanlike.analysis.alignment.regimes import DEFAULT_EDGES, difficulty_regimes, regime_labels
from humanlike.analysis.alignment.shape_bias import cue_conflict_categories, shape_bias
from humanlike.analysis.error_consistency import check_degenerate, kappa_from_rates
from humanlike.analysis.error_consistency.kappa import Degenerate

#: Metrics of the profile, in table order (``humans``/``ceiling`` rows sit beside the models).
METRICS: tuple[str, ...] = (
    "accuracy",
    "accuracy_difference",
    "observed_consistency",
    "error_consistency",
    "accuracy_distance",
    "accuracy_distance_ceiled",
    "conditional_error_consistency",
    "conditional_error_consistency_ceiled",
    "shape_match",
    "shape_bias",
)


@dataclass(frozen=True)
class AlignmentProfile:
    """Table (experiment, regime, metric, observer, estimate, ci_low, ci_high, n_images), the
    bootstrap value of every row (rows x resamples, same resamples for every row), and each
    model's fit to each human (``per_observer``: image resamples only)."""

    table: pd.DataFrame
    bootstrap: np.ndarray = field(repr=False)
    n_resamples: int
    confidence_level: float
    per_observer: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def wide(self, regime: str = "all") -> pd.DataFrame:
        """Estimates of one regime as observers x metrics, per experiment."""
        rows = self.table[self.table["regime"] == regime]
        return rows.pivot_table(index=["experiment", "observer"], columns="metric",
                                values="estimate", sort=False)


class _Columns:
    """Named blocks of images x k indicator columns, stacked for one matrix product per cell."""

    def __init__(self) -> None:
        self.blocks: list[np.ndarray] = []
        self.slices: dict[str, slice] = {}
        self.width = 0

    def add(self, name: str, block: np.ndarray) -> None:
        block = np.asarray(block, dtype=np.float32).reshape(block.shape[0], -1)
        self.slices[name] = slice(self.width, self.width + block.shape[1])
        self.blocks.append(block)
        self.width += block.shape[1]

    def matrix(self) -> np.ndarray:
        return np.concatenate(self.blocks, axis=1)


def _human_pairs(h: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (a, b) of the human pairs a < b."""
    pairs = np.array(list(combinations(range(h), 2)), dtype=int).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def _pair_blocks(cols: _Columns, prefix: str, c_a: np.ndarray, c_b: np.ndarray,
                 p_ab: np.ndarray) -> None:
    """Counts of a set of observer pairs on their common images: n, right_a, right_b, agree."""
    cols.add(f"{prefix}_n", p_ab)
    cols.add(f"{prefix}_a", c_a & p_ab)
    cols.add(f"{prefix}_b", c_b & p_ab)
    cols.add(f"{prefix}_agree", (c_a == c_b) & p_ab)


def _columns(data: AlignmentData, valid: np.ndarray, cue: np.ndarray | None) -> _Columns:
    """Every per-image indicator a metric sums: observers, model-human and human-human pairs."""
    h, m = data.n_humans, len(data.models)
    c, p = data.correct, data.present
    cols = _Columns()
    cols.add("n", p)
    cols.add("k", c & p)
    mi, hi = np.repeat(np.arange(h, h + m), h), np.tile(np.arange(h), m)  # model-major pairs
    _pair_blocks(cols, "mh", c[:, mi], c[:, hi], p[:, mi] & p[:, hi])
    cond_valid = np.repeat(valid, h, axis=1)
    _pair_blocks(cols, "cmh", c[:, mi], c[:, hi], p[:, mi] & p[:, hi] & cond_valid)
    ha, hb = _human_pairs(h)
    _pair_blocks(cols, "hh", c[:, ha], c[:, hb], p[:, ha] & p[:, hb])
    if cue is not None and data.response is not None:
        shape, texture = cue_conflict_categories(data.images)
        scored = (cue[:, None] & p)
        cols.add("cue_n", scored)
        cols.add("shape", (data.response == shape[:, None]) & scored)
        cols.add("texture", (data.response == texture[:, None]) & scored)
    return cols


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def _wmean(values: np.ndarray, weights: np.ndarray, axis: int = -1) -> np.ndarray:
    """Weighted mean along ``axis`` ignoring NaN values (NaN where no weight is left)."""
    finite = np.isfinite(values)
    w = np.where(finite, weights, 0.0)
    return _ratio((np.where(finite, values, 0.0) * w).sum(axis=axis), w.sum(axis=axis))


def _cell_metrics(s: dict[str, np.ndarray], v: np.ndarray, h: int, m: int, chance: float,
                  degenerate: Degenerate) -> dict[str, np.ndarray]:
    """Per-cell statistics (resamples first) from the summed columns ``s``."""
    b = v.shape[0]
    acc = _ratio(s["k"], s["n"])  # (B, O)
    out: dict[str, np.ndarray] = {"acc_h": acc[:, :h], "acc_m": acc[:, h:]}
    for prefix in ("mh", "cmh"):
        n = s[f"{prefix}_n"]
        pa, pb = _ratio(s[f"{prefix}_a"], n), _ratio(s[f"{prefix}_b"], n)
        cobs = _ratio(s[f"{prefix}_agree"], n)
        # Kato & He's cohens_kappa is the plain formula: 0 where one observer is constant
        kap = kappa_from_rates(cobs, pa, pb, degenerate=degenerate if prefix == "mh" else "strict")
        out[f"{prefix}_cobs"] = cobs.reshape(b, m, h)
        out[f"{prefix}_kappa"] = kap.reshape(b, m, h)
    n = s["hh_n"]
    out["hh_kappa"] = kappa_from_rates(_ratio(s["hh_agree"], n), _ratio(s["hh_a"], n),
                                       _ratio(s["hh_b"], n), degenerate="strict")
    target = acc[:, None, :h]  # each human is the target
    out["ad"] = accuracy_distance(acc[:, h:, None], target, chance)  # (B, M, H)
    loo = leave_one_out_targets(s["k"][:, :h], s["n"][:, :h], v)
    out["ad_loo"] = accuracy_distance(acc[:, :h], loo, chance)  # (B, H)
    if "cue_n" in s:
        sm, tm = _ratio(s["shape"], s["cue_n"]), _ratio(s["texture"], s["cue_n"])
        out["shape_match"], out["shape_bias"] = sm, shape_bias(sm, tm)
    return out


def _pair_weights(v: np.ndarray) -> np.ndarray:
    """Weights ``v_a v_b`` of the human pairs a < b (same order as the pair columns)."""
    a, b = _human_pairs(v.shape[1])
    return v[:, a] * v[:, b]


def _regime_metrics(cells: list[dict[str, np.ndarray]], v: np.ndarray,
                    models: Sequence[str]) -> dict[tuple[str, str], np.ndarray]:
    """Average cell statistics over conditions, then humans; one (B,) array per (metric, observer)."""
    with quiet_nan_warnings():
        def over_conditions(name: str) -> np.ndarray:
            return np.nanmean(np.stack([c[name] for c in cells]), axis=0)

        acc_m, acc_h = over_conditions("acc_m"), over_conditions("acc_h")
        human_acc = _wmean(acc_h, v)
        vm = v[:, None, :]
        out: dict[tuple[str, str], np.ndarray] = {("accuracy", "humans"): human_acc}
        cobs, kap = _wmean(over_conditions("mh_cobs"), vm), _wmean(over_conditions("mh_kappa"), vm)
        ckap = _wmean(over_conditions("cmh_kappa"), vm)
        ad = _wmean(over_conditions("ad"), vm)
        ad_ceiling = _wmean(over_conditions("ad_loo"), v)
        ec_ceiling = _wmean(over_conditions("hh_kappa"), _pair_weights(v))
        out[("accuracy_distance", "ceiling")] = ad_ceiling
        out[("conditional_error_consistency", "ceiling")] = ec_ceiling
        has_cue = "shape_bias" in cells[0]
        if has_cue:
            out[("shape_match", "humans")] = _wmean(over_conditions("shape_match")[:, :v.shape[1]], v)
            out[("shape_bias", "humans")] = _wmean(over_conditions("shape_bias")[:, :v.shape[1]], v)
        h = v.shape[1]
        for j, model in enumerate(models):
            out[("accuracy", model)] = acc_m[:, j]
            out[("accuracy_difference", model)] = accuracy_difference(acc_m[:, j], human_acc)
            out[("observed_consistency", model)] = cobs[:, j]
            out[("error_consistency", model)] = kap[:, j]
            out[("accuracy_distance", model)] = ad[:, j]
            out[("accuracy_distance_ceiled", model)] = _ratio(ad[:, j], ad_ceiling)
            out[("conditional_error_consistency", model)] = ckap[:, j]
            out[("conditional_error_consistency_ceiled", model)] = _ratio(ckap[:, j], ec_ceiling)
            if has_cue:
                out[("shape_match", model)] = over_conditions("shape_match")[:, h + j]
                out[("shape_bias", model)] = over_conditions("shape_bias")[:, h + j]
    return out


PER_OBSERVER: dict[str, str] = {"observed_consistency": "mh_cobs", "error_consistency": "mh_kappa",
                                "accuracy_distance": "ad",
                                "conditional_error_consistency": "cmh_kappa"}


def _per_human(cells: list[dict[str, np.ndarray]], models: Sequence[str], humans: Sequence[str],
               confidence_level: float) -> list[dict[str, object]]:
    """Each model's fit to each human (averaged over conditions only), with percentile CIs."""
    rows: list[dict[str, object]] = []
    with quiet_nan_warnings():
        for metric, name in PER_OBSERVER.items():
            values = np.nanmean(np.stack([c[name] for c in cells]), axis=0)  # (B, M, H)
            low, high = percentile_interval(values[1:], confidence_level, axis=0)
            for j, model in enumerate(models):
                rows += [{"metric": metric, "model": model, "human": human,
                          "estimate": float(values[0, j, i]), "ci_low": float(low[j, i]),
                          "ci_high": float(high[j, i])} for i, human in enumerate(humans)]
    return rows


def experiment_profile(
    trials: pd.DataFrame,
    *,
    baseline: pd.Series | None = None,
    image_key: Callable[[str], str] = same_image,
    edges: Sequence[float] | None = DEFAULT_EDGES,
    chance: float = 0.0,
    degenerate: Degenerate = "undefined",
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    random_state: RandomState = None,
) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """One experiment's profile rows, their bootstrap values and the per-human model fits (see
    :func:`alignment_profile`)."""
    n_resamples = check_n_resamples(n_resamples)
    check_confidence_level(confidence_level)
    data = alignment_data(trials)
    h, m = data.n_humans, len(data.models)
    valid = baseline_mask(data, baseline, image_key)
    cue_mask = None
    if data.response is not None:
        shape, texture = cue_conflict_categories(data.images)
        scored = (shape != "") & (shape != texture)
        cue_mask = scored if scored.any() else None
    cols = _columns(data, valid, cue_mask)
    x = cols.matrix()
    regimes: list[tuple[str, np.ndarray]] = [("all", np.ones(data.images.size, dtype=bool))]
    if edges is not None:
        labels = difficulty_regimes(data.human_accuracy_per_image(), edges)
        regimes += [(label, labels == label) for label in regime_labels(edges)]
    conditions = sorted(set(data.condition.tolist()))
    people, stimuli = draw_resample_counts(data.condition.tolist(), h, n_resamples, random_state)
    w = np.vstack([np.ones((1, data.images.size)), stimuli]).astype(np.float32)
    v = np.vstack([np.ones((1, h)), people]).astype(float)
    step = max(1, MAX_BATCH_ELEMENTS // max(x.shape[1], data.images.size))
    rows, values, fits = [], [], []
    for regime, in_regime in regimes:
        cells = []
        for cond in conditions:
            g = in_regime & (data.condition == cond)
            if not g.any():
                continue
            xg = x * g[:, None]
            sums = np.vstack([w[i:i + step] @ xg for i in range(0, w.shape[0], step)]).astype(float)
            s = {name: sums[:, sl] for name, sl in cols.slices.items()}
            cells.append(_cell_metrics(s, v, h, m, chance, degenerate))
        if not cells:
            continue
        for (metric, observer), series in _regime_metrics(cells, v, data.models).items():
            rows.append({"regime": regime, "metric": metric, "observer": observer,
                         "estimate": float(series[0]), "n_images": int(in_regime.sum())})
            values.append(series[1:])
        fits += [{"regime": regime, **row} for row in
                 _per_human(cells, data.models, data.humans, confidence_level)]
    boot = np.asarray(values, dtype=float)
    low, high = percentile_interval(boot, confidence_level, axis=1)
    table = pd.DataFrame(rows)
    table["ci_low"], table["ci_high"] = low, high
    order = np.argsort(table["metric"].map({n: i for i, n in enumerate(METRICS)}).to_numpy(),
                       kind="stable")
    return table.iloc[order].reset_index(drop=True), boot[order], pd.DataFrame(fits)


def alignment_profile(
    trials: pd.DataFrame,
    *,
    baselines: dict[str, tuple[pd.Series, Callable[[str], str]]] | None = None,
    edges: Sequence[float] | None = DEFAULT_EDGES,
    chance: float = 0.0,
    degenerate: Degenerate = "undefined",
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    random_state: RandomState = None,
) -> AlignmentProfile:
    """Every metric per experiment, difficulty regime and model, with percentile CIs.

    ``trials``: tidy classification trials (``experiment, observer, group, stimulus, correct``;
    ``condition``, ``response`` where present). ``degenerate`` is error consistency's policy for
    constant observers; conditional error consistency and its ceiling use Kato & He's plain
    formula (``"strict"``: 0 where one observer is constant). ``baselines`` maps an experiment to its model
    baseline correctness (:func:`baseline_correct`) and the function naming each image's baseline
    image; experiments without one get unfiltered kappa as conditional error consistency (Kato &
    He 2026 score their baseline set so). ``edges`` bin images by human accuracy (None: only
    ``regime='all'``); ``chance`` enters accuracy distance. One resample draw per experiment
    (seeded from ``random_state``) serves every metric, regime and model.
    """
    check_degenerate(degenerate)
    if not 0.0 <= chance < 1.0:
        raise ValueError(f"chance must lie in [0, 1), got {chance!r}")
    frame = trials if "experiment" in trials.columns else trials.assign(experiment="all")
    unknown = sorted(set(baselines or {}) - set(frame["experiment"].astype(str)))
    if unknown:
        raise ValueError(f"baselines name experiment(s) {unknown} that the trials do not hold")
    experiments = sorted(frame["experiment"].astype(str).unique())
    seeds = as_rng(random_state).integers(0, 2**63, size=len(experiments))
    tables, boots, fits = [], [], []
    for experiment, seed in zip(experiments, seeds, strict=True):
        rows = frame[frame["experiment"].astype(str) == experiment]
        base, key = (baselines or {}).get(experiment, (None, same_image))
        table, boot, fit = experiment_profile(
            rows, baseline=base, image_key=key, edges=edges, chance=chance, degenerate=degenerate,
            n_resamples=n_resamples, confidence_level=confidence_level,
            random_state=int(seed))
        tables.append(table.assign(experiment=experiment))
        boots.append(boot)
        fits.append(fit.assign(experiment=experiment))
    table = pd.concat(tables, ignore_index=True)
    columns = ["experiment", "regime", "metric", "observer", "estimate", "ci_low", "ci_high",
               "n_images"]
    per_observer = pd.concat(fits, ignore_index=True)[
        ["experiment", "regime", "metric", "model", "human", "estimate", "ci_low", "ci_high"]]
    return AlignmentProfile(table[columns], np.vstack(boots), n_resamples, confidence_level,
                            per_observer)
