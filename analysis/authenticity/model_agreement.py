"""Error consistency of each participant with each candidate model, tested against the human-model
maximum, and with the other participants (Geirhos et al. 2020: kappa on trial-by-trial
correctness, computed per condition and averaged over conditions weighted by trials)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from humanlike.analysis.authenticity.kappa import kappa_2x2, reference_variance
from humanlike.analysis.authenticity.reference import ALPHA, HUMAN_MODEL_EC_MAX, MIN_SCORED_TRIALS

MIN_CONDITION_TRIALS = 10
"""A condition with fewer shared trials is left out of the average (its kappa is too rough)."""


def first_presentations(trials: pd.DataFrame) -> pd.DataFrame:
    """Each participant's first answer to each image with a known class in each task:
    ``participant``, ``stimulus``, ``condition`` (the task and the image's condition, ``""`` where
    the design has neither: kappa is averaged over these), ``correct``."""
    known = trials[trials["category"].notna()]
    order = [c for c in ("participant", "trial_index") if c in known]
    task = (known["task"].fillna("").astype(str) if "task" in known
            else pd.Series("", index=known.index))
    known = known.assign(_task=task).sort_values(order, kind="stable").drop_duplicates(
        ["participant", "_task", "stimulus"])
    condition = known["_task"] + (("/" + known["condition"].fillna("").astype(str))
                                  if "condition" in known else "")
    return pd.DataFrame({"participant": known["participant"].to_numpy(),
                         "stimulus": known["stimulus"].astype(str).to_numpy(),
                         "condition": condition.to_numpy(),
                         "correct": known["correct"].astype(bool).to_numpy()})


def _pooled(frame: pd.DataFrame, keys: list[str], reference: float | None = None) -> pd.DataFrame:
    """Condition kappas (from ``both``, ``first``, ``second``, ``n`` per key and condition) averaged
    over conditions with weights n_c / N; the variance sum_c (n_c / N)^2 var_c, var_c at the
    estimate, or with ``reference`` at the condition's table whose kappa is the reference."""
    k, var = kappa_2x2(frame["both"], frame["first"], frame["second"], frame["n"])
    if reference is not None:
        var = np.where(np.isfinite(k), reference_variance(
            frame["first"], frame["second"], frame["n"], reference), np.nan)
    frame = frame.assign(kappa=k, var=var)
    frame = frame[np.isfinite(frame["kappa"]) & (frame["n"] >= MIN_CONDITION_TRIALS)]
    weight = frame["n"] / frame.groupby(keys)["n"].transform("sum")
    frame = frame.assign(wk=weight * frame["kappa"], wv=weight ** 2 * frame["var"])
    out = frame.groupby(keys)[["wk", "wv", "n"]].sum()
    return out.rename(columns={"wk": "kappa", "wv": "var"})


