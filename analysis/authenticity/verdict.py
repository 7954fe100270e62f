"""One authenticity verdict per participant from the signals, with the signals in words.

``flagged``: a decisive signal fired (each a test at level ``ALPHA`` or an impossible input):
  * kappa with a candidate model significantly above the human reference (a model may be answering);
  * answers no better than stimulus-independent responding (kappa of response and true class not
    significantly above 0: a fixed key, a pattern, answers replayed onto other images);
  * reaction times more regular than any human's (CV under ``MIN_RT_CV``);
  * input that no person produced: synthetic (``isTrusted`` false) key or pointer events, or a
    browser under automation (``navigator.webdriver``).
``review``: only supporting signals (a model kappa above the reference at p < 0.05 only,
anticipations, implausibly perfect repeats, accuracy that does not move with difficulty, model
agreement above the participant's agreement with every other participant, an ex-Gaussian
parameter outside the broad human range, pasted text).
``pass``: neither. ``not_screened``: too few scored trials for the statistical signals.
The verdict informs the researcher; it never rejects, excludes or withholds pay on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from humanlike.analysis.authenticity import model_agreement as agreement
from humanlike.analysis.authenticity.reference import (
    ALPHA,
    EX_GAUSSIAN_HUMAN,
    HUMAN_MODEL_EC_MAX,
    MAX_ANTICIPATION_SHARE,
    MIN_REPEATS,
    MIN_RT_CV,
)
from humanlike.analysis.authenticity.repeats import repeat_consistency
from humanlike.analysis.authenticity.stimulus_dependence import (
    difficulty_p,
    difficulty_slope,
    response_truth_kappa,
)
from humanlike.analysis.authenticity.timing import rt_shape

VERDICTS = ("flagged", "review", "pass", "not_screened")

SUGGESTIVE = 0.05
"""A model kappa above the reference at this level, not at ``ALPHA``, is a supporting signal."""

MIN_REFERENCE_PARTICIPANTS = 5
"""Participants needed before the study's own human-human kappa can raise the model reference."""

COLUMNS: dict[str, str] = {
    "authenticity": "Authenticity verdict (docs/authenticity.md): flagged (a decisive signal), "
                    "review (supporting signals only), pass, or not_screened (too few trials). "
                    "Informative only: it never excludes or rejects on its own.",
    "authenticity_reasons": "The signals behind the verdict, in words ('; '-separated).",
    "auth_stimulus_kappa": "Cohen's kappa of response against true class (0: the answers ignore "
                           "the image).",
    "auth_stimulus_z": "z of that kappa under stimulus-independent responding (Fleiss et al. 1969).",
    "auth_ec_model": "The candidate model the participant's errors agree with most.",
    "auth_ec_model_kappa": "Error consistency (kappa) with that model, condition-averaged.",
    "auth_ec_model_p": "One-sided p of that kappa exceeding the human reference "
                       "(auth_ec_reference), Bonferroni over models.",
    "auth_ec_reference": "The human reference the model kappa is tested against: the larger of "
                         "0.4 (human-model maximum) and the study's median human-human kappa.",
    "auth_ec_human_max": "Largest kappa with any other participant.",
    "auth_rt_cv": "Coefficient of variation of the reaction times.",
    "auth_anticipation_share": "Share of responses under 100 ms.",
    "auth_exg_mu_ms": "Ex-Gaussian mu of the RTs (method of moments), ms.",
    "auth_exg_sigma_ms": "Ex-Gaussian sigma, ms.",
    "auth_exg_tau_ms": "Ex-Gaussian tau, ms.",
    "auth_repeat_agreement": "Share of repeated images answered as on first presentation.",
    "auth_difficulty_z": "z of the change of accuracy across difficulty levels.",
    "auth_untrusted_inputs": "Key and pointer events the page did not receive from a person "
                             "(isTrusted false).",
    "auth_webdriver": "The browser reported automation (navigator.webdriver).",
}
"""Export columns of the screen and their codebook text (``participants.csv``)."""


@dataclass(frozen=True)
class ScreenInput:
    """What the screen reads: one row per answered trial (``participant``, ``stimulus``,
    ``response``, ``category`` (true class or NaN), ``correct``, ``rt_ms``, optional ``condition``,
    ``level``, ``trial_index``, ``task`` (repeats count within a task)), candidate models' answers (``model``, ``stimulus``, ``response``)
    and the browser's input signals (``provenance.input_signals``)."""

    trials: pd.DataFrame
    models: pd.DataFrame | None = None
    inputs: pd.DataFrame | None = None


def ec_reference(human: pd.DataFrame) -> float:
    """The model-kappa reference: max(HUMAN_MODEL_EC_MAX, median over participants of their mean
    kappa with the others) -- no model matches the human-human consistency (Geirhos et al. 2021),
    and the median is untouched while fewer than half the participants are agents."""
    means = human["ec_human_mean"].dropna() if "ec_human_mean" in human else pd.Series(dtype=float)
    if len(means) < MIN_REFERENCE_PARTICIPANTS:
        return HUMAN_MODEL_EC_MAX
    return max(HUMAN_MODEL_EC_MAX, float(means.median()))


