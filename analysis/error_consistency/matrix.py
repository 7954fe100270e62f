"""Kappa matrices over many observers, hierarchical summaries, and their stimulus bootstrap.

All pairs of observers are scored over the stimuli they share (Geirhos et al. 2020, eq. 3). Pair
kappas are summarised per condition as model-vs-human does (Geirhos et al. 2021, "Partial success
in closing the gap between human and machine vision"): the human-human mean (the ceiling used by
Brain-Score), each model's mean kappa to the humans, and the model-model mean; condition values
are averaged within an experiment and experiment values across experiments.

Confidence intervals resample stimuli with replacement within each condition, the same draws for
every observer (Klein et al. 2025, "Quantifying uncertainty in error consistency"), and push every
resample through the whole hierarchy. Resamples are multinomial count rows ``W`` (resamples x
stimuli); agreement and correctness sums for all pairs and all resamples are one product
``W @ X`` per condition, where ``X`` stacks the stimuli-by-pairs agreement matrix and the
stimuli-by-observers correctness matrix. No Python loop runs per resample.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from humanlike.analysis._resampling import (
    as_rng,
    batch_size,
    bootstrap_counts,
    check_confidence_level,
    check_n_resamples,
    counts_from_indices,
    iter_batches,
    percentile_interval,
    quiet_nan_warnings,
)
from humanlike.analysis.error_consistency.kappa import (
    DEFAULT_DEGENERATE,
    Degenerate,
    check_degenerate,
    degenerate_reason,
    kappa_from_rates,
    uninformative,
)

HUMAN = "human"
MODEL = "model"
GROUPS = (HUMAN, MODEL)
STAT_HUMAN_HUMAN = "human-human"
STAT_MODEL_HUMAN = "model-human"
STAT_MODEL_MODEL = "model-model"
ALL = "all"  # label of the single experiment / condition when no column is given


@dataclass(eq=False)
class ConditionTable:
    """One condition of one experiment: a stimuli-by-observers correctness table and its pairs."""

    experiment: str
    condition: str
    observers: list[str]
    groups: list[str]
    stimuli: np.ndarray
    correct: np.ndarray  # stimuli x observers, 1.0 / 0.0, NaN where the observer did not see it
    pair_a: np.ndarray = field(init=False)
    pair_b: np.ndarray = field(init=False)
    complete: bool = field(init=False)
    design: np.ndarray = field(init=False)  # float32 matrix X with W @ X giving all sums

    def __post_init__(self) -> None:
        n_obs = len(self.observers)
        self.pair_a, self.pair_b = np.triu_indices(n_obs, k=1)
        seen = ~np.isnan(self.correct)
        self.complete = bool(seen.all())
        c = np.nan_to_num(self.correct)
        ca, cb = c[:, self.pair_a], c[:, self.pair_b]
        agree = (ca == cb).astype(np.float32)
        if self.complete:
            self.design = np.hstack([agree, c.astype(np.float32)])
        else:
            shared = (seen[:, self.pair_a] & seen[:, self.pair_b]).astype(np.float32)
            self.design = np.hstack([shared, agree * shared, ca * shared, cb * shared]).astype(
                np.float32
            )

    @property
    def n_stimuli(self) -> int:
        return len(self.stimuli)

    @property
    def n_pairs(self) -> int:
        return len(self.pair_a)

    def rates(self, weights: np.ndarray) -> tuple[np.ndarray, ...]:
        """Return ``(n, c_obs, p_a, p_b)``, each resamples x pairs, for count rows ``weights``."""
        sums = (weights.astype(np.float32, copy=False) @ self.design).astype(np.float64)
        n_pairs = self.n_pairs
        if self.complete:
            n = weights.sum(axis=1, dtype=np.float64)[:, None]
            agree, corr = sums[:, :n_pairs], sums[:, n_pairs:] / n
            n_shared = np.broadcast_to(n, agree.shape)
            return n_shared, agree / n, corr[:, self.pair_a], corr[:, self.pair_b]
        n_shared, agree, ca, cb = np.split(sums, 4, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return n_shared, agree / n_shared, ca / n_shared, cb / n_shared


@dataclass(frozen=True, eq=False)
class KappaMatrix:
    """Pairwise error consistency of many observers with hierarchical summaries.

    ``pairs``: one row per (experiment, condition, observer_a, observer_b) with ``n`` shared
    stimuli, accuracies ``acc_a, acc_b`` on them, ``c_obs, c_exp, kappa`` (and ``ci_low, ci_high``
    after a bootstrap, with ``ci_dropped``: the resamples where the kappa was undefined and left out
    of the CI). ``summary``: one row per (level, experiment, condition, statistic, model)
    with ``kappa`` and ``n_pairs``; ``level`` is ``condition``, ``experiment`` or ``overall``;
    ``statistic`` is ``human-human`` (the ceiling), ``model-human`` (one row per model: its mean
    kappa to the humans) or ``model-model``. ``observers``: observer, group in display order.
    ``pair_distribution`` / ``summary_distribution``: bootstrap values (resamples x rows).
    """

    pairs: pd.DataFrame
    summary: pd.DataFrame
    observers: pd.DataFrame
    n_resamples: int = 0
    confidence_level: float = 0.95
    pair_distribution: np.ndarray | None = None
    summary_distribution: np.ndarray | None = None

    def matrix(self, experiment: str | None = None) -> pd.DataFrame:
        """Return the square observer-by-observer kappa matrix (diagonal 1).

        Pair kappas are averaged over conditions of ``experiment``; with ``experiment=None`` the
        per-experiment matrices are averaged in turn (entries NaN where a pair never met).
        """
        pairs = self.pairs
        if experiment is not None:
            if experiment not in set(pairs["experiment"]):
                raise ValueError(f"no experiment {experiment!r} in these pairs")
            pairs = pairs[pairs["experiment"] == experiment]
        per_exp = pairs.groupby(["experiment", "observer_a", "observer_b"], sort=False)[
            "kappa"
        ].mean()
        mean = per_exp.groupby(level=["observer_a", "observer_b"], sort=False).mean()
        met = set(mean.index.get_level_values(0)) | set(mean.index.get_level_values(1))
        names = [o for o in self.observers["observer"] if o in met]
        # one vectorised scatter (a .loc per pair took minutes at 300 observers: 44,850 pairs)
        where = pd.Index(names)
        a = where.get_indexer(mean.index.get_level_values(0))
        b = where.get_indexer(mean.index.get_level_values(1))
        values = np.full((len(names), len(names)), np.nan)
        values[a, b] = values[b, a] = mean.to_numpy(dtype=float)
        np.fill_diagonal(values, 1.0)
        out = pd.DataFrame(values, index=names, columns=names)
        out.index.name = "observer"
        return out

    def ceiling(self, experiment: str | None = None) -> float:
        """Return the mean human-human kappa of ``experiment`` (or the overall one)."""
        s = self.summary
        rows = s[(s["statistic"] == STAT_HUMAN_HUMAN)]
        rows = (
            rows[rows["level"] == "overall"]
            if experiment is None
            else rows[(rows["level"] == "experiment") & (rows["experiment"] == experiment)]
        )
        if rows.empty:
            raise ValueError("no human-human pairs for " + (experiment or "any experiment"))
        return float(rows["kappa"].iloc[0])


def _labels(trials: pd.DataFrame, column: str | None) -> pd.Series:
    """Return ``column`` as strings (missing values and no column: ``"all"``)."""
    if column is None:
        return pd.Series(ALL, index=trials.index)
    values = trials[column]
    return values.astype(str).mask(values.isna(), ALL)


def _require_columns(trials: pd.DataFrame, columns: Mapping[str, str | None]) -> None:
    if not isinstance(trials, pd.DataFrame):
        raise TypeError("trials must be a pandas DataFrame in tidy form (one row per trial)")
    for role, column in columns.items():
        if column is not None and column not in trials.columns:
            raise ValueError(
                f"trials has no column {column!r} (the {role} column); columns are "
                f"{list(trials.columns)}"
            )


def _correct_values(trials: pd.DataFrame, column: str) -> np.ndarray:
    values = trials[column]
    if values.isna().any():
        raise ValueError(f"column {column!r} has missing values; code unanswered trials as False")
    if values.dtype == bool:
        return values.to_numpy(dtype=float)
    if values.dtype == object:
        mapped = values.map(
            {True: 1.0, False: 0.0, "True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0}
        )
        if mapped.notna().all():
            return mapped.to_numpy(dtype=float)
    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.isna().any() or not numeric.isin([0, 1]).all():
        raise ValueError(f"column {column!r} must hold True/False or 0/1 correctness values")
    return numeric.to_numpy(dtype=float)


def condition_tables(
    trials: pd.DataFrame,
    observer: str = "observer",
    stimulus: str = "stimulus",
    correct: str = "correct",
    group: str | None = None,
    condition: str | None = None,
    experiment: str | None = None,
) -> tuple[list[ConditionTable], pd.DataFrame]:
    """Split a tidy trial frame into one stimuli-by-observers table per (experiment, condition).

    Returns the tables (sorted by experiment, condition; stimuli sorted as strings; observers
    humans first) and the observer/group frame. Raises ``ValueError`` naming a missing or
    malformed column, or an observer with two trials on one stimulus in one condition.
    """
    _require_columns(
        trials,
        {
            "observer": observer,
            "stimulus": stimulus,
            "correct": correct,
            "group": group,
            "condition": condition,
            "experiment": experiment,
        },
    )
    if trials.empty:
        raise ValueError("trials is empty")
    frame = pd.DataFrame(
        {
            "experiment": _labels(trials, experiment),
            "condition": _labels(trials, condition),
            "observer": trials[observer].astype(str),
            "stimulus": trials[stimulus].astype(str),
            "correct": _correct_values(trials, correct),
            "group": HUMAN if group is None else trials[group].astype(str),
        }
    )
    bad = sorted(set(frame["group"].unique()) - set(GROUPS))
    if bad:
        raise ValueError(f"column {group!r} must hold 'human' or 'model', found {bad}")
    groups = frame.groupby("observer")["group"].unique()
    mixed = groups[groups.map(len) > 1]
    if len(mixed):
        raise ValueError(f"column {group!r} gives observer {mixed.index[0]!r} more than one group")
    observers = (
        pd.DataFrame({"observer": groups.index, "group": groups.map(lambda g: g[0]).to_numpy()})
        .assign(_order=lambda d: d["group"].map({HUMAN: 0, MODEL: 1}))
        .sort_values(["_order", "observer"], kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )
    keys = ["experiment", "condition", "observer", "stimulus"]
    dup = frame.duplicated(keys)
    if dup.any():
        row = frame[dup].iloc[0]
        raise ValueError(
            f"observer {row['observer']!r} has more than one trial with {stimulus} "
            f"{row['stimulus']!r} (experiment {row['experiment']!r}, condition "
            f"{row['condition']!r}); drop repeated presentations first"
        )
    order = {name: i for i, name in enumerate(observers["observer"])}
    group_of = dict(zip(observers["observer"], observers["group"], strict=True))
    blocks = []
    for (exp, cond), part in frame.groupby(["experiment", "condition"], sort=True):
        table = part.pivot(index="stimulus", columns="observer", values="correct")
        names = sorted(table.columns, key=order.__getitem__)
        table = table[names]
        blocks.append(
            ConditionTable(
                experiment=str(exp),
                condition=str(cond),
                observers=list(names),
                groups=[group_of[n] for n in names],
                stimuli=table.index.to_numpy(),
                correct=table.to_numpy(dtype=float),
            )
        )
    return blocks, observers


@dataclass(eq=False)
class _Summariser:
    """Maps per-block pair kappas to every summary row (condition, experiment, overall levels)."""

    blocks: list[ConditionTable]
    stats: list[tuple[str, str]] = field(init=False)  # (statistic, model)
    memberships: list[np.ndarray] = field(init=False)  # per block: pairs x stats, 0/1
    experiments: list[str] = field(init=False)
    rows: pd.DataFrame = field(init=False)
    columns: np.ndarray = field(init=False)  # row -> column in the full level x stat layout

    def __post_init__(self) -> None:
        models = sorted(
            {
                o
                for b in self.blocks
                for o, g in zip(b.observers, b.groups, strict=True)
                if g == MODEL
            }
        )
        self.stats = (
            [(STAT_HUMAN_HUMAN, "")]
            + [(STAT_MODEL_HUMAN, m) for m in models]
            + [(STAT_MODEL_MODEL, "")]
        )
        index = {s: k for k, s in enumerate(self.stats)}
        self.memberships = []
        counts = []
        for b in self.blocks:
            m = np.zeros((b.n_pairs, len(self.stats)))
            for p, (i, j) in enumerate(zip(b.pair_a, b.pair_b, strict=True)):
                gi, gj = b.groups[i], b.groups[j]
                if gi == HUMAN and gj == HUMAN:
                    m[p, index[(STAT_HUMAN_HUMAN, "")]] = 1
                elif gi == MODEL and gj == MODEL:
                    m[p, index[(STAT_MODEL_MODEL, "")]] = 1
                else:
                    model = b.observers[j] if gj == MODEL else b.observers[i]
                    m[p, index[(STAT_MODEL_HUMAN, model)]] = 1
            self.memberships.append(m)
            counts.append(m.sum(axis=0))
        self.experiments = sorted({b.experiment for b in self.blocks})
        rows, columns = [], []
        n_stats = len(self.stats)
        for k, (b, c) in enumerate(zip(self.blocks, counts, strict=True)):
            for s in np.flatnonzero(c):
                rows.append(("condition", b.experiment, b.condition, *self.stats[s], int(c[s])))
                columns.append(k * n_stats + s)
        base = len(self.blocks) * n_stats
        for e, exp in enumerate(self.experiments):
            c = sum(cnt for b, cnt in zip(self.blocks, counts, strict=True) if b.experiment == exp)
            for s in np.flatnonzero(c):
                rows.append(("experiment", exp, ALL, *self.stats[s], int(c[s])))
                columns.append(base + e * n_stats + s)
        base += len(self.experiments) * n_stats
        total = sum(counts)
        for s in np.flatnonzero(total):
            rows.append(("overall", ALL, ALL, *self.stats[s], int(total[s])))
            columns.append(base + s)
        self.rows = pd.DataFrame(
            rows, columns=["level", "experiment", "condition", "statistic", "model", "n_pairs"]
        )
        self.columns = np.asarray(columns, dtype=int)

    def __call__(self, kappas: list[np.ndarray]) -> np.ndarray:
        """Return resamples x summary-rows values from per-block resamples x pairs kappas."""
        with quiet_nan_warnings():  # all-NaN means stay NaN
            per_block = []
            for k, m in zip(kappas, self.memberships, strict=True):
                finite = np.isfinite(k)
                num = np.where(finite, k, 0.0) @ m
                den = finite.astype(float) @ m
                per_block.append(np.where(den > 0, num / np.where(den > 0, den, 1), np.nan))
            per_exp = [
                np.nanmean(
                    np.stack(
                        [
                            v
                            for b, v in zip(self.blocks, per_block, strict=True)
                            if b.experiment == exp
                        ]
                    ),
                    axis=0,
                )
                for exp in self.experiments
            ]
            overall = np.nanmean(np.stack(per_exp), axis=0)
        full = np.concatenate(per_block + per_exp + [overall], axis=1)
        return full[:, self.columns]


def _pairs_frame(
    blocks: list[ConditionTable], rates: list[tuple[np.ndarray, ...]], kappas
) -> pd.DataFrame:
    parts = []
    for b, (n, c_obs, p_a, p_b), k in zip(blocks, rates, kappas, strict=True):
        obs = np.asarray(b.observers)
        grp = np.asarray(b.groups)
        parts.append(
            pd.DataFrame(
                {
                    "experiment": b.experiment,
                    "condition": b.condition,
                    "observer_a": obs[b.pair_a],
                    "observer_b": obs[b.pair_b],
                    "group_a": grp[b.pair_a],
                    "group_b": grp[b.pair_b],
                    "n": n[0].astype(int),
                    "acc_a": p_a[0],
                    "acc_b": p_b[0],
                    "c_obs": c_obs[0],
                    "c_exp": p_a[0] * p_b[0] + (1 - p_a[0]) * (1 - p_b[0]),
                    "kappa": k[0],
                }
            )
        )
    pairs = pd.concat(parts, ignore_index=True)
    return pairs.assign(**informative_columns(pairs))


def informative_columns(pairs: pd.DataFrame) -> dict[str, pd.Series]:
    """``informative`` (both accuracies strictly between 0 and 1: the pair has errors to compare)
    and ``reason`` (why not: each constant observer and its accuracy) of a pairs frame."""
    acc_a, acc_b = pairs["acc_a"].to_numpy(float), pairs["acc_b"].to_numpy(float)
    flat = uninformative(acc_a, acc_b)
    reasons = [degenerate_reason(a, b, str(oa), str(ob)) if f else ""
               for a, b, oa, ob, f in zip(acc_a, acc_b, pairs["observer_a"], pairs["observer_b"],
                                          flat, strict=True)]
    return {"informative": pd.Series(~flat, index=pairs.index),
            "reason": pd.Series(reasons, index=pairs.index, dtype=object)}


def _block_indices(
    indices: np.ndarray | Mapping[tuple[str, str], np.ndarray], blocks: list[ConditionTable]
) -> list[np.ndarray]:
    if not isinstance(indices, Mapping):
        if len(blocks) != 1:
            raise ValueError(
                "with several conditions pass indices as a dict {(experiment, condition): array}"
            )
        indices = {(blocks[0].experiment, blocks[0].condition): indices}
    out = []
    n_resamples = None
    for b in blocks:
        key = (b.experiment, b.condition)
        if key not in indices:
            raise ValueError(f"indices has no entry for (experiment, condition) {key}")
        idx = np.asarray(indices[key])
        if idx.ndim != 2 or idx.shape[1] != b.n_stimuli:
            raise ValueError(
                f"indices for {key} must have shape (n_resamples, {b.n_stimuli}), got {idx.shape}"
            )
        if n_resamples is not None and idx.shape[0] != n_resamples:
            raise ValueError("indices of all conditions must have the same number of resamples")
        n_resamples = idx.shape[0]
        out.append(idx)
    return out


def kappa_matrix(
    trials: pd.DataFrame,
    *,
    observer: str = "observer",
    stimulus: str = "stimulus",
    correct: str = "correct",
    group: str | None = None,
    condition: str | None = None,
    experiment: str | None = None,
    degenerate: Degenerate = DEFAULT_DEGENERATE,
    unbiased: bool = False,
    n_resamples: int = 0,
    confidence_level: float = 0.95,
    random_state: int | np.random.Generator | None = None,
    indices: np.ndarray | Mapping[tuple[str, str], np.ndarray] | None = None,
    batch: int | None = None,
) -> KappaMatrix:
    """Return all pairwise kappas of a tidy trial frame with hierarchical summaries and CIs.

    ``trials`` has one row per (observer, stimulus[, condition, experiment]); ``correct`` holds
    True/False or 0/1; ``group`` (optional) labels each observer ``human`` or ``model`` (all are
    humans without it). Kappa follows Geirhos et al. (2020, eq. 3) with the ``degenerate`` policy
    of :func:`~humanlike.analysis.error_consistency.kappa.kappa_from_rates`. With ``n_resamples > 0`` stimuli are
    resampled with replacement within each condition (same draws for all observers) and each
    resample is carried through the whole hierarchy; ``ci_low, ci_high`` are percentile bounds.
    ``indices`` fixes the draws: an (n_resamples x n_stimuli) array of positions into the condition's
    stimuli sorted as strings, or a dict of them keyed by ``(experiment, condition)`` (labels
    are ``"all"`` when no column is given). ``batch`` bounds how many resamples are held at once.
    """
    check_degenerate(degenerate)
    blocks, observers = condition_tables(
        trials, observer, stimulus, correct, group, condition, experiment
    )
    if not any(b.n_pairs for b in blocks):
        raise ValueError("need at least two observers in one condition to form a pair")
    summarise = _Summariser(blocks)

    def kappas_for(weights: list[np.ndarray]) -> tuple[list, list]:
        rates = [b.rates(w) for b, w in zip(blocks, weights, strict=True)]
        kaps = [
            kappa_from_rates(c, pa, pb, n, degenerate=degenerate, unbiased=unbiased)
            for n, c, pa, pb in rates
        ]
        return rates, kaps

    rates, kaps = kappas_for([np.ones((1, b.n_stimuli), dtype=np.float32) for b in blocks])
    pairs = _pairs_frame(blocks, rates, kaps)
    summary = summarise.rows.copy()
    summary["kappa"] = summarise(kaps)[0]
    if indices is not None:
        block_idx = _block_indices(indices, blocks)
        n_resamples = block_idx[0].shape[0]
    if not n_resamples:
        return KappaMatrix(pairs=pairs, summary=summary, observers=observers)

    n_resamples = check_n_resamples(n_resamples)
    check_confidence_level(confidence_level)
    rng = as_rng(random_state)
    step = batch_size(max(b.n_stimuli for b in blocks), n_resamples, batch)
    pair_dist = np.empty((n_resamples, len(pairs)))
    summary_dist = np.empty((n_resamples, len(summary)))
    for sl in iter_batches(n_resamples, step):
        size = sl.stop - sl.start
        if indices is not None:
            weights = [
                counts_from_indices(idx[sl], b.n_stimuli)
                for idx, b in zip(block_idx, blocks, strict=True)
            ]
        else:
            weights = [bootstrap_counts(b.n_stimuli, size, rng) for b in blocks]
        _, kaps = kappas_for(weights)
        pair_dist[sl] = np.concatenate(kaps, axis=1)
        summary_dist[sl] = summarise(kaps)
    pairs["ci_low"], pairs["ci_high"] = percentile_interval(pair_dist, confidence_level)
    summary["ci_low"], summary["ci_high"] = percentile_interval(summary_dist, confidence_level)
    # resamples left out of each CI: the pair's (or every pair of the row's) kappa undefined
    pairs["ci_dropped"] = np.isnan(pair_dist).sum(axis=0)
    summary["ci_dropped"] = np.isnan(summary_dist).sum(axis=0)
    return KappaMatrix(
        pairs=pairs,
        summary=summary,
        observers=observers,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        pair_distribution=pair_dist,
        summary_distribution=summary_dist,
    )
