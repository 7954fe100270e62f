"""Participant and experiment statuses, their named groups, and the participant transitions."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from humanlike.vocabulary import ParticipantStatus


class ExperimentStatus(StrEnum):
    """Whether an experiment takes participants: only a ``live`` one does."""

    DRAFT = "draft"
    LIVE = "live"
    CLOSED = "closed"


_S = ParticipantStatus

PRE_TRIAL: frozenset[ParticipantStatus] = frozenset({_S.ALLOCATED, _S.CONSENTED})
"""Arrived but no trial stored yet."""
FILLED: frozenset[ParticipantStatus] = frozenset({_S.STARTED, _S.COMPLETED, _S.SUBMITTED, _S.APPROVED})
"""Started or finished and not rejected: may ask to complete (and holds a place)."""
DONE: frozenset[ParticipantStatus] = frozenset({_S.COMPLETED, _S.SUBMITTED, _S.APPROVED, _S.REJECTED})
"""Finished the task: the task page sends such a participant to the end page."""
HOLDS_PLACE: frozenset[ParticipantStatus] = PRE_TRIAL | FILLED
"""Holds a place in its condition (an ``allocated`` one only within the spec's allocation cutoff)."""


@dataclass(frozen=True)
class Transition:
    """A status change allowed from ``sources`` to ``target``, stamping ``stamp`` (a column) if set."""

    name: str
    sources: frozenset[ParticipantStatus]
    target: ParticipantStatus
    stamp: str | None = None

    def allows(self, status: str) -> bool:
        """True when a participant in ``status`` may take this transition."""
        return status in self.sources

    def values(self, now: dt.datetime) -> dict[str, Any]:
        """The column values the transition writes (status, and its timestamp if it has one)."""
        values: dict[str, Any] = {"status": self.target.value}
        if self.stamp is not None:
            values[self.stamp] = now
        return values

    def apply(self, participant: Any, now: dt.datetime) -> bool:
        """Move ``participant`` (a row) along the transition if allowed; False (no change) otherwise."""
        if not self.allows(participant.status):
            return False
        for column, value in self.values(now).items():
            setattr(participant, column, value)
        return True


CONSENT = Transition("consent", frozenset({_S.ALLOCATED}), _S.CONSENTED, "consented_at")
DECLINE = Transition("decline", PRE_TRIAL, _S.RETURNED)
START = Transition("start", PRE_TRIAL, _S.STARTED, "started_at")
COMPLETE = Transition("complete", PRE_TRIAL | {_S.STARTED}, _S.COMPLETED, "completed_at")
TIME_OUT = Transition("time_out", PRE_TRIAL | {_S.STARTED}, _S.TIMED_OUT)
APPROVE = Transition("approve", frozenset({_S.COMPLETED, _S.SUBMITTED}), _S.APPROVED)
REJECT = Transition("reject", frozenset({_S.COMPLETED, _S.SUBMITTED}), _S.REJECTED)
RESUME_ALLOCATED = Transition("resume_allocated", frozenset({_S.TIMED_OUT}), _S.ALLOCATED)
RESUME_CONSENTED = Transition("resume_consented", frozenset({_S.TIMED_OUT}), _S.CONSENTED)
RESUME_STARTED = Transition("resume_started", frozenset({_S.TIMED_OUT}), _S.STARTED)
SUBMIT = Transition("submit", frozenset({_S.COMPLETED}), _S.SUBMITTED)
"""The platform has the submission (Prolific AWAITING REVIEW, MTurk Submitted): ``recruit sync``."""
RETURN = Transition("return", PRE_TRIAL | {_S.STARTED, _S.TIMED_OUT, _S.COMPLETED, _S.SUBMITTED},
                    _S.RETURNED)
"""The participant gave the place back on the platform (Prolific RETURNED, MTurk abandoned);
their stored trials stay."""
UNREJECT = Transition("unreject", frozenset({_S.REJECTED}), _S.APPROVED)
"""A rejection overturned (MTurk's ``OverrideRejection``, within its 30 days)."""
TRANSITIONS: tuple[Transition, ...] = (CONSENT, DECLINE, START, COMPLETE, TIME_OUT, APPROVE, REJECT,
                                       RESUME_ALLOCATED, RESUME_CONSENTED, RESUME_STARTED,
                                       SUBMIT, RETURN, UNREJECT)


def resume_transition(participant: Any) -> Transition:
    """The way back for a timed-out participant who returns: to where its timestamps say it was."""
    if participant.started_at is not None:
        return RESUME_STARTED
    if participant.consented_at is not None:
        return RESUME_CONSENTED
    return RESUME_ALLOCATED


def resume(participant: Any, now: dt.datetime) -> bool:
    """Undo a time-out (a row that came back); False (no change) when it was not timed out."""
    return resume_transition(participant).apply(participant, now)


@dataclass(frozen=True)
class Gate:
    """The statuses in which a participant may do ``action``; any other answers 409 ``error``."""

    action: str
    allowed: frozenset[ParticipantStatus]
    error: str = "wrong_status"
    errors: tuple[tuple[ParticipantStatus, str], ...] = ()

    def allows(self, status: str) -> bool:
        """True when a participant in ``status`` may do the action."""
        return status in self.allowed

    def refusal(self, status: str) -> tuple[str, dict[str, Any]]:
        """The 409 error code and detail for a participant in ``status`` (names the current status)."""
        error = dict(self.errors).get(ParticipantStatus(status), self.error)
        return error, {"status": status, "action": self.action,
                       "allowed": sorted(s.value for s in self.allowed)}


TRIAL_GATE = Gate("trial", frozenset({_S.CONSENTED, _S.STARTED}) | DONE,
                  errors=((_S.ALLOCATED, "no_consent"),))
"""Trials: after consent. A finished participant's trial can only be a replay (every index is
stored before ``complete``), acknowledged again; a timed-out one is resumed first."""
TRIAL_STORABLE: frozenset[ParticipantStatus] = TRIAL_GATE.allowed | {_S.TIMED_OUT}
"""Statuses whose trials are written (the insert checks this; a timed-out sender is resumed)."""
EVENT_GATE = Gate("event", PRE_TRIAL | FILLED)
"""Events (blur, resize, ...): from arrival to the end page, but not after declining or rejection."""
COMPLETE_GATE = Gate("complete", FILLED)
"""Completion: once started (an empty timeline may complete from ``PRE_TRIAL``)."""
