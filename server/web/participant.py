"""Participant pages: entry from a study link (any source in server/platforms.py), the task page,
completion, stimulus files."""

from __future__ import annotations

import sqlalchemy as sa
from flask import (
    Blueprint,
    abort,
    current_app,
    redirect,
    render_template,
    request,
    send_from_directory,
    session,
    url_for,
)
from flask_babel import gettext
from flask_login import current_user
from sqlalchemy.exc import IntegrityError

from humanlike.server.extensions import db
from humanlike.server.lifecycle import DONE, ExperimentStatus, ParticipantStatus
from humanlike.server.live import breaker
from humanlike.server.participants import allocation, rehearsal, resume, resume_policy
from humanlike.server.platforms import (
    Entry,
    EntryError,
    Exit,
    Platform,
    admits,
    arrival_exit_url,
    completion_target,
    exit_target,
    parse_entry,
    refusal,
)
from humanlike.server.rights import retention, withdrawal
from humanlike.server.study import experiments
from humanlike.server.tables.core import Event, Experiment, Participant, utcnow
from humanlike.server.web import outcomes

bp = Blueprint("participant", __name__)


def _message(title: str, message: str, status: int = 200):
    return render_template("message.html", title=title, message=message), status


def _owned() -> dict[str, str]:
    """Participants this browser holds (public id -> token), kept in the signed session cookie."""
    return session.setdefault("participants", {})


def live_experiment(slug: str):
    """(loaded, row) of a live experiment, or the page to show instead."""
    loaded = experiments.get(slug)
    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if loaded is None or exp is None:
        return None, _message(gettext("Study not found"), gettext("This study link is not valid."), 404)
    if exp.status != ExperimentStatus.LIVE:
        return None, _message(gettext("Study closed"), gettext("This study is not taking participants at the moment."),
                              410)
    return (loaded, exp), None


@bp.get("/start/<slug>")
def start(slug: str):
    """Entry point of a study link: check eligibility, allocate (or resume), go to the task."""
    found, page = live_experiment(slug)
    if found is None:
        return page
    loaded, exp = found
    try:
        entry = parse_entry(request, exp.spec.get("platform"))
    except EntryError as exc:
        return _message(gettext("Invalid study link"), str(exc), 400)
    rehearsed = rehearsal.is_rehearsal(slug)
    preview_by = current_user.id if current_user.is_authenticated and not rehearsed else None
    if not (admits(exp.spec.get("platform"), entry) or rehearsed or preview_by is not None):
        return _message(gettext("Not for this study"), refusal(exp.spec.get("platform")), 403)
    if entry.preview:
        return render_template("preview.html", spec=loaded.spec,
                               instructions=loaded.markdown_html("instructions"))
    return admit(loaded, exp, entry, preview_by)


