"""The authenticity screen of an experiment (``humanlike.analysis.authenticity``) over its stored
trials, its candidate models' answers and its browser events: the export's ``participants.csv``
columns, and what ``server/live/authenticity.py`` stores for the dashboard and the breaker.

What it reads: the classification trials and the rating trials read as decisions (the export's
``classifications`` and ``decisions`` tables, practice trials out); the candidate models' most
probable class per image from ``[panel] model_responses``; the ``input``, ``environment``, ``blur``
and ``visibility`` events."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.authenticity.provenance import input_signals
from humanlike.analysis.authenticity.verdict import ScreenInput, export_columns, screen
from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Experiment, Participant

SCREENED_TABLES = ("classifications", "decisions")
"""The export tables whose trials are decisions about an image with a true class."""
SCREEN_COLUMNS = ["participant", "trial_index", "stimulus", "response", "category", "correct",
                  "rt_ms", "condition", "task"]
EVENT_TYPES = ("input", "environment", "blur", "visibility")


def screen_rows(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The screen's trial form from one chunk's export tables: non-practice decisions, rating
    trials whose top rating is tied left out (their decision is the export's tie-break)."""
    parts = []
    for name in SCREENED_TABLES:
        frame = tables.get(name)
        if frame is None or frame.empty:
            continue
        frame = frame[~frame["practice"].astype(bool)]
        if "n_tied" in frame:  # a tie among top ratings was broken by a seeded draw, not by them
            frame = frame[frame["n_tied"] <= 1]
        # the image's condition (a noise level), not the participant's counterbalancing condition
        parts.append(frame.drop(columns=["condition"], errors="ignore")
                     .rename(columns={"stimulus_condition": "condition"}).assign(task=name)
                     .reindex(columns=SCREEN_COLUMNS))
    if not parts:
        return pd.DataFrame(columns=SCREEN_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["participant"] = out["participant"].astype(str)
    out["correct"] = out["correct"].astype(bool)
    return out


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
    """Verdict and signals per participant, from the screen rows ``trials``."""
    if trials.empty:
        return pd.DataFrame()
    return screen(ScreenInput(trials, candidate_answers(exp), browser_inputs(exp)))


def experiment_screen(exp: Experiment) -> pd.DataFrame:
    """The screen over every stored trial of ``exp`` (one pass of the export's reader)."""
    from humanlike.server.export.writer import stimulus_frame, trial_chunks, trial_tables

    labels = [str(c["label"]) for c in exp.spec.get("categories", [])]
    stimuli = stimulus_frame(exp)
    rows = [screen_rows(trial_tables(chunk, labels, stimuli)) for chunk in trial_chunks(exp)]
    return screen_of(exp, pd.concat(rows, ignore_index=True) if rows else pd.DataFrame())


def participants_columns(exp: Experiment, trials: pd.DataFrame,
                         participants: pd.Series) -> pd.DataFrame:
    """The export's authenticity columns for the ``participants`` (public ids, in order)."""
    screened = screen_of(exp, trials)
    columns = export_columns(screened) if not screened.empty else pd.DataFrame(
        columns=list(export_columns(pd.DataFrame()).columns))
    out = columns.reindex(participants.astype(str).to_numpy())
    out["authenticity"] = out["authenticity"].fillna("not_screened")
    out["authenticity_reasons"] = out["authenticity_reasons"].fillna("")
    return out.reset_index(drop=True)
