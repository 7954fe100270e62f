"""Withdrawal pages: ``GET /withdraw/<pid>`` asks for confirmation in plain words, ``POST`` (CSRF
token and the participant's write token) deletes everything stored about the participant."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, render_template, request, session
from flask_babel import lazy_gettext

from humanlike.server.extensions import db
from humanlike.server.lifecycle import DONE, ParticipantStatus
from humanlike.server.participants.tokens import token_matches
from humanlike.server.platforms import Platform
from humanlike.server.rights import withdrawal
from humanlike.server.tables.core import Participant

bp = Blueprint("withdrawal", __name__)

GONE = (lazy_gettext("Nothing is stored"),
        lazy_gettext("No data of this study session are stored (they may have been deleted "
                     "already). You do not need to do anything else here."))


def _participant(pid: str) -> Participant | None:
    return db.session.execute(
        sa.select(Participant).where(Participant.public_id == pid)).scalar_one_or_none()


def _reviewed(participant: Participant) -> bool:
    """Approved or rejected already: nothing about the pay is left to decide."""
    return participant.status in (ParticipantStatus.APPROVED, ParticipantStatus.REJECTED)


def _page(state: str, status: int = 200, **context):
    return render_template("withdraw.html", state=state, **context), status


def _closed(participant: Participant):
    """The page refusing a withdrawal after the data's publication date."""
    until = withdrawal.withdraw_until(participant.experiment.slug)
    return _page("past_deadline", 410, until=until)


@bp.get("/withdraw/<pid>")
def confirm(pid: str):
    """The confirmation page (writes nothing); unknown or already deleted: says nothing is stored."""
    participant = _participant(pid)
    if participant is None:
        return _page("gone", 200, title=GONE[0], message=GONE[1])
    if not withdrawal.still_possible(participant.experiment.slug):
        return _closed(participant)
    finished = participant.status in DONE
    back = None if finished else f"/run/{pid}"
    return _page("confirm", pid=pid, finished=finished, back=back,
                 study=participant.experiment.title, account=participant.platform != Platform.LOCAL,
                 advice=withdrawal.platform_advice(participant.platform, finished,
                                                   reviewed=_reviewed(participant)))


@bp.post("/withdraw/<pid>")
def withdraw(pid: str):
    """Delete the participant's data: needs the page's CSRF token and the participant's write
    token (form field ``token``, or this browser's session cookie); a repeat is harmless."""
    participant = _participant(pid)
    if participant is None:
        return _page("gone", 200, title=GONE[0], message=GONE[1])
    tokens = [request.form.get("token"), session.get("participants", {}).get(pid)]
    if not any(t and token_matches(participant.token_hash, t) for t in tokens):
        return _page("forbidden", 403)  # the form's (this browser's storage) or the cookie's
    if request.form.get("confirm") != "yes":
        return _page("unconfirmed", 400, pid=pid)
    if not withdrawal.still_possible(participant.experiment.slug):
        return _closed(participant)
    finished = participant.status in DONE
    advice = withdrawal.platform_advice(participant.platform, finished, withdrawn=True,
                                        reviewed=_reviewed(participant))
    withdrawal.withdraw(participant)
    owned = session.get("participants")
    if isinstance(owned, dict) and owned.pop(pid, None) is not None:
        session.modified = True
    return _page("done", pid=pid, advice=advice)
