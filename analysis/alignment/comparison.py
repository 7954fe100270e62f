"""Which model differences the alignment profile decides, and how far its metrics agree.

Every metric of a profile shares one draw of resamples (:mod:`.profile`), so the difference of two
models on a metric is bootstrapped **paired**: resample ``b`` of model A minus resample ``b`` of
model B. Each difference gets a percentile CI and the two-sided percentile-test p-value (Davison &
Hinkley 1997, ch. 4; ``_resampling.bootstrap_p_value``), Holm-corrected over the model pairs of one
experiment and metric (Holm 1979: valid under any dependence, and the pairs share their models).
The metrics' agreement is the rank correlation across models between two metrics (Spearman's rho
and Kendall's tau, scipy; Ahlert et al. 2024 compare alignment metrics so), with a CI for rho from
the same resamples.

Metrics are oriented so that higher means more humanlike: ``accuracy_difference`` enters as
``-|a_m - a_h|`` (closer to the humans' accuracy), every other compared metric as it is (Brain-Score
scores shape bias raw). ``accuracy`` (not an alignment metric) and the ``*_ceiled`` metrics (each
model divided by the same ceiling per resample, so the same ranks and decisions as the raw metric)
are not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from humanlike.analysis._resampling import (
    bootstrap_p_value,
    percentile_interval,
    quiet_nan_warnings,
)
from humanlike.analysis.alignment.profile import AlignmentProfile

#: Metrics compared between models and across metrics, in table order.
COMPARED: tuple[str, ...] = (
    "accuracy_difference",
    "observed_consistency",
    "error_consistency",
    "accuracy_distance",
    "conditional_error_consistency",
    "shape_match",
    "shape_bias",
)
#: Rows of the profile that are references beside the models, not models.
REFERENCES: tuple[str, ...] = ("humans", "ceiling")


def humanlike_values(metric: str, values: np.ndarray) -> np.ndarray:
    """``values`` of ``metric`` oriented so that higher is more humanlike (see the module)."""
    return -np.abs(values) if metric == "accuracy_difference" else values


@dataclass(frozen=True)
class ProfileComparison:
    """A profile with its decided model differences and the metrics' rank agreement."""

    profile: AlignmentProfile
    decided: pd.DataFrame
    agreement: pd.DataFrame
    alpha: float
    regime: str = "all"
    notes: list[str] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        """The models of the profile (every observer that is not a reference row)."""
        observers = self.profile.table["observer"].astype(str)
        return sorted(set(observers) - set(REFERENCES))

    def tables(self) -> dict[str, pd.DataFrame]:
        """``alignment_profile``, ``alignment_per_observer``, ``alignment_decided`` and
        ``alignment_agreement``, as ``humanlike score --out`` writes them."""
        return {"alignment_profile": self.profile.table,
                "alignment_per_observer": self.profile.per_observer,
                "alignment_decided": self.decided, "alignment_agreement": self.agreement}

    def summary(self) -> str:
        """Each experiment's metrics per model (estimate [CI]), the decided pairs, the agreement."""
        lines = [f"alignment profile (regime {self.regime}, {self.profile.n_resamples} shared "
                 f"resamples, {self.profile.confidence_level:.0%} CIs; pairs Holm-corrected at "
                 f"alpha {self.alpha:g})"]
        for experiment, wide in profile_cells(self.profile, self.regime).items():
            lines.append(f"  {experiment}:")
            text = wide.to_string(na_rep="")
            lines += ["    " + line for line in text.splitlines()]
            said = decided_phrases(self.decided[self.decided["experiment"] == experiment])
            lines.append("    decided: " + ("; ".join(said) if said else "none"))
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values: ``max_{j <= i} min(1, (k - j + 1) p_(j))`` in
    sorted order (statsmodels' ``multipletests(method="holm")``, which costs a garbage collection
    per call)."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    steps = np.minimum(1.0, (p.size - np.arange(p.size)) * p[order])
    adjusted = np.empty_like(p)
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