def admit(loaded, exp: Experiment, entry: Entry, preview_by: int | None = None):
    """Let an arrival in: resume the same person, refuse a second participation, or allocate.
    Whatever the declared source, ``start`` lets in a rehearsal (``humanlike simulate`` with the
    study's rehearsal key) and the logged-in researcher's preview (``preview_by``: any link), both
    recorded as simulated at allocation (``rehearsal.mark_arrival``)."""
    user_agent = request.headers.get("User-Agent")
    if not loaded.spec.allow_mobile and allocation.is_mobile(user_agent):
        declared = arrival_exit_url(exp.spec, entry, Exit.INCOMPATIBLE_DEVICE)
        if declared is not None:  # the platform's incompatible-device code, decided here
            return redirect(declared)
        return _message(gettext("Please use a computer"),
                        gettext("This study needs a desktop or laptop computer with a keyboard. "
                                "Please return it or open the link on a computer."), 403)
    owned = _owned()
    if entry.platform == Platform.LOCAL and request.args.get("resume"):
        by_code = resume.participant_for_code(exp, request.args["resume"])
        if by_code is None or not resume.resumable(by_code):
            return _message(gettext("Resume code not recognised"),
                            gettext("This resume code does not match an unfinished session of this study. "
                                    "Please check the code, or start again without it."), 404)
        return _resume(by_code, owned, via="resume_code")
    previous = allocation.existing_participant(exp, entry)
    if previous is not None:
        if previous.public_id in owned and previous.status not in DONE:
            refused = _returning(previous, "same_browser")
            return refused or redirect(url_for("participant.task", pid=previous.public_id))
        if resume.same_identity(previous, entry) and resume.resumable(previous):
            resume.bind(previous, entry)
            return _resume(previous, owned, via=entry.platform.value)
        return _message(gettext("You have already taken part"),
                        gettext("Our records show you have already taken part in this study, so you "
                                "cannot take part again. Thank you for your interest."), 409)
    excluded = loaded.spec.exclude_participants_from
    if allocation.took_part_elsewhere(excluded, entry) or retention.hashed_elsewhere(
            excluded, entry.platform, entry.platform_id):
        return _message(gettext("Not eligible"),
                        gettext("You took part in a closely related study, so you cannot take part in "
                                "this one. Thank you for your interest."), 403)
    if retention.hashed_participant(exp, entry.platform, entry.platform_id):
        return _message(gettext("You have already taken part"),
                        gettext("Our records show you have already taken part in this study, so you "
                                "cannot take part again. Thank you for your interest."), 409)
    if breaker.paused(exp):
        return _message(gettext("Study paused"), gettext("This study is paused at the moment and takes no new "
                                "participants. Please try again later."), 503)
    if withdrawal.withdrew(exp.slug, entry.platform_id):
        return _message(gettext("You have withdrawn"), gettext("You withdrew from this study and your data were "
                                "deleted, so you cannot take part again. Thank you for your interest."), 409)
    if not retention.privacy(exp.slug).store_user_agent:
        user_agent = None  # used for the device check above, not stored ([privacy])
    try:
        participant, token = allocation.allocate(
            exp, loaded, entry, user_agent,
            simulated=preview_by is not None or rehearsal.is_rehearsal(exp.slug))
    except IntegrityError:
        return _lost_race(exp, entry, owned)
    rehearsal.mark_arrival(participant, exp.slug, preview_by)
    return _hand_over(participant, token, owned)


def _lost_race(exp: Experiment, entry: Entry, owned: dict[str, str]):
    """A simultaneous arrival with this id was allocated first (a reload while ``/start`` ran):
    the same identity resumes that participant; anyone else is refused."""
    winner = allocation.existing_participant(exp, entry)
    if winner is not None and resume.same_identity(winner, entry) and resume.resumable(winner):
        resume.bind(winner, entry)
        return _resume(winner, owned, via="simultaneous_arrival")
    return _message(gettext("You have already taken part"),
                    gettext("Our records show you have already started this study in another window."), 409)


def _hand_over(participant: Participant, token: str, owned: dict[str, str]):
    """Keep the token in the session cookie where the browser keeps it, and hand it to the page in
    the URL fragment (never sent to a server), which works in a cross-site frame without cookies."""
    owned[participant.public_id] = token
    session.modified = True
    return redirect(url_for("participant.run", pid=participant.public_id) + "#token=" + token)


def _resume(participant: Participant, owned: dict[str, str], via: str):
    """The same person again (platform identity or resume code): a fresh token; the old one is
    revoked. A participant allocated a moment ago is the same arrival, not a return (no policy)."""
    refused = None if resume.just_allocated(participant) else _returning(participant, via)
    if refused is not None:
        return refused
    token = resume.reissue_token(participant)
    db.session.add(Event(participant_id=participant.id, type="resume", value={"via": via},
                         server_time=utcnow()))
    db.session.commit()
    return _hand_over(participant, token, owned)


def _returning(participant: Participant, via: str):
    """The spec's resume policy for a participant coming back (``resume_policy``): None to go on,
    else the polite refusal page."""
    if not resume.resumable(participant):
        return None
    decision = resume_policy.on_return(participant, via)
    if decision.action != "refuse":
        return None
    owned = _owned()  # this browser may still withdraw: it holds a fresh token, the old one revoked
    owned[participant.public_id] = resume.reissue_token(participant)
    session.modified = True
    db.session.commit()
    outcomes.leave(participant, Exit.REFUSED_ON_RETURN)
    return _refusal_page(participant, decision)


