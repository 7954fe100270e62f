"""Where participants come from: one preset per source (URL parameters, completion, resume and
participation rules), a spec's ``[platform]`` overrides, entry parsing and the completion target.

A new panel is a ``Platform`` member and a ``PRESETS`` entry here; nothing else changes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from flask import Request, current_app, url_for
from werkzeug.datastructures import MultiDict

if TYPE_CHECKING:
    from humanlike.server.tables.core import Participant

ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
MTURK_SANDBOX, MTURK_LIVE = "https://workersandbox.mturk.com", "https://www.mturk.com"
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"

Completion = Literal["redirect", "form_post", "page"]
"""How a finished participant leaves: a redirect to the source's URL, MTurk's form post, or our page."""
Resume = Literal["same_session", "same_participant", "code", "none"]
"""Who may pick up an unfinished session: the same session / assignment id, the same participant id
(a SONA survey code, a typed lab id), a local resume code, or nobody."""


class Platform(StrEnum):
    """Where participants come from (the name stored with each participant, 16 characters at most)."""

    LOCAL = "local"
    PROLIFIC = "prolific"
    MTURK = "mturk"
    SONA = "sona"
    CONNECT = "connect"
    PANEL = "panel"
    LAB = "lab"


@dataclass(frozen=True)
class PlatformPreset:
    """A source's rules. URL parameters name where the ids arrive; ``completion_url`` is a template
    with ``{code}``, ``{participant_id}``, ``{session_id}`` and ``{study_id}`` (URL-quoted)."""

    platform: Platform
    participant_param: str | None = None
    session_param: str | None = None
    study_param: str | None = None
    completion: Completion = "page"
    completion_url: str | None = None
    server_completion_url: str | None = None
    """SONA's server-side completion URL: the server calls it once per completed participant."""
    completion_code: str | None = None
    """A fixed code the source expects (Prolific's, a panel's); else each participant's own."""
    resume: Resume = "same_session"
    sessions: int = 1
    """Sessions per participant id: 1 is one participation; more need a session number (lab page)."""
    id_pattern: str = ID_PATTERN.pattern
    fullscreen: bool = False
    session_column: Literal["session_id", "assignment_id"] = "session_id"
    study_column: Literal["study_id", "hit_id"] = "study_id"


PRESETS: dict[Platform, PlatformPreset] = {
    Platform.LOCAL: PlatformPreset(Platform.LOCAL, resume="code"),
    Platform.PROLIFIC: PlatformPreset(
        Platform.PROLIFIC, "PROLIFIC_PID", "SESSION_ID", "STUDY_ID", completion="redirect",
        completion_url="https://app.prolific.com/submissions/complete?cc={code}"),
    Platform.MTURK: PlatformPreset(
        Platform.MTURK, "workerId", "assignmentId", "hitId", completion="form_post",
        session_column="assignment_id", study_column="hit_id"),
    # SONA puts %SURVEY_CODE% into the study URL; it is unique per sign-up, so it alone resumes.
    Platform.SONA: PlatformPreset(Platform.SONA, "survey_code", completion="redirect",
                                  resume="same_participant"),
    # CloudResearch Connect: ?participantId={{%participantId%}}&assignmentId=...&projectId=...
    Platform.CONNECT: PlatformPreset(Platform.CONNECT, "participantId", "assignmentId",
                                     "projectId", completion="redirect"),
    Platform.PANEL: PlatformPreset(Platform.PANEL, completion="redirect"),
    Platform.LAB: PlatformPreset(Platform.LAB, completion="page", resume="same_participant",
                                 fullscreen=True),
}
"""The built-in sources; a spec's ``[platform]`` table overrides any field of its ``preset``."""

URL_SOURCES = (Platform.PROLIFIC, Platform.MTURK)
"""Recognised by their parameters on any study link (as before presets existed)."""
OVERRIDABLE = tuple(f.name for f in fields(PlatformPreset)
                    if f.name not in ("platform", "session_column", "study_column"))


def resolve(declared: str | Mapping[str, Any] | None) -> PlatformPreset:
    """The rules of a spec's ``platform``: a preset name, or a table with ``preset`` and overrides."""
    if declared is None:
        return PRESETS[Platform.LOCAL]
    if isinstance(declared, str):
        return PRESETS[Platform(declared)]
    base = PRESETS[Platform(declared["preset"])]
    return replace(base, **{k: v for k, v in declared.items() if k in OVERRIDABLE and v is not None})


def preset_for(participant: Participant) -> PlatformPreset:
    """A participant's rules: its experiment's declared ones when they are for its platform."""
    declared = resolve(participant.experiment.spec.get("platform"))
    if declared.platform == participant.platform:
        return declared
    return PRESETS[Platform(participant.platform)]


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


def _clean(value: str | None, name: str, pattern: str = ID_PATTERN.pattern) -> str | None:
    if value is None or value == "":
        return None
    if not ID_PATTERN.match(value) or not re.fullmatch(pattern, value):  # bounded length first
        raise EntryError(f"parameter {name} has an unexpected format")
    return value


def _mturk_extras(args: MultiDict[str, str]) -> dict[str, Any] | None:
    """MTurk's preview (no assignment yet) and its submit host; None for a preview."""
    if args.get("assignmentId", "") == MTURK_PREVIEW:
        return None
    submit_to = args.get("turkSubmitTo") or None
    if submit_to and submit_to not in (MTURK_SANDBOX, MTURK_LIVE):
        raise EntryError("turkSubmitTo must be MTurk's live or sandbox host")
    return {"turk_submit_to": submit_to}


