"""psiTurk's ``mode`` query parameter: where a psiTurk HIT runs (debug, the MTurk sandbox, live).

A vocabulary of psiTurk's own, unrelated to humanlike's experiment statuses; spelled out here only."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """psiTurk's modes: ``debug`` (local tries), ``sandbox`` and ``live`` (MTurk's two sites)."""

    DEBUG = "debug"
    SANDBOX = "sandbox"
    LIVE = "live"


MTURK_MODES = frozenset({Mode.SANDBOX, Mode.LIVE})
"""The modes in which a HIT runs on MTurk (popup flow, closepopup.html, externalSubmit)."""