def _refusal_page(participant: Participant, decision: resume_policy.Decision):
    """The polite refusal of a returning participant, with the withdrawal link and, where the
    spec declares this exit, the link that takes them to the platform with its code."""
    target = exit_target(participant) if participant.outcome == Exit.REFUSED_ON_RETURN else None
    message = resume_policy.refusal_message(decision, participant.platform,
                                            to_platform=target is not None)
    return render_template("withdraw.html", state="refused", title=resume_policy.REFUSED_TITLE,
                           message=message, pid=participant.public_id,
                           target=target), 409


def _task_page(participant: Participant, token: str | None):
    """The jsPsych page; without ``token`` the page takes it from the URL fragment or storage."""
    pid = participant.public_id
    if participant.status in DONE:
        return redirect(url_for("participant.done", pid=pid))
    if participant.status == ParticipantStatus.RETURNED:
        target = exit_target(participant)
        if target is not None:  # declined or screened out: the platform, with the exit's code
            return redirect(target["url"])
        return _message(gettext("Study ended"), gettext("You did not consent, so the study has ended. "
                                "Please return the study on your recruitment platform."), 200)
    refused = resume_policy.refusal_of(participant) if resume.resumable(participant) else None
    if refused is not None:  # refused on a return: the task page stays closed to them
        return _refusal_page(participant, refused)
    config = {
        "pid": pid,
        "token": token,
        "api": url_for("api.timeline", pid=pid).removesuffix("/timeline"),
        "slug": participant.experiment.slug,
        "resume_code": (resume.resume_code(participant)
                        if participant.platform == Platform.LOCAL else None),
        "reopen": gettext("Please open your original study link again (from the recruitment site "
                          "or the researcher's message): it brings you back to where you stopped."),
    }
    return render_template("task.html", config=config, title=participant.experiment.title)


def _participant(pid: str) -> Participant | None:
    return db.session.execute(
        sa.select(Participant).where(Participant.public_id == pid)
    ).scalar_one_or_none()


@bp.get("/task/<pid>")
def task(pid: str):
    """The jsPsych page for the browser holding this participant's token in its session cookie."""
    token = _owned().get(pid)
    participant = _participant(pid)
    if participant is None or token is None:
        return _message(gettext("Session not found"),
                        gettext("This page belongs to another browser session. Please open your "
                                "original study link again: it brings you back to where you stopped."), 403)
    return _task_page(participant, token)


@bp.get("/run/<pid>")
def run(pid: str):
    """The cookie-independent jsPsych page (MTurk's cross-site frame): the token arrives in the URL
    fragment or is already in this browser's storage; the page itself holds no secret."""
    participant = _participant(pid)
    if participant is None:
        return _message(gettext("Session not found"), gettext("This study session does not exist. Please open "
                                "your original study link again."), 404)
    return _task_page(participant, None)


@bp.get("/done/<pid>")
def done(pid: str):
    """The end page: the thank-you page for local links, and a fallback for the platforms."""
    participant = _participant(pid)
    if participant is None or pid not in _owned() or participant.status not in DONE:
        abort(404)
    target = completion_target(participant) if participant.platform != Platform.LOCAL else None
    if target is not None and target.get("url") == url_for("participant.done", pid=pid):
        target = None  # the source completes on this page (lab, a panel without a URL)
    return render_template("done.html", participant=participant, target=target)


@bp.get("/stimuli/<slug>/<path:filename>")
def stimulus_file(slug: str, filename: str):
    """Serve a stimulus listed in the experiment's manifest; anything else (or '..') is refused."""
    root = experiments.stimulus_root_for(slug, filename)  # any version's files, for old participants
    if root is None:
        abort(404)
    response = send_from_directory(root, filename, max_age=current_app.config["STIMULUS_MAX_AGE"])
    response.cache_control.public = True
    response.cache_control.immutable = True
    return response
