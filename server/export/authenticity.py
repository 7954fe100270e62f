"""The authenticity screen of an experiment (``humanlike.analysis.authenticity``) over its stored
trials, its candidate models' answers and its browser events: the export's ``participants.csv``
columns, and what ``server/live/authenticity.py`` stores for the dashboard and the breaker.

What it reads: the classification trials and the rating trials read as decisions (as the export's
``classifications`` and ``decisions`` tables read them, practice trials and tied ratings out); the candidate models' most
probable class per image from ``[panel] model_responses``; the ``input``, ``environment``, ``blur``
and ``visibility`` events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.authenticity.provenance import input_signals
from humanlike.analysis.authenticity.verdict import ScreenInput, export_columns, screen, verdicts
from humanlike.server.extensions import db
from humanlike.server.participants import trial_store
from humanlike.server.tables.core import Event, Experiment, Participant
from humanlike.server.trial_types import responses
from humanlike.server.trial_types.registry import TRIAL_TYPES

SCREEN_COLUMNS = ["participant", "trial_index", "stimulus", "response", "category", "correct",
                  "rt_ms", "condition", "task"]
SCREEN_FIELDS = ("participant", "trial_index", "trial_type", "stimulus", "practice", "rt_ms",
                 "response")
"""What the screen reads of each stored trial (``trial_store.FIELDS``)."""
EVENT_TYPES = ("input", "environment", "blur", "visibility")


def decision_types() -> dict[str, bool]:
    """The trial types whose trials are decisions about an image: rated types (the highest-rated
    category) and types whose answer picks a label and may time out (a classification) -> rated."""
    return {name: t.rated for name, t in TRIAL_TYPES.items()
            if t.rated or (t.label_answer is not None and t.timeout_answer is not None)}


def screen_rows(chunk: pd.DataFrame, labels: list[str], stimuli: pd.DataFrame) -> pd.DataFrame:
    """The screen's trial form of stored trials (``SCREEN_FIELDS``): non-practice decisions with
    the image's true class and condition, as the export's ``classifications`` and ``decisions``
    tables read them; a rating trial counts only on an image with a true class among the labels
    and with one top rating (a tie's decision would be the export's seeded tie-break, not theirs)."""
    types = decision_types()
    chunk = chunk[~chunk["practice"].astype(bool) & chunk["trial_type"].isin(list(types))]
    if chunk.empty or stimuli.empty:
        return pd.DataFrame(columns=SCREEN_COLUMNS)
    by_key = stimuli.set_index("stimulus")
    rated = chunk["trial_type"].map(types).astype(bool).to_numpy()
    response = pd.Series(np.nan, index=chunk.index, dtype=object)
    if (~rated).any():
        chosen = [r.get("choice") for r in responses.json_values(chunk.loc[~rated, "response"])]
        response[~rated] = np.asarray(chosen, dtype=object)
    keep = np.ones(len(chunk), bool)
    if rated.any():
        values = responses.rating_values(chunk.loc[rated, "response"], labels)
        filled = np.where(np.isnan(values), -np.inf, values)
        single = (filled == filled.max(axis=1, initial=-np.inf)[:, None]).sum(axis=1) == 1
        response[rated] = np.asarray(labels, dtype=object)[filled.argmax(axis=1)]
        truth = chunk.loc[rated, "stimulus"].map(by_key["true_class"])
        keep[rated] = single & truth.isin(labels).to_numpy()
    condition = by_key["condition"] if "condition" in by_key else pd.Series(dtype=object)
    conditions = chunk["stimulus"].map(condition).astype(object)
    conditions[rated] = conditions[rated].where(conditions[rated].notna(),
                                                chunk.loc[rated, "stimulus"].map(by_key["kind"]))
    out = pd.DataFrame({
        "participant": chunk["participant"].astype(str), "trial_index": chunk["trial_index"],
        "stimulus": chunk["stimulus"].astype(str), "response": response,
        "category": chunk["stimulus"].map(by_key["true_class"]), "rt_ms": chunk["rt_ms"],
        "condition": conditions,
        "task": np.where(rated, "decisions", [TRIAL_TYPES[t].table for t in chunk["trial_type"]])})
    out["correct"] = (out["response"] == out["category"]).to_numpy()  # "na" is never a class
    return out[keep].reindex(columns=SCREEN_COLUMNS).reset_index(drop=True)


def candidate_answers(exp: Experiment) -> pd.DataFrame | None:
    """Each candidate model's most probable class per image (``model``, ``stimulus``,
    ``response``) from ``[panel] model_responses``; None where the spec names none."""
    from humanlike.analysis.ratings.scores import load_model_responses

    names = (exp.spec.get("panel") or {}).get("model_responses") or []
    if not names:
        return None
    frame = pd.concat([load_model_responses(Path(exp.root) / n) for n in names], ignore_index=True)
    top = frame.sort_values("probability", ascending=False, kind="stable").drop_duplicates(
        ["model", "stimulus"])
    return pd.DataFrame({"model": top["model"].astype(str), "stimulus": top["stimulus"].astype(str),
                         "response": top["category"].astype(str)})


def browser_inputs(exp: Experiment) -> pd.DataFrame:
    """``input_signals`` of the experiment's input, environment, blur and visibility events."""
    rows = db.session.execute(
        sa.select(Participant.public_id, Event.type, Event.value)
        .join(Participant, Event.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id, Event.type.in_(EVENT_TYPES))
        .order_by(Event.id)).all()
    if not rows:
        return pd.DataFrame()
    return input_signals(pd.DataFrame.from_records(rows, columns=["participant", "type", "value"]))


def screen_of(exp: Experiment, trials: pd.DataFrame) -> pd.DataFrame:
    """Verdict and signals per participant, from the screen rows ``trials`` (without any: from the
    browser's input alone, which a study of triads still has)."""
    inputs = browser_inputs(exp)
    if trials.empty:
        return pd.concat([verdicts(inputs), inputs], axis=1) if not inputs.empty else pd.DataFrame()
    return screen(ScreenInput(trials, candidate_answers(exp), inputs))


def stored_rows(exp: Experiment, participant_ids: list[int] | None = None) -> pd.DataFrame:
    """The screen rows of ``exp``'s stored decisions (of ``participant_ids`` where given), read in
    chunks of whole participants: only the decision types, only ``SCREEN_FIELDS`` (no rating long
    form is built)."""
    from humanlike.server.export.writer import stimulus_frame

    labels = [str(c["label"]) for c in exp.spec.get("categories", [])]
    stimuli = stimulus_frame(exp)
    rows = [screen_rows(chunk, labels, stimuli) for chunk in trial_store.trial_chunks(
        SCREEN_FIELDS, experiment_id=exp.id, participant_ids=participant_ids,
        trial_types=list(decision_types()))]
    return pd.concat(rows, ignore_index=True)


def experiment_screen(exp: Experiment) -> pd.DataFrame:
    """The screen over every stored decision of ``exp``."""
    return screen_of(exp, stored_rows(exp))


def participants_columns(exp: Experiment, participants: pd.Series) -> pd.DataFrame:
    """The export's authenticity columns for the ``participants`` (public ids, in order)."""
    screened = experiment_screen(exp)
    columns = export_columns(screened) if not screened.empty else pd.DataFrame(
        columns=list(export_columns(pd.DataFrame()).columns))
    out = columns.reindex(participants.astype(str).to_numpy())
    out["authenticity"] = out["authenticity"].fillna("not_screened")
    out["authenticity_reasons"] = out["authenticity_reasons"].fillna("")
    return out.reset_index(drop=True)