def decided_phrases(decided: pd.DataFrame) -> list[str]:
    """'<more humanlike> over <other> on <metric>' for each decided row of :func:`compare_models`."""
    out = []
    for row in decided[decided["decided"]].to_dict("records"):
        other = row["b"] if row["more_humanlike"] == row["a"] else row["a"]
        out.append(f"{row['more_humanlike']} over {other} on {str(row['metric']).replace('_', ' ')}")
    return out


def _model_rows(profile: AlignmentProfile, regime: str,
                metrics: tuple[str, ...]) -> pd.DataFrame:
    t = profile.table
    keep = ((t["regime"] == regime) & t["metric"].isin(metrics)
            & ~t["observer"].isin(REFERENCES))
    return t[keep]


def compare_models(profile: AlignmentProfile, *, regime: str = "all", alpha: float = 0.05,
                   metrics: tuple[str, ...] = COMPARED) -> pd.DataFrame:
    """Every pair of models on every compared metric of each experiment: the humanlike-oriented
    difference ``a - b`` with its paired-bootstrap CI, p-value, Holm-adjusted p-value over the
    pairs, whether it is decided (adjusted p <= ``alpha``) and the model it favours."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    rows_all = _model_rows(profile, regime, metrics)
    out: list[dict[str, object]] = []
    for (experiment, metric), rows in rows_all.groupby(["experiment", "metric"], sort=False):
        models = rows["observer"].astype(str).to_numpy()
        order = np.argsort(models)
        models = models[order]
        index = rows.index.to_numpy()[order]
        est = humanlike_values(str(metric), rows["estimate"].to_numpy(float)[order])
        boot = humanlike_values(str(metric), profile.bootstrap[index])
        pairs = list(combinations(range(len(models)), 2))
        if not pairs:
            continue
        a, b = np.array(pairs).T
        diff_boot = boot[a] - boot[b]  # paired: the same resample in both rows
        low, high = percentile_interval(diff_boot, profile.confidence_level, axis=1)
        p = np.array([bootstrap_p_value(d) for d in diff_boot])  # one per pair, not per resample
        adjusted = np.full(p.shape, np.nan)
        finite = np.isfinite(p) & np.isfinite(est[a] - est[b])
        if finite.any():
            adjusted[finite] = holm(p[finite])
        for k, (i, j) in enumerate(pairs):
            difference = float(est[i] - est[j])
            decided = bool(np.isfinite(adjusted[k]) and adjusted[k] <= alpha)
            out.append({"experiment": experiment, "metric": metric, "a": models[i],
                        "b": models[j], "difference": difference, "ci_low": float(low[k]),
                        "ci_high": float(high[k]), "p_value": float(p[k]),
                        "p_holm": float(adjusted[k]), "decided": decided,
                        "more_humanlike": (models[i] if difference > 0 else models[j])
                        if decided else ""})
    columns = ["experiment", "metric", "a", "b", "difference", "ci_low", "ci_high", "p_value",
               "p_holm", "decided", "more_humanlike"]
    return pd.DataFrame(out, columns=columns)


def _centred_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks along axis 0 (the models) minus their mean; NaN columns stay NaN."""
    ranks = stats.rankdata(values, axis=0, nan_policy="propagate")
    return ranks - ranks.mean(axis=0)