def entry_from_params(preset: PlatformPreset, args: MultiDict[str, str]) -> Entry | None:
    """The entry a preset reads from a link's parameters, or None when they are not its own."""
    if preset.participant_param is None:
        return None
    if preset.participant_param not in args and not (
            preset.platform == Platform.MTURK and "assignmentId" in args):
        return None
    extras: dict[str, Any] = {}
    if preset.platform == Platform.MTURK:
        mturk = _mturk_extras(args)
        if mturk is None:
            return Entry(Platform.MTURK, None, preview=True)
        extras = mturk
    pid = _clean(args.get(preset.participant_param), preset.participant_param, preset.id_pattern)
    if pid is None:
        raise EntryError(f"{preset.participant_param} is "
                         + ("empty" if preset.participant_param in args else "missing"))
    if preset.session_param:
        extras[preset.session_column] = _clean(args.get(preset.session_param), preset.session_param)
    if preset.study_param:
        extras[preset.study_column] = _clean(args.get(preset.study_param), preset.study_param)
    return Entry(preset.platform, pid, **extras)


def parse_entry(request: Request, declared: str | Mapping[str, Any] | None = None) -> Entry:
    """Read the spec's declared source, then Prolific's and MTurk's parameters, else a local link."""
    own = resolve(declared)
    for preset in (own, *(PRESETS[p] for p in URL_SOURCES if p != own.platform)):
        entry = entry_from_params(preset, request.args)
        if entry is not None:
            return entry
    return Entry(Platform.LOCAL, None)


OPEN_SOURCES = frozenset({Platform.LOCAL, *URL_SOURCES})
"""What a study with no declared source (``local``, the development default) takes: plain,
Prolific and MTurk-format links alike. A study declaring a source takes only that source's links."""
REFUSED_SOURCE = {
    Platform.PROLIFIC: "it takes participants only through Prolific: please open it from "
                       "Prolific's study page",
    Platform.MTURK: "it takes participants only through the MTurk-format link (workerId, "
                    "assignmentId, hitId) you were given: please open that link",
    Platform.SONA: "it takes participants only through SONA Systems: please sign up for it there "
                   "and open it from SONA's study page",
    Platform.CONNECT: "it takes participants only through CloudResearch Connect: please open it "
                      "from your Connect dashboard",
    Platform.PANEL: "it takes participants only through the panel that invited them: please open "
                    "the link the panel gave you",
    Platform.LAB: "it runs in the lab, where the experimenter starts each session",
}
"""What a refused arrival is told about the study's own source."""


def admits(declared: str | Mapping[str, Any] | None, entry: Entry) -> bool:
    """True when a study declaring ``declared`` takes an arrival from ``entry.platform`` (from
    anyone: the researcher's preview and a rehearsal are decided in ``server/web/participant.py``)."""
    own = resolve(declared).platform
    if own == Platform.LOCAL:
        return entry.platform in OPEN_SOURCES
    return entry.platform == own


def refusal(declared: str | Mapping[str, Any] | None) -> str:
    """The sentence telling an arrival from another source where this study takes participants."""
    own = resolve(declared).platform
    return f"This link is not for this study: {REFUSED_SOURCE[own]}."


def participant_code(public_id: str) -> str:
    """A participant's own completion code: HMAC-SHA256 of the public id under the app's
    ``SECRET_KEY``, base32, 10 characters (50 bits): nothing the participant sees reveals it."""
    key = str(current_app.config["SECRET_KEY"]).encode()
    mac = hmac.new(key, b"completion:" + public_id.encode(), hashlib.sha256).digest()
    return base64.b32encode(mac).decode()[:10]


def completion_code(participant: Participant) -> str:
    """The source's fixed code where the spec gives one (Prolific's ``completion.prolific_code``,
    a panel's ``completion_code``); otherwise the participant's own (``participant_code``). Stored
    on the participant when the server has every trial, and shown only then."""
    spec = participant.experiment.spec
    if participant.platform == Platform.PROLIFIC:
        code = spec.get("completion", {}).get("prolific_code")
    else:
        code = preset_for(participant).completion_code
    return code or participant_code(participant.public_id)


def _fill(template: str, participant: Participant, preset: PlatformPreset) -> str:
    values = {"code": participant.completion_code or completion_code(participant),
              "participant_id": participant.platform_id,
              "session_id": getattr(participant, preset.session_column) or "",
              "study_id": getattr(participant, preset.study_column) or ""}
    return template.format(**{k: quote(str(v), safe="") for k, v in values.items()})


def completion_target(participant: Participant) -> dict[str, Any]:
    """Where a finished participant goes: the source's completion URL, MTurk's form, or our page."""
    spec = participant.experiment.spec
    preset = preset_for(participant)
    if participant.platform == Platform.PROLIFIC and not spec.get("completion", {}).get(
            "prolific_code"):
        preset = replace(preset, completion="page")
    if preset.completion == "form_post":
        sandbox = spec.get("completion", {}).get("mturk_sandbox", True)
        host = participant.turk_submit_to or (MTURK_SANDBOX if sandbox else MTURK_LIVE)
        return {"kind": "mturk_form", "action": host.rstrip("/") + "/mturk/externalSubmit",
                "fields": {"assignmentId": participant.assignment_id, "completion": "done"}}
    if preset.completion == "redirect" and preset.completion_url:
        return {"kind": "redirect", "url": _fill(preset.completion_url, participant, preset)}
    return {"kind": "redirect", "url": url_for("participant.done", pid=participant.public_id)}


def server_completion_url(participant: Participant) -> str | None:
    """The URL the server calls once for this participant (SONA's server-side completion), if any."""
    preset = preset_for(participant)
    if not preset.server_completion_url:
        return None
    return _fill(preset.server_completion_url, participant, preset)
