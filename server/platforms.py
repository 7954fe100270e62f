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
from flask_babel import lazy_gettext
from werkzeug.datastructures import MultiDict

from humanlike.vocabulary import ParticipantStatus

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


class Exit(StrEnum):
    """Every way out of a study (DESIGN.md: every exit is a declared outcome), as stored in
    ``participant.outcome``; the spec's ``[completion.exits]`` says what the platform gets for each
    but ``completed`` (``completion.prolific_code``, the source's ``completion_url``)."""

    COMPLETED = ParticipantStatus.COMPLETED.value
    NO_CONSENT = "no_consent"
    """Declined the consent form."""
    INCOMPATIBLE_DEVICE = "incompatible_device"
    """Arrived on a phone or tablet when the spec does not ``allow_mobile`` (no participant row)."""
    DISPLAY_UNSUITABLE = "display_unsuitable"
    """The spec's ``[display]`` refused the display before the first trial (refresh rate, whole
    frames, too small at the size in degrees, calibration answers)."""
    FAILED_ATTENTION = "failed_attention"
    """Finished every trial but failed ``min_failed_catch`` catch trials or more."""
    REFUSED_ON_RETURN = "refused_on_return"
    """Came back and was refused by the resume policy (``refuse``, or past ``max_age_minutes``)."""


EXIT_CODE_TYPES: dict[Exit, frozenset[str]] = {
    Exit.COMPLETED: frozenset({"COMPLETED"}),
    Exit.NO_CONSENT: frozenset({"NO_CONSENT"}),
    Exit.INCOMPATIBLE_DEVICE: frozenset({"INCOMPATIBLE_DEVICE"}),
    Exit.DISPLAY_UNSUITABLE: frozenset({"INCOMPATIBLE_DEVICE", "FIXED_SCREENOUT"}),
    Exit.FAILED_ATTENTION: frozenset({"FAILED_ATTENTION_CHECK"}),
    Exit.REFUSED_ON_RETURN: frozenset({"OTHER", "FIXED_SCREENOUT"}),
}
"""The Prolific completion-code types each exit may use (the study object's ``code_type``): a
display turned away after the calibration is a paid screen-out (``FIXED_SCREENOUT`` with
``FIXED_SCREEN_OUT_PAYMENT``) or an incompatible device; a refusal on return ``OTHER`` (the
researcher reviews the part done) or a paid screen-out."""


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
    Platform.PROLIFIC: lazy_gettext(
        "This link is not for this study: it takes participants only through Prolific: please "
        "open it from Prolific's study page."),
    Platform.MTURK: lazy_gettext(
        "This link is not for this study: it takes participants only through the MTurk-format "
        "link (workerId, assignmentId, hitId) you were given: please open that link."),
    Platform.SONA: lazy_gettext(
        "This link is not for this study: it takes participants only through SONA Systems: please "
        "sign up for it there and open it from SONA's study page."),
    Platform.CONNECT: lazy_gettext(
        "This link is not for this study: it takes participants only through CloudResearch "
        "Connect: please open it from your Connect dashboard."),
    Platform.PANEL: lazy_gettext(
        "This link is not for this study: it takes participants only through the panel that "
        "invited them: please open the link the panel gave you."),
    Platform.LAB: lazy_gettext(
        "This link is not for this study: it runs in the lab, where the experimenter starts each "
        "session."),
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
    return str(REFUSED_SOURCE[own])  # in the page's language (server/web/i18n.py)


def participant_code(public_id: str) -> str:
    """A participant's own completion code: HMAC-SHA256 of the public id under the app's
    ``SECRET_KEY``, base32, 10 characters (50 bits): nothing the participant sees reveals it."""
    key = str(current_app.config["SECRET_KEY"]).encode()
    mac = hmac.new(key, b"completion:" + public_id.encode(), hashlib.sha256).digest()
    return base64.b32encode(mac).decode()[:10]


