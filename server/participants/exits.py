"""How a participant leaves a study (``humanlike.server.platforms.Exit``), decided by the server:
the outcome and the code it gives are recorded on the participant, so the browser never chooses
which code it is handed (docs/recruitment.md, "Every exit a declared outcome")."""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.lifecycle import DECLINE, PRE_TRIAL
from humanlike.server.platforms import Exit, completion_code, declared_exit
from humanlike.server.tables.core import Participant, Stimulus, Trial, utcnow
from humanlike.server.trial_types.registry import rated_types
from humanlike.vocabulary import StimulusKind

DEFAULT_MIN_FAILED_CATCH = 2
"""Failed catch trials that make ``failed_attention`` when the spec gives no ``min_failed_catch``:
Prolific lets a submission be rejected for attention only after two failed checks."""


def failed_catch_trials(participant_id: int) -> int:
    """The participant's stored catch trials of a rated type (practice out) whose true class is not the one
    category rated highest: the attention checks the export's ``catch_accuracy`` counts as wrong."""
    rows = db.session.execute(
        sa.select(Trial.response, Stimulus.true_class)
        .join(Stimulus, Trial.stimulus_id == Stimulus.id)
        .where(Trial.participant_id == participant_id, Trial.trial_type.in_(rated_types()),
               Trial.practice.is_(False), Stimulus.kind == StimulusKind.CATCH.value,
               Stimulus.true_class.is_not(None))).all()
    if not rows:
        return 0
    ratings = [r.response.get("ratings") or {} for r in rows]
    labels = sorted({label for given in ratings for label in given})
    values = np.array([[float(given.get(label, np.nan)) for label in labels] for given in ratings])
    truth = np.array([labels.index(r.true_class) if r.true_class in labels else -1 for r in rows])
    top = np.nanmax(values, axis=1)
    n_top = (values == top[:, None]).sum(axis=1)
    true_value = np.where(truth >= 0, values[np.arange(len(rows)), truth], np.nan)
    correct = (true_value == top) & (n_top == 1)
    return int((~correct).sum())


def finishing_outcome(participant: Participant) -> Exit:
    """At ``/complete``: ``failed_attention`` where the spec declares it and the participant failed
    ``min_failed_catch`` catch trials or more, else ``completed``."""
    declared = declared_exit(participant.experiment.spec, Exit.FAILED_ATTENTION)
    if declared is None:
        return Exit.COMPLETED
    limit = declared.get("min_failed_catch") or DEFAULT_MIN_FAILED_CATCH
    return Exit.FAILED_ATTENTION if failed_catch_trials(participant.id) >= limit else (
        Exit.COMPLETED)


def record(participant: Participant, exit: Exit) -> None:
    """Note how the participant left and the code that goes with it (the exit's own, or the
    completion code); declining, or a declared exit before the first trial, also frees the place
    (``decline``: the participant is ``returned``). The caller commits. The first outcome stays."""
    if participant.outcome is not None:
        return
    participant.outcome = exit.value
    declared = declared_exit(participant.experiment.spec, exit) is not None
    if (exit == Exit.NO_CONSENT or declared) and participant.status in PRE_TRIAL:
        DECLINE.apply(participant, utcnow())
    if exit == Exit.COMPLETED or declared:
        participant.completion_code = completion_code(participant)
