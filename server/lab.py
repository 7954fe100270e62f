"""Lab sessions: the experimenter types (or scans) a participant id and an optional session number
on ``/lab/<slug>``; the participant then runs the study full screen on that machine.

The id rules are the spec's ``[platform]`` (preset ``lab``): ``id_pattern`` and ``sessions`` (1: one
participation per id; more: numbered sessions, each its own participant row ``ID:SESSION``)."""

from __future__ import annotations

import re

from flask import Blueprint, render_template, request

from humanlike.server.participant import _message, admit, live_experiment
from humanlike.server.platforms import ID_PATTERN, Entry, Platform, resolve

bp = Blueprint("lab", __name__)


def _form(loaded, rules, error: str | None = None, status: int = 200, typed: str = "",
          session: str = ""):
    return render_template("lab_entry.html", spec=loaded.spec, rules=rules, error=error,
                           typed=typed, session=session), status


def lab_entry(typed: str, session: str, rules) -> Entry:
    """The entry of a typed id and session number, checked against the spec's rules (ValueError
    says what is wrong, in words for the experimenter)."""
    typed = typed.strip()
    if not typed:
        raise ValueError("Type the participant id.")
    if not ID_PATTERN.match(typed) or ":" in typed or not re.fullmatch(rules.id_pattern, typed):
        raise ValueError(f"The id {typed!r} does not have this study's format "
                         f"({rules.id_pattern}).")
    session = session.strip() or "1"
    if not session.isdigit() or not 1 <= int(session) <= rules.sessions:
        raise ValueError(f"The session number must be a whole number from 1 to {rules.sessions}.")
    number = int(session)
    platform_id = typed if rules.sessions == 1 else f"{typed}:{number}"
    return Entry(Platform.LAB, platform_id, session_id=str(number))


@bp.route("/lab/<slug>", methods=["GET", "POST"])
def entry(slug: str):
    """GET: the experimenter's form. POST (CSRF-checked): start or resume that participant."""
    found, page = live_experiment(slug)
    if found is None:
        return page
    loaded, exp = found
    rules = resolve(exp.spec.get("platform"))
    if rules.platform != Platform.LAB:
        return _message("Study not found", "This study does not run lab sessions.", 404)
    if request.method == "GET":
        return _form(loaded, rules)
    typed, session = request.form.get("participant_id", ""), request.form.get("session", "")
    try:
        lab = lab_entry(typed, session, rules)
    except ValueError as exc:
        return _form(loaded, rules, str(exc), 400, typed[:128], session[:8])
    return admit(loaded, exp, lab)
