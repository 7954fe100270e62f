"""Participant and experiment statuses, their named groups, and the participant transitions."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ParticipantStatus(StrEnum):
    """Where a participant stands (DESIGN.md, Storage)."""

    ALLOCATED = "allocated"
    CONSENTED = "consented"
    STARTED = "started"
    COMPLETED = "completed"
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    RETURNED = "returned"
    QUIT_EARLY = "quit_early"
    TIMED_OUT = "timed_out"


class ExperimentStatus(StrEnum):
    """Whether an experiment takes participants: only a ``live`` one does."""

    DRAFT = "draft"
    LIVE = "live"
    CLOSED = "closed"


_S = ParticipantStatus

PRE_TRIAL: frozenset[ParticipantStatus] = frozenset({_S.ALLOCATED, _S.CONSENTED})
"""Arrived but no trial stored yet."""
FILLED: frozenset[ParticipantStatus] = frozenset({_S.STARTED, _S.COMPLETED, _S.SUBMITTED, _S.APPROVED})
"""Counts towards its condition's fill (least-filled allocation); may ask to complete."""
DONE: frozenset[ParticipantStatus] = frozenset({_S.COMPLETED, _S.SUBMITTED, _S.APPROVED, _S.REJECTED})
"""Finished the task: the task page sends such a participant to the end page."""


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
TRANSITIONS: tuple[Transition, ...] = (CONSENT, DECLINE, START, COMPLETE, TIME_OUT, APPROVE, REJECT)