def signals(data: ScreenInput) -> pd.DataFrame:
    """Every signal per participant (NaN where the design or the data cannot show it)."""
    trials = data.trials
    inputs = data.inputs if data.inputs is not None else pd.DataFrame()
    people = pd.Index(pd.unique(pd.concat([trials["participant"], inputs.index.to_series()])),
                      name="participant")
    parts = [response_truth_kappa(trials), rt_shape(trials), repeat_consistency(trials),
             difficulty_slope(trials)]
    first = agreement.first_presentations(trials)
    human = agreement.human_agreement(trials, first)
    parts.append(human)
    reference = ec_reference(human)
    if data.models is not None and not data.models.empty:
        parts.append(agreement.model_agreement(trials, data.models, reference, first))
    out = pd.concat([p.reindex(people) for p in parts], axis=1)
    out["ec_reference"] = reference
    out["accuracy"] = trials.groupby("participant")["correct"].mean().reindex(people)
    if not inputs.empty:
        out = out.join(inputs, how="left")
    return out


def _fmt(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}"


def _words(row: pd.Series) -> tuple[list[str], list[str], bool]:
    """(decisive reasons, supporting reasons, screened) for one participant's signals."""
    decisive: list[str] = []
    supporting: list[str] = []
    z_crit = stats.norm.isf(ALPHA)
    p = row.get("ec_model_p", np.nan)
    if pd.notna(p) and p < SUGGESTIVE:
        words = (f"EC with model {row['ec_model']} {_fmt(row['ec_model_kappa'])}, above the human "
                 f"reference {_fmt(row['ec_reference'])} "
                 f"({f'p = {p:.1g}' if p >= 1e-16 else 'p < 1e-16'})")
        if p < ALPHA:
            decisive.append(words)
        else:  # too few errors shared to be sure (an accurate model errs rarely)
            supporting.append(words + ", not decisive")
    z = row.get("stimulus_z", np.nan)
    if pd.notna(z) and z < z_crit:
        decisive.append(f"answers do not depend on the image: kappa with the true class "
                        f"{_fmt(row['stimulus_kappa'])} (z = {_fmt(z, 1)}, needs {_fmt(z_crit, 1)})")
    cv = row.get("rt_cv", np.nan)
    if pd.notna(cv) and cv < MIN_RT_CV:
        decisive.append(f"reaction times too regular for a person: CV {_fmt(cv, 3)} "
                        f"(humans above {MIN_RT_CV})")
    untrusted = row.get("untrusted_inputs", np.nan)
    if pd.notna(untrusted) and untrusted > 0:
        decisive.append(f"{int(untrusted)} synthetic input events (isTrusted false)")
    webdriver = row.get("webdriver", False)
    if isinstance(webdriver, (bool, np.bool_)) and webdriver:
        decisive.append("the browser reported automation (navigator.webdriver)")
    share = row.get("anticipation_share", np.nan)
    if pd.notna(share) and share > MAX_ANTICIPATION_SHARE:
        supporting.append(f"{_fmt(100 * share, 0)}% of responses under 100 ms")
    if (row.get("n_repeats", 0) or 0) >= MIN_REPEATS and row.get("repeat_agreement") == 1.0 \
            and row.get("accuracy", 1.0) < 1.0:
        supporting.append(f"every one of {int(row['n_repeats'])} repeats answered identically "
                          "despite errors")
    dz = row.get("difficulty_z", np.nan)
    if pd.notna(dz) and difficulty_p(pd.Series([dz])).iloc[0] >= 0.05:
        supporting.append(f"accuracy does not change with difficulty (z = {_fmt(dz, 1)})")
    if pd.notna(row.get("ec_model_kappa", np.nan)) and pd.notna(row.get("ec_human_max", np.nan)) \
            and row["ec_model_kappa"] > row["ec_human_max"]:
        supporting.append(f"agrees more with model {row['ec_model']} ({_fmt(row['ec_model_kappa'])}) "
                          f"than with any other participant (at most {_fmt(row['ec_human_max'])})")
    for name, (low, high) in EX_GAUSSIAN_HUMAN.items():
        value = row.get(f"exg_{name}", np.nan)
        if pd.notna(value) and not low <= value <= high:
            supporting.append(f"ex-Gaussian {name.split('_')[0]} {value:.0f} ms outside the human "
                              f"range {low:.0f}-{high:.0f} ms")
    if (row.get("pastes", 0) or 0) > 0:
        supporting.append(f"pasted text {int(row['pastes'])} times")
    screened = (pd.notna(row.get("stimulus_z", np.nan)) or pd.notna(cv)
                or row.get("input_recorded", False) is True)
    return decisive, supporting, screened


def verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """``authenticity`` and ``authenticity_reasons`` for each row of :func:`signals`."""
    words = [_words(row) for _, row in table.iterrows()]  # per participant: a few dozen rows
    verdict = ["flagged" if d else "review" if s else "pass" if ok else "not_screened"
               for d, s, ok in words]
    reasons = ["; ".join(d + s) for d, s, _ in words]
    return pd.DataFrame({"authenticity": verdict, "authenticity_reasons": reasons}, index=table.index)


def screen(data: ScreenInput) -> pd.DataFrame:
    """Signals and verdict per participant."""
    table = signals(data)
    return pd.concat([verdicts(table), table], axis=1)


def export_columns(screened: pd.DataFrame) -> pd.DataFrame:
    """The screen's ``participants.csv`` columns (:data:`COLUMNS`), indexed by participant."""
    out = pd.DataFrame(index=screened.index)
    for column in COLUMNS:
        source = column.removeprefix("auth_")
        out[column] = screened[source] if source in screened else screened.get(column, np.nan)
    return out
