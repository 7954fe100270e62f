"""Words shared by the server and the analysis package (importable by both without Flask)."""

from __future__ import annotations

from enum import StrEnum


class StimulusKind(StrEnum):
    """What a stimulus is: a natural image, a controversial synthesis, an MLDS level, or a catch image."""

    NATURAL = "natural"
    CONTROVERSIAL = "controversial"
    MLDS = "mlds"
    CATCH = "catch"


STIMULUS_KINDS: tuple[str, ...] = tuple(kind.value for kind in StimulusKind)


class ParticipantStatus(StrEnum):
    """Where a participant stands (DESIGN.md, Storage); the server's lifecycle moves between them."""

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


FINISHED_STATUSES: frozenset[str] = frozenset({
    ParticipantStatus.COMPLETED, ParticipantStatus.SUBMITTED, ParticipantStatus.APPROVED})
"""Finished the task and not rejected: what a report counts as having completed the study."""
LEFT_STATUSES: frozenset[str] = frozenset({
    ParticipantStatus.RETURNED, ParticipantStatus.QUIT_EARLY, ParticipantStatus.TIMED_OUT})
"""Left before finishing: returned the study on the platform, quit, or timed out."""


class AnalysisOverride(StrEnum):
    """A researcher's decision on a participant (``participant.analysis_override``) that beats QC:
    exclude from analysis, or include whatever QC says."""

    EXCLUDE = "exclude"
    INCLUDE = "include"
