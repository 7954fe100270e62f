"""Psychophysical-Score: how humanlike a model's MLDS scales are (Richard Webster et al. 2023).

Each standard scale Psi (Psi_1 = 0 ... Psi_N = 1, N = 7 in the study) is summarised by its
skewness S(Psi) = -2 ((sum_i Psi_i - 1) / (N - 2) - 1/2): the mean of the N - 2 interior values
compared with a straight line, scaled so that S = 0 for a linear scale, S -> 1 when the interior
values approach 0 (perception changes late in the blend) and S -> -1 when they approach 1. A model
observer's score is the Spearman rank correlation between its skewnesses and the humans' across
sequences, with a bootstrap confidence interval over sequences. The spread of an observer's
skewnesses (their interquartile range) and a random observer put the score in context. The random observer
is our own baseline: fair coin flips on the humans' trials, fitted through the same pipeline. The
paper does not define its random baseline, and no published number of it has been reproduced here.
Its standard scales divide noise by a near-zero psi_N, so its skewness is heavy-tailed: the
variance swings by orders of magnitude between runs, which is why the spread reported is the IQR.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from humanlike.analysis._resampling import (
    ConfidenceInterval,
    as_rng,
    batch_size,
    check_n_resamples,
    confidence_interval,
    iter_batches,
    resample_indices,
)
from humanlike.analysis.mlds.batch import ScaleFits, fit_many


@dataclass(frozen=True)
class PsychophysicalScore:
    """Spearman ``rho`` between model and human skewnesses over ``n_sequences`` sequences, its
    bootstrap confidence interval ``ci`` (sequences resampled with replacement),
    the ``bootstrap_distribution`` and scipy's asymptotic ``p_value`` for rho = 0.
    ``n_undefined``: resamples whose rho is undefined (every resampled sequence tied on one side,
    likely with few sequences), left out of the percentile interval."""

    rho: float
    ci: ConfidenceInterval[float]
    p_value: float
    n_sequences: int
    confidence_level: float
    bootstrap_distribution: np.ndarray = field(repr=False)
    n_undefined: int = 0

    def summary(self) -> str:
        """rho with its CI, the number of sequences and the p-value, on one line."""
        low, high = self.ci
        return (
            f"Psychophysical-Score rho = {self.rho:.3f} [{low:.3f}, {high:.3f}] "
            f"({self.confidence_level:.0%} CI) over {self.n_sequences} sequences; "
            f"p = {self.p_value:.3g}"
        )

    def save(self, out_dir: str | Path) -> list[Path]:
        """Write ``psychophysical_score.json`` (rho, CI, p-value, sequences, confidence level)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        low, high = self.ci
        record = {
            "rho": float(self.rho),
            "ci_low": float(low),
            "ci_high": float(high),
            "p_value": float(self.p_value),
            "n_sequences": int(self.n_sequences),
            "confidence_level": float(self.confidence_level),
        }
        path = out / "psychophysical_score.json"
        path.write_text(json.dumps(record, indent=2) + "\n")
        return [path]


def scale_skewness(scale_std: np.ndarray) -> np.ndarray:
    """S(Psi) = -2 ((sum_i Psi_i - 1) / (N - 2) - 1/2) along the last axis of standard scales
    (Richard Webster et al. 2023; with N = 7 the divisor is 5)."""
    psi = np.asarray(scale_std, dtype=float)
    n = psi.shape[-1]
    if n < 3:
        raise ValueError(f"skewness needs scales with at least 3 levels, got {n}")
    return -2.0 * ((psi.sum(axis=-1) - 1.0) / (n - 2) - 0.5)


def skewness_frame(fits: ScaleFits, observer: str) -> pd.DataFrame:
    """Long frame ``[observer, <keys>, skewness, converged]`` of a :func:`fit_many` result."""
    out = fits.keys.copy()
    out.insert(0, "observer", observer)
    out["skewness"] = scale_skewness(fits.scale_std)
    out["converged"] = fits.converged
    return out