def _spearman_rows(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Spearman's rho of each column: Pearson r of the centred average ranks."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=0) / np.sqrt((rx**2).sum(axis=0) * (ry**2).sum(axis=0))


def metric_agreement(profile: AlignmentProfile, *, regime: str = "all",
                     metrics: tuple[str, ...] = COMPARED) -> pd.DataFrame:
    """Each pair of compared metrics of each experiment: Spearman's rho and Kendall's tau across
    its models (humanlike-oriented values; scipy), and a percentile CI of rho over the shared
    resamples. Experiments with fewer than three models have no rows (two models always give
    +-1)."""
    rows_all = _model_rows(profile, regime, metrics)
    out: list[dict[str, object]] = []
    for experiment, rows in rows_all.groupby("experiment", sort=False):
        wide = rows.pivot(index="observer", columns="metric", values="estimate")
        present = [m for m in metrics if m in wide.columns and wide[m].notna().all()]
        if len(wide) < 3:
            continue
        models = sorted(wide.index.astype(str))
        where = {(str(r.metric), str(r.observer)): i for i, r in zip(rows.index, rows.itertuples())}
        values = {m: humanlike_values(m, wide.loc[models, m].to_numpy(float)) for m in present}
        ranks = {m: _centred_ranks(humanlike_values(
            m, profile.bootstrap[[where[(m, o)] for o in models]])) for m in present}
        for m1, m2 in combinations(present, 2):
            x, y = values[m1], values[m2]
            with quiet_nan_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                rho = stats.spearmanr(x, y).statistic
                tau = stats.kendalltau(x, y).statistic
                rho_boot = _spearman_rows(ranks[m1], ranks[m2])
            low, high = percentile_interval(rho_boot, profile.confidence_level)
            out.append({"experiment": experiment, "metric_a": m1, "metric_b": m2,
                        "n_models": len(models), "spearman": float(rho), "ci_low": float(low),
                        "ci_high": float(high), "kendall": float(tau)})
    columns = ["experiment", "metric_a", "metric_b", "n_models", "spearman", "ci_low", "ci_high",
               "kendall"]
    return pd.DataFrame(out, columns=columns)


def compare_profile(profile: AlignmentProfile, *, regime: str = "all", alpha: float = 0.05,
                    metrics: tuple[str, ...] = COMPARED,
                    notes: list[str] | None = None) -> ProfileComparison:
    """The profile with :func:`compare_models` and :func:`metric_agreement` of ``regime``; a
    note when too few resamples leave every difference undecidable."""
    decided = compare_models(profile, regime=regime, alpha=alpha, metrics=metrics)
    notes = list(notes or [])
    if len(decided):
        pairs = int(decided.groupby(["experiment", "metric"]).size().max())
        smallest = min(1.0, pairs * 2 / (profile.n_resamples + 1))
        if smallest > alpha:
            notes.append(f"with {profile.n_resamples} resamples no difference can be decided: the "
                         f"smallest Holm-adjusted p over {pairs} pairs is {smallest:.3g} > alpha "
                         f"{alpha:g}; at least {int(np.ceil(2 * pairs / alpha)) - 1} resamples "
                         "are needed")
    return ProfileComparison(profile, decided,
                             metric_agreement(profile, regime=regime, metrics=metrics), alpha,
                             regime, notes)


def profile_cells(profile: AlignmentProfile, regime: str = "all",
                  metrics: tuple[str, ...] | None = None,
                  digits: int = 3) -> dict[str, pd.DataFrame]:
    """Per experiment, metrics x observers (models, then the reference rows) as
    ``'estimate [ci_low, ci_high]'`` text, the metrics in profile order; NaN where none."""
    t = profile.table[profile.table["regime"] == regime]
    if metrics is not None:
        t = t[t["metric"].isin(metrics)]
    out = {}
    for experiment, rows in t.groupby("experiment", sort=True):
        text = [f"{e:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]" if np.isfinite(e) else "n/a"
                for e, lo, hi in rows[["estimate", "ci_low", "ci_high"]].to_numpy(float)]
        cells = rows.assign(cell=text)
        wide = cells.pivot(index="metric", columns="observer", values="cell")
        observers = sorted(set(wide.columns) - set(REFERENCES)) + [
            r for r in REFERENCES if r in wide.columns]
        order = [m for m in dict.fromkeys(rows["metric"]) if m in wide.index]
        out[str(experiment)] = wide.reindex(index=order, columns=observers)
    return out