def model_agreement(trials: pd.DataFrame, models: pd.DataFrame,
                    reference: float = HUMAN_MODEL_EC_MAX,
                    first: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per participant, the candidate model it agrees with most: ``ec_model``, ``ec_model_kappa``,
    ``ec_model_se`` (the SE were kappa at the reference: a score test, ``reference_variance``),
    ``ec_model_z`` = (kappa - reference) / SE and ``ec_model_p``, the one-sided p-value
    Bonferroni-corrected over the models. ``models`` has ``model``, ``stimulus``,
    ``response``; a model is right where its response is the image's class in ``trials``.
    ``first``: ``first_presentations(trials)`` where already computed."""
    mine = first_presentations(trials) if first is None else first
    known = trials.dropna(subset=["category"]).drop_duplicates("stimulus")
    truth = pd.Series(known["category"].astype(str).to_numpy(), index=known["stimulus"].astype(str))
    m = models.assign(stimulus=models["stimulus"].astype(str)).drop_duplicates(["model", "stimulus"])
    m = m.assign(m_correct=(m["response"].astype(str) == m["stimulus"].map(truth).astype(str))
                 & m["stimulus"].isin(truth.index))
    joined = mine.merge(m[["model", "stimulus", "m_correct"]], on="stimulus")
    columns = ["ec_model", "ec_model_kappa", "ec_model_se", "ec_model_z", "ec_model_p"]
    if joined.empty:
        return pd.DataFrame(columns=columns)
    joined["both"] = joined["correct"] & joined["m_correct"]
    counts = joined.groupby(["participant", "model", "condition"]).agg(
        both=("both", "sum"), first=("correct", "sum"), second=("m_correct", "sum"),
        n=("correct", "size")).reset_index()
    pooled = _pooled(counts, ["participant", "model"], reference)
    pooled = pooled[pooled["n"] >= MIN_SCORED_TRIALS]
    se = np.sqrt(pooled["var"])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, (pooled["kappa"] - reference) / se,
                     np.sign(pooled["kappa"] - reference) * np.inf)
    pooled = pooled.assign(se=se, z=z).reset_index()
    n_models = pooled.groupby("participant")["model"].transform("size")
    pooled["p"] = np.minimum(stats.norm.sf(pooled["z"]) * n_models, 1.0)
    best = pooled.sort_values(["participant", "z"], ascending=[True, False]).drop_duplicates(
        "participant").set_index("participant")
    return pd.DataFrame({"ec_model": best["model"], "ec_model_kappa": best["kappa"],
                         "ec_model_se": best["se"], "ec_model_z": best["z"], "ec_model_p": best["p"]})


def human_agreement(trials: pd.DataFrame, first: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per participant: ``ec_human_mean`` and ``ec_human_max``, its condition-averaged kappa with
    every other participant over their shared images (masked matrix products per condition;
    pairs sharing fewer than ``MIN_SCORED_TRIALS`` images are left out; ``first`` as in
    ``model_agreement``)."""
    mine = first_presentations(trials) if first is None else first
    people = np.sort(mine["participant"].unique())
    if len(people) < 2:
        return pd.DataFrame(columns=["ec_human_mean", "ec_human_max"], dtype=float)
    size = len(people)
    totals = {key: np.zeros((size, size)) for key in ("wk", "wv", "n")}
    per_condition = []
    for _condition, block in mine.groupby("condition"):  # one matrix product per condition
        rows = np.searchsorted(people, block["participant"].to_numpy())
        cols, stimuli = pd.factorize(block["stimulus"])
        seen = np.zeros((size, len(stimuli)))
        right = np.zeros((size, len(stimuli)))
        seen[rows, cols] = 1.0
        right[rows, cols] = block["correct"].to_numpy(dtype=float)
        n = seen @ seen.T
        k, var = kappa_2x2(right @ right.T, right @ seen.T, seen @ right.T, n)
        ok = np.isfinite(k) & (n >= MIN_CONDITION_TRIALS)
        per_condition.append((np.where(ok, n, 0.0), np.where(ok, k, 0.0), np.where(ok, var, 0.0)))
    total_n = sum(n for n, _, _ in per_condition)
    with np.errstate(divide="ignore", invalid="ignore"):
        for n, k, var in per_condition:
            w = n / total_n
            totals["wk"] += np.nan_to_num(w * k)
            totals["wv"] += np.nan_to_num(w ** 2 * var)
    kappa = np.where(total_n >= MIN_SCORED_TRIALS, totals["wk"], np.nan)
    np.fill_diagonal(kappa, np.nan)
    with warnings.catch_warnings():  # a participant sharing no images with anyone: all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return pd.DataFrame({"ec_human_mean": np.nanmean(kappa, axis=1),
                             "ec_human_max": np.nanmax(kappa, axis=1)},
                            index=pd.Index(people, name="participant"))


def decisive(agreement: pd.DataFrame, alpha: float = ALPHA) -> pd.Series:
    """Participants whose kappa with a model is significantly above the human-model maximum."""
    return agreement["ec_model_p"] < alpha