def _spearman(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman rho along ``axis`` of paired arrays (ties get average ranks)."""
    rx = stats.rankdata(x, axis=axis)
    ry = stats.rankdata(y, axis=axis)
    rx = rx - rx.mean(axis=axis, keepdims=True)
    ry = ry - ry.mean(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=axis) / np.sqrt((rx**2).sum(axis=axis) * (ry**2).sum(axis=axis))


def psychophysical_score(
    model_skewness: pd.Series | np.ndarray,
    human_skewness: pd.Series | np.ndarray,
    *,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    method: str = "percentile",
    random_state: int | np.random.Generator | None = None,
) -> PsychophysicalScore:
    """Spearman rho of model vs human skewness over sequences with a bootstrap CI (paired
    resampling of sequences, vectorised statistic; ``percentile``: resamples whose rho is
    undefined are counted and left out; another ``method``: ``scipy.stats.bootstrap``).

    Series are aligned on their index (sequence ids); arrays must be paired. Sequences where
    either skewness is not finite are dropped."""
    if isinstance(model_skewness, pd.Series) and isinstance(human_skewness, pd.Series):
        model_skewness, human_skewness = model_skewness.align(human_skewness, join="inner")
    x = np.asarray(model_skewness, dtype=float)
    y = np.asarray(human_skewness, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"skewness vectors must be 1-d and paired, got {x.shape} and {y.shape}")
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3:
        raise ValueError(f"need at least 3 sequences with finite skewness, got {x.size}")
    rho, p_value = stats.spearmanr(x, y)
    if method == "percentile":
        # sequences resampled in batches (never a loop per resample); a resample whose rho is
        # undefined is left out of the interval and counted, instead of turning it into NaN
        rng = as_rng(random_state)
        n_resamples = check_n_resamples(n_resamples)
        distribution = np.empty(n_resamples)
        for part in iter_batches(n_resamples, batch_size(x.size, n_resamples)):
            idx = resample_indices(x.size, part.stop - part.start, rng)
            distribution[part] = _spearman(x[idx], y[idx])
        ci = confidence_interval(distribution, confidence_level)
        undefined = int(np.isnan(distribution).sum())
    else:
        res = stats.bootstrap(
            (x, y),
            _spearman,
            paired=True,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            method=method,
            rng=np.random.default_rng(random_state),
            batch=max(1, 4_000_000 // x.size),
        )
        distribution = res.bootstrap_distribution
        ci = ConfidenceInterval(float(res.confidence_interval.low),
                                float(res.confidence_interval.high), float(confidence_level))
        undefined = int(np.isnan(distribution).sum())
    return PsychophysicalScore(
        rho=float(rho),
        ci=ci,
        p_value=float(p_value),
        n_sequences=int(x.size),
        confidence_level=confidence_level,
        bootstrap_distribution=distribution,
        n_undefined=undefined,
    )


def skewness_variance(skew: pd.DataFrame) -> pd.DataFrame:
    """Per observer, the variance (ddof = 1) of the skewness over sequences and the number of
    sequences, from a long frame with ``observer`` and ``skewness`` columns. Unstable for the
    random observer (heavy-tailed skewness): the score table uses :func:`skewness_spread`."""
    for col in ("observer", "skewness"):
        if col not in skew.columns:
            raise ValueError(f"skewness frame needs a {col!r} column; got {list(skew.columns)}")
    finite = skew[np.isfinite(skew["skewness"].to_numpy(dtype=float))]
    out = finite.groupby("observer", sort=False)["skewness"].agg(["var", "count"])
    return out.rename(columns={"var": "skewness_variance", "count": "n_sequences"}).reset_index()


def skewness_spread(skew: pd.DataFrame) -> pd.DataFrame:
    """Per observer, the interquartile range of the skewness over sequences (``skewness_iqr``,
    ``scipy.stats.iqr``) and the number of sequences: a spread that stays put under the random
    observer's heavy tail, where the variance does not."""
    for col in ("observer", "skewness"):
        if col not in skew.columns:
            raise ValueError(f"skewness frame needs a {col!r} column; got {list(skew.columns)}")
    finite = skew[np.isfinite(skew["skewness"].to_numpy(dtype=float))]
    out = finite.groupby("observer", sort=False)["skewness"].agg([stats.iqr, "count"])
    return out.rename(columns={"iqr": "skewness_iqr", "count": "n_sequences"}).reset_index()


def score_table(
    skew: pd.DataFrame,
    *,
    human: str = "human",
    key: str = "sequence",
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """One row per observer: Psychophysical-Score against ``human`` (rho, CI, p) and the
    interquartile range of its skewness (:func:`skewness_spread`), from a long frame
    ``[observer, <key>, skewness]``."""
    for col in ("observer", key, "skewness"):
        if col not in skew.columns:
            raise ValueError(f"skewness frame needs a {col!r} column; got {list(skew.columns)}")
    wide = skew.pivot_table(index=key, columns="observer", values="skewness", aggfunc="first")
    if human not in wide.columns:
        raise ValueError(f"observer {human!r} not found; observers are {list(wide.columns)}")
    rng = np.random.default_rng(random_state)
    spread = skewness_spread(skew).set_index("observer")
    rows = []
    for obs in wide.columns:  # one row per observer (a handful of models), not per resample
        row = {"observer": obs, "skewness_iqr": spread["skewness_iqr"].get(obs)}
        if obs != human:
            score = psychophysical_score(
                wide[obs],
                wide[human],
                n_resamples=n_resamples,
                confidence_level=confidence_level,
                random_state=rng,
            )
            row.update(
                rho=score.rho,
                ci_low=score.ci.low,
                ci_high=score.ci.high,
                p_value=score.p_value,
                n_sequences=score.n_sequences,
            )
        rows.append(row)
    return pd.DataFrame(rows)


def random_observer_triads(
    triads: pd.DataFrame,
    *,
    observer: str = "random",
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """The same trials answered by uniform random choices (response ~ Bernoulli(1/2))."""
    col = "response" if "response" in triads.columns else "resp"
    if col not in triads.columns:
        raise ValueError("triads need a 'response' (tidy) or 'resp' (R layout) column")
    rng = np.random.default_rng(random_state)
    out = triads.copy()
    out[col] = (rng.random(len(out)) < 0.5).astype(np.int64)
    out["participant"] = observer
    return out


def random_observer_skewness(
    triads: pd.DataFrame,
    *,
    by: str | Sequence[str] = "sequence",
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Skewness frame of a random observer answering the same trials, fitted like the humans."""
    fits = fit_many(random_observer_triads(triads, random_state=random_state), by=by)
    return skewness_frame(fits, "random")
