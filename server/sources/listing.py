"""An experiment's listing on its recruitment platform, one service for the dashboard, the CLI and
the circuit breaker: its typed state (``ListingState``, read from ``experiment.recruitment_meta``
under one key per fact) and the changes sent to the platform (``transition``: publish, pause,
resume, stop; ``set_places``), each audited with the platform's reply.

The platform's study status is stored under ``platform_status`` by every writer (this module, the
sync and the webhooks); rows written before that key existed kept it under ``status`` and are
still read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from humanlike.server import audit
from humanlike.server.tables.core import Experiment

TRANSITIONS = {"PUBLISH": "publish", "PAUSE": "pause", "START": "resume", "STOP": "stop"}
"""Prolific's study transitions (``POST /studies/{id}/transition/``) and the word each is audited
and shown under (``listing_<word>``)."""


class ListingClient(Protocol):
    """What the service sends through (``sources.prolific.ProlificClient``)."""

    def transition_study(self, study_id: str, action: str) -> dict[str, Any]: ...

    def set_places(self, study_id: str, total: int) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ListingState:
    """What is known of the listing (None: not known yet)."""

    ref: str | None
    platform_status: str | None
    places_total: int | None
    places_taken: int | None
    synced_at: str | None


class PlacesRefused(ValueError):
    """Fewer (or as many) places than the study has: Prolific only allows more."""


def state(exp: Experiment) -> ListingState:
    """The listing's state from ``recruitment_meta`` (legacy keys read where the new one is
    missing: ``status`` for ``platform_status``, ``places`` for the total)."""
    meta = exp.recruitment_meta or {}
    total = meta.get("study_total_available_places", meta.get("places"))
    return ListingState(
        ref=exp.recruitment_ref,
        platform_status=meta.get("platform_status") or meta.get("status"),
        places_total=None if total is None else int(total),
        places_taken=meta.get("study_places_taken"),
        synced_at=meta.get("synced_at"))


def record(exp: Experiment, **facts: Any) -> None:
    """Merge ``facts`` into the experiment's ``recruitment_meta`` (the caller commits)."""
    exp.recruitment_meta = {**(exp.recruitment_meta or {}), **facts}


def places_refusal(current: int | None, total: int) -> str | None:
    """Why ``total`` places are refused for a study that has ``current`` (Prolific only allows
    more), or None."""
    if current is not None and total <= int(current):
        return (f"the study has {current} places: Prolific only allows increasing them, so "
                f"{total} is refused here (nothing was sent)")
    return None


def transition(exp: Experiment, action: str, client: ListingClient, actor: str) -> dict[str, Any]:
    """Send ``action`` (one of ``TRANSITIONS``) for the experiment's study; store the status the
    platform answers and audit it as ``listing_<word>``. Raises what the client raises (after
    auditing the failure); the caller commits."""
    if action not in TRANSITIONS:
        raise ValueError(f"unknown listing transition {action!r}; one of {list(TRANSITIONS)}")
    return _send(exp, TRANSITIONS[action], actor, lambda ref: client.transition_study(ref, action))


def set_places(exp: Experiment, total: int, client: ListingClient, actor: str,
               current: int | None) -> dict[str, Any]:
    """Set the study's total places to ``total``, refused (``PlacesRefused``, nothing sent) unless
    it is more than ``current``; stored and audited as ``listing_places``. The caller commits."""
    refusal = places_refusal(current, total)
    if refusal is not None:
        raise PlacesRefused(refusal)
    return _send(exp, "places", actor, lambda ref: client.set_places(ref, total),
                 study_total_available_places=total)


def _send(exp: Experiment, word: str, actor: str, call: Callable[[str], dict[str, Any]],
          **facts: Any) -> dict[str, Any]:
    """``call(ref)`` to the platform, audited as ``listing_<word>`` either way; on success the
    platform's status and ``facts`` are recorded."""
    ref = _ref(exp)
    try:
        reply = call(ref)
    except Exception as exc:
        audit.record(actor, f"listing_{word}", experiment=exp.slug, target=ref,
                     detail={"ok": False, "message": str(exc), "reply": getattr(exc, "reply", None)})
        raise
    if reply.get("status"):
        facts["platform_status"] = reply["status"]
    record(exp, listing_changed_at=_now(), **facts)
    audit.record(actor, f"listing_{word}", experiment=exp.slug, target=ref,
                 detail={"ok": True, "status": reply.get("status"),
                         "total": facts.get("study_total_available_places")})
    return reply


def _ref(exp: Experiment) -> str:
    if not exp.recruitment_ref:
        raise ValueError(f"{exp.slug} has no listing yet (run `humanlike recruit prolific create`)")
    return exp.recruitment_ref


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()