def completion_code(participant: Participant) -> str:
    """The source's fixed code where the spec gives one (Prolific's ``completion.prolific_code``,
    a panel's ``completion_code``); otherwise the participant's own (``participant_code``). Stored
    on the participant when the server has every trial, and shown only then. A participant who
    left by a declared exit gets that exit's code instead (or their own code for that exit)."""
    spec = participant.experiment.spec
    declared = declared_exit(spec, getattr(participant, "outcome", None))
    if declared is not None:  # an exit's own code (Prolific's of its type, a panel's), else one
        code = declared.get("prolific_code") if participant.platform == Platform.PROLIFIC else (
            declared.get("code"))  # of the participant's own for this exit: never the completion's
        return code or participant_code(f"{participant.public_id}:{participant.outcome}")
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
    """Where a finished participant goes: the source's completion URL (with the failed-attention
    exit's code or URL where that was the outcome), MTurk's form, or our page."""
    spec = participant.experiment.spec
    preset = preset_for(participant)
    if getattr(participant, "outcome", None) not in (None, Exit.COMPLETED):
        target = exit_target(participant)
        if target is not None:
            return target
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
    """The URL the server calls once for this participant (SONA's server-side completion), if any:
    on completion, and on an exit the spec credits (``[completion.exits.<exit>] credit``)."""
    preset = preset_for(participant)
    if not preset.server_completion_url:
        return None
    if getattr(participant, "outcome", None) not in (None, Exit.COMPLETED):
        declared = declared_exit(participant.experiment.spec, participant.outcome)
        if declared is None or not declared.get("credit"):
            return None
    return _fill(preset.server_completion_url, participant, preset)


def declared_exit(spec: Mapping[str, Any], exit: str | None) -> dict[str, Any] | None:
    """The spec's ``[completion.exits.<exit>]`` (a stored spec's JSON), None when not declared."""
    if exit is None or exit == Exit.COMPLETED:
        return None
    exits = (spec.get("completion") or {}).get("exits") or {}
    found = exits.get(str(exit))
    return dict(found) if isinstance(found, Mapping) else None


def exit_problem(rules: PlatformPreset, exit: Exit, outcome: Mapping[str, Any]) -> str | None:
    """Why a declared exit cannot be honoured on the study's source (None when it can)."""
    if rules.platform in (Platform.LOCAL, Platform.LAB):
        return f"a {rules.platform.value} study ends on its own page: no platform outcome to declare"
    if rules.platform == Platform.MTURK:
        return "MTurk-format links submit MTurk's form: they have no exit outcomes"
    if rules.platform == Platform.PROLIFIC:
        if not outcome.get("prolific_code"):
            return "a Prolific study needs prolific_code (the completion code of this exit)"
        if outcome.get("url") or outcome.get("credit"):
            return "on Prolific an exit is its prolific_code (url and credit are other sources')"
        return None
    if outcome.get("prolific_code"):
        return f"prolific_code is Prolific's; this study's source is {rules.platform.value!r}"
    if outcome.get("credit") and rules.platform != Platform.SONA:
        return "credit is SONA's (its server-side completion URL)"
    if rules.platform != Platform.SONA and not outcome.get("url"):
        return f"a {rules.platform.value} study needs url (where this exit sends the participant)"
    return None


def exit_target(participant: Participant) -> dict[str, Any] | None:
    """Where a participant who left by ``participant.outcome`` goes: Prolific's completion URL
    with the exit's code, the exit's URL on a redirect source; None where the spec declares no
    outcome for it (the polite page that asks to return the study by hand)."""
    declared = declared_exit(participant.experiment.spec, participant.outcome)
    if declared is None:
        return None
    preset = preset_for(participant)
    if participant.platform == Platform.PROLIFIC and declared.get("prolific_code"):
        return {"kind": "redirect", "url": _fill(str(preset.completion_url), participant, preset)}
    if declared.get("url"):
        return {"kind": "redirect", "url": _fill(str(declared["url"]), participant, preset)}
    return None


def arrival_exit_url(spec: Mapping[str, Any], entry: Entry, exit: Exit) -> str | None:
    """Where an arrival turned away before any participant exists (``incompatible_device``) goes:
    the exit's platform URL filled from the link's own ids; None when not declared."""
    declared = declared_exit(spec, exit)
    rules = resolve(spec.get("platform"))
    if declared is None or rules.platform != entry.platform:
        return None
    template = rules.completion_url if entry.platform == Platform.PROLIFIC and declared.get(
        "prolific_code") else declared.get("url")
    if not template:
        return None
    code = declared.get("prolific_code") or declared.get("code") or ""
    values = {"code": code, "participant_id": entry.platform_id or "",
              "session_id": getattr(entry, rules.session_column) or "",
              "study_id": getattr(entry, rules.study_column) or ""}
    return str(template).format(**{k: quote(str(v), safe="") for k, v in values.items()})
