"""Recruitment platforms (Prolific, MTurk, local links): entry parameters, completion code and target."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from flask import Request, url_for
from werkzeug.datastructures import MultiDict

if TYPE_CHECKING:
    from humanlike.server.models import Participant

ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
MTURK_SANDBOX, MTURK_LIVE = "https://workersandbox.mturk.com", "https://www.mturk.com"


class Platform(StrEnum):
    """Where participants come from."""

    LOCAL = "local"
    PROLIFIC = "prolific"
    MTURK = "mturk"


@dataclass(frozen=True)
class Entry:
    """The recruitment parameters a participant arrives with."""

    platform: Platform
    platform_id: str | None
    study_id: str | None = None
    session_id: str | None = None
    assignment_id: str | None = None
    hit_id: str | None = None
    turk_submit_to: str | None = None
    preview: bool = False


class EntryError(ValueError):
    """Recruitment parameters that are malformed."""


def _clean(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not ID_PATTERN.match(value):
        raise EntryError(f"parameter {name} has an unexpected format")
    return value


def _prolific_entry(args: MultiDict[str, str]) -> Entry | None:
    """PROLIFIC_PID, STUDY_ID and SESSION_ID, or None when the link is not Prolific's."""
    if "PROLIFIC_PID" not in args:
        return None
    pid = _clean(args.get("PROLIFIC_PID"), "PROLIFIC_PID")
    if pid is None:
        raise EntryError("PROLIFIC_PID is empty")
    return Entry(Platform.PROLIFIC, pid, _clean(args.get("STUDY_ID"), "STUDY_ID"),
                 _clean(args.get("SESSION_ID"), "SESSION_ID"))


def _mturk_entry(args: MultiDict[str, str]) -> Entry | None:
    """workerId, assignmentId, hitId and turkSubmitTo (a preview has no assignment), or None."""
    if "assignmentId" not in args and "workerId" not in args:
        return None
    assignment = args.get("assignmentId", "")
    if assignment == "ASSIGNMENT_ID_NOT_AVAILABLE":
        return Entry(Platform.MTURK, None, preview=True)
    worker = _clean(args.get("workerId"), "workerId")
    if worker is None:
        raise EntryError("workerId is missing")
    submit_to = args.get("turkSubmitTo") or None
    if submit_to and submit_to not in (MTURK_SANDBOX, MTURK_LIVE):
        raise EntryError("turkSubmitTo must be MTurk's live or sandbox host")
    return Entry(Platform.MTURK, worker, assignment_id=_clean(assignment, "assignmentId"),
                 hit_id=_clean(args.get("hitId"), "hitId"), turk_submit_to=submit_to)


def parse_entry(request: Request) -> Entry:
    """Read Prolific (PROLIFIC_PID...), MTurk (workerId...) or no parameters (local link)."""
    return (_prolific_entry(request.args) or _mturk_entry(request.args)
            or Entry(Platform.LOCAL, None))


def completion_code(participant: Participant) -> str:
    """Prolific: the spec's completion code; otherwise the participant's own (public id, 8 chars)."""
    completion = participant.experiment.spec.get("completion", {})
    code = completion.get("prolific_code") if participant.platform == Platform.PROLIFIC else None
    return code or participant.public_id[:8].upper()


def completion_target(participant: Participant) -> dict[str, Any]:
    """Where a finished participant goes: Prolific's completion URL, MTurk's form, or our page."""
    completion = participant.experiment.spec.get("completion", {})
    if participant.platform == Platform.PROLIFIC and completion.get("prolific_code"):
        return {"kind": "redirect",
                "url": f"https://app.prolific.com/submissions/complete?cc={participant.completion_code}"}
    if participant.platform == Platform.MTURK:
        sandbox = completion.get("mturk_sandbox", True)
        host = participant.turk_submit_to or (MTURK_SANDBOX if sandbox else MTURK_LIVE)
        return {"kind": "mturk_form", "action": host.rstrip("/") + "/mturk/externalSubmit",
                "fields": {"assignmentId": participant.assignment_id, "completion": "done"}}
    return {"kind": "redirect", "url": url_for("participant.done", pid=participant.public_id)}
