"""Does a participant's answer depend on the image shown? Kappa between response and true class
against stimulus-independent responding, and the change of accuracy across difficulty levels."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from humanlike.analysis.authenticity.kappa import null_variance
from humanlike.analysis.authenticity.reference import MIN_SCORED_TRIALS


def response_truth_kappa(trials: pd.DataFrame) -> pd.DataFrame:
    """Per participant: Cohen's kappa of response against true class over the trials with a
    known class, and its z under independence (Fleiss et al. 1969 eq. 14). A responder who ignores
    the image (a fixed key, replayed answers) has kappa 0 whatever its response mix; one answer on
    every trial gives variance 0 and z 0. Columns ``n_known``, ``stimulus_kappa``,
    ``stimulus_z`` (NaN under ``MIN_SCORED_TRIALS`` trials)."""
    known = trials.loc[trials["category"].notna(), ["participant", "response", "category"]]
    known = known.astype({"response": str, "category": str})
    n = known.groupby("participant").size()
    p_o = (known["response"] == known["category"]).groupby(known["participant"]).mean()
    f = known.groupby(["participant", "response"]).size().div(n, level="participant")
    g = known.groupby(["participant", "category"]).size().div(n, level="participant")
    f.index.names = g.index.names = ["participant", "label"]
    both = pd.concat({"f": f, "g": g}, axis=1).fillna(0.0)
    p_e = (both["f"] * both["g"]).groupby(level="participant").sum()
    cross = (both["f"] * both["g"] * (both["f"] + both["g"])).groupby(level="participant").sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (p_o - p_e) / (1.0 - p_e)
        var0 = pd.Series(null_variance(p_e, cross, n), index=n.index)
        z: pd.Series = (kappa / np.sqrt(var0)).where(var0 > 0, 0.0)  # one answer: no evidence
    out = pd.DataFrame({"n_known": n, "stimulus_kappa": kappa.where(p_e < 1), "stimulus_z": z})
    short = out["n_known"] < MIN_SCORED_TRIALS
    out.loc[short, ["stimulus_kappa", "stimulus_z"]] = np.nan
    return out


def numeric_levels(condition: pd.Series) -> pd.Series:
    """The number in each condition name (``c30`` -> 30, ``0.2`` -> 0.2), NaN where none."""
    codes, names = pd.factorize(condition.astype(str))  # a few names, many trials
    numbers = pd.to_numeric(pd.Series(names, dtype=object).str.extract(
        r"(-?\d+(?:\.\d+)?)", expand=False), errors="coerce").to_numpy(dtype=float)
    numbers = np.append(numbers, np.nan)  # code -1 (a missing name) reads the NaN at the end
    return pd.Series(numbers[codes], index=condition.index)


def difficulty_slope(trials: pd.DataFrame) -> pd.DataFrame:
    """Per participant with trials at three or more numeric levels (``level``, else the number in
    ``condition``): the least-squares slope of correctness on the standardised level and its z
    (a linear-probability model, binomial SE at the fitted slope: Agresti 2013 sec. 3.2.1). A human
    observer's accuracy moves with difficulty; a stimulus-blind responder's does not."""
    level = trials["level"] if "level" in trials else (
        numeric_levels(trials["condition"]) if "condition" in trials else None)
    if level is None:
        return pd.DataFrame(columns=["difficulty_slope", "difficulty_z"], dtype=float)
    frame = pd.DataFrame({"participant": trials["participant"].to_numpy(),
                          "x": pd.to_numeric(level, errors="coerce").to_numpy(dtype=float),
                          "y": trials["correct"].astype(float).to_numpy()}).dropna()
    grouped = frame.groupby("participant")
    n_levels = grouped["x"].nunique()
    frame["x"] = (frame["x"] - grouped["x"].transform("mean")) / grouped["x"].transform("std")
    frame["xy"], frame["xx"] = frame["x"] * frame["y"], frame["x"] ** 2
    sums = frame.groupby("participant")[["xy", "xx", "y"]].sum()
    n = grouped.size()
    slope = sums["xy"] / sums["xx"]
    acc = sums["y"] / n
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(np.clip(acc * (1 - acc), 1.0 / n, None) / sums["xx"])
    out = pd.DataFrame({"difficulty_slope": slope, "difficulty_z": slope / se})
    return out.where((n_levels >= 3) & (n >= MIN_SCORED_TRIALS), axis=0)


def difficulty_p(z: pd.Series) -> pd.Series:
    """Two-sided p-value of a difficulty slope's z."""
    return pd.Series(2 * stats.norm.sf(np.abs(z.to_numpy(dtype=float))), index=z.index)
