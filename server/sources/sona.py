"""SONA's server-side completion: one credit grant per completed participant.

The grant row is written in the transaction that completes the participant (``record_pending``), so
a restart never loses it; one sender claims it with an atomic UPDATE before calling SONA (two
processes never send the same grant at once); a network failure or a 5xx puts it back to
``pending`` (sent again by the next ``/complete`` of the study or ``humanlike sona grants
--retry``); SONA's refusal marks it ``failed`` (retried by hand). A claim older than
``SONA_CLAIM_SECONDS`` is taken to be a sender that died mid-call and is sent again: SONA credits a
survey code once and answers a repeat with an "already" error, which counts as granted.

SONA's WebstudyCredit call is an HTTP GET with ``experiment_id``, ``credit_token`` and
``survey_code`` in the URL; the XML reply holds a ``Result`` (``credit_status`` ``G`` when granted)
or ``Errors`` (sona-systems.com, "Server-Side Completion URL Responses")."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

import httpx
import sqlalchemy as sa
from flask import current_app

from humanlike.server import audit, platforms
from humanlike.server.extensions import db
from humanlike.server.tables.core import Experiment, Participant, utcnow
from humanlike.server.tables.sona import GrantState, SonaGrant

CLAIM_SECONDS = 120
TIMEOUT_SECONDS = 10.0
REPLY_LIMIT = 4000


@dataclass(frozen=True)
class Reply:
    """SONA's answer: credited (now or before), else the error text."""

    granted: bool
    already: bool = False
    credit_status: str | None = None
    error: str | None = None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _is_nil(element: ET.Element) -> bool:
    return any(_local(k) == "nil" and v == "true" for k, v in element.attrib.items())


def parse_reply(text: str) -> Reply:
    """Read a WebstudyCredit XML reply (namespaces ignored): ``Errors`` with content is a refusal
    (one mentioning "already" means credited before); else a ``Result`` whose ``credit_status``,
    when given, is ``G``."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        return Reply(False, error=f"reply is not XML: {exc}")
    errors = next((e for e in root.iter() if _local(e.tag) == "Errors"), None)
    if errors is not None and not _is_nil(errors):
        message = " ".join(t.strip() for t in errors.itertext() if t.strip()) or "error"
        return Reply("already" in message.lower(), already="already" in message.lower(),
                     error=message[:500])
    result = next((e for e in root.iter() if _local(e.tag) == "Result"), None)
    if result is None or _is_nil(result):
        return Reply(False, error="reply has neither Errors nor Result")
    status = next((e.text for e in result.iter() if _local(e.tag) == "credit_status"), None)
    if status is not None and status.strip() != "G":
        return Reply(False, credit_status=status.strip(),
                     error=f"credit_status {status.strip()!r}, not 'G'")
    return Reply(True, credit_status=status.strip() if status else None)


def record_pending(participant: Participant) -> SonaGrant | None:
    """Add this participant's grant (pending) to the session, where its study has a server-side
    completion URL; the caller commits it with the completion. Idempotent."""
    url = platforms.server_completion_url(participant)
    if url is None:
        return None
    existing = db.session.execute(sa.select(SonaGrant).where(
        SonaGrant.participant_id == participant.id)).scalar_one_or_none()
    if existing is not None:
        return existing
    grant = SonaGrant(participant_id=participant.id, experiment_id=participant.experiment_id,
                      url=url, state=GrantState.PENDING.value, attempts=0, created_at=utcnow())
    db.session.add(grant)
    return grant


def _claim(grant_id: int, retry_failed: bool) -> bool:
    """Take the grant for this sender (one UPDATE, committed): pending, failed when retrying by
    hand, or a claim gone stale. False when another sender holds it or it is done."""
    now = utcnow()
    stale = now - dt.timedelta(seconds=current_app.config.get("SONA_CLAIM_SECONDS", CLAIM_SECONDS))
    states = [GrantState.PENDING.value] + ([GrantState.FAILED.value] if retry_failed else [])
    claimed = db.session.execute(
        sa.update(SonaGrant)
        .where(SonaGrant.id == grant_id,
               sa.or_(SonaGrant.state.in_(states),
                      sa.and_(SonaGrant.state == GrantState.SENDING.value,
                              SonaGrant.claimed_at < stale)))
        .values(state=GrantState.SENDING.value, claimed_at=now, attempts=SonaGrant.attempts + 1)
        .execution_options(synchronize_session=False))
    db.session.commit()
    return claimed.rowcount == 1  # type: ignore[attr-defined]


def _call(url: str) -> tuple[GrantState, Reply | None, str | None, str | None]:
    """GET the grant URL: (state, parsed reply, error, reply text)."""
    transport = httpx.HTTPTransport(retries=2)  # connection failures only: nothing was sent
    try:
        with httpx.Client(transport=transport, timeout=TIMEOUT_SECONDS) as client:
            response = client.get(url)
    except httpx.HTTPError as exc:
        return GrantState.PENDING, None, f"{type(exc).__name__}: {exc}"[:500], None
    text = response.text[:REPLY_LIMIT]
    if response.status_code >= 500 or response.status_code in (408, 429):
        return GrantState.PENDING, None, f"HTTP {response.status_code}", text
    if response.status_code >= 400:
        return GrantState.FAILED, None, f"HTTP {response.status_code}", text
    reply = parse_reply(response.text)
    return (GrantState.GRANTED if reply.granted else GrantState.FAILED), reply, reply.error, text


def send(grant_id: int, *, retry_failed: bool = False, actor: str = "server") -> str:
    """Send one grant if this sender can claim it; record and audit the outcome; its state."""
    claimed = _claim(grant_id, retry_failed)
    grant = db.session.get_one(SonaGrant, grant_id, populate_existing=True)
    if not claimed:
        return str(grant.state)
    state, reply, error, text = _call(grant.url)
    grant.state, grant.last_error, grant.reply = state.value, error, text
    if state == GrantState.GRANTED:
        grant.granted_at = utcnow()
    participant = db.session.get(Participant, grant.participant_id)
    experiment = db.session.get(Experiment, grant.experiment_id)
    audit.record(actor, "sona_grant", experiment=experiment.slug if experiment else None,
                 target=participant.public_id if participant else None,
                 detail={"state": state.value, "attempt": grant.attempts, "error": error,
                         "credit_status": reply.credit_status if reply else None,
                         "already": reply.already if reply else False})
    db.session.commit()
    return state.value


def send_for(participant: Participant, others: int = 5) -> str | None:
    """After ``/complete``: send this participant's grant, then up to ``others`` more of the study
    still pending (left by a restart or an outage). This participant's state, or None."""
    if platforms.server_completion_url(participant) is None:
        return None
    own = db.session.execute(sa.select(SonaGrant.id).where(
        SonaGrant.participant_id == participant.id)).scalar_one_or_none()
    state = send(own) if own is not None else None
    for grant_id in [g for g in waiting(participant.experiment_id, limit=others + 1)
                     if g != own][:others]:
        send(grant_id)
    return state


def waiting(experiment_id: int | None = None, limit: int | None = None) -> list[int]:
    """Grants to send automatically: pending, or claimed by a sender that went quiet."""
    stale = utcnow() - dt.timedelta(seconds=current_app.config.get("SONA_CLAIM_SECONDS",
                                                                   CLAIM_SECONDS))
    query = sa.select(SonaGrant.id).where(sa.or_(
        SonaGrant.state == GrantState.PENDING.value,
        sa.and_(SonaGrant.state == GrantState.SENDING.value, SonaGrant.claimed_at < stale)))
    if experiment_id is not None:
        query = query.where(SonaGrant.experiment_id == experiment_id)
    return list(db.session.execute(query.order_by(SonaGrant.id).limit(limit)).scalars())


def grants(slug: str | None = None) -> list[dict[str, Any]]:
    """Every grant (of one study): participant, survey code, state, attempts, last error, times;
    what the dashboard shows."""
    query = (sa.select(SonaGrant, Participant.public_id, Participant.platform_id, Experiment.slug)
             .join(Participant, Participant.id == SonaGrant.participant_id)
             .join(Experiment, Experiment.id == SonaGrant.experiment_id)
             .order_by(SonaGrant.id))
    if slug is not None:
        query = query.where(Experiment.slug == slug)
    return [{"experiment": exp_slug, "participant": pid, "survey_code": code, "state": g.state,
             "attempts": g.attempts, "last_error": g.last_error, "created_at": g.created_at,
             "granted_at": g.granted_at, "id": g.id}
            for g, pid, code, exp_slug in db.session.execute(query).all()]


def grant_state(participant: Participant) -> str | None:
    """One participant's grant state (``pending``, ``sending``, ``granted``, ``failed``) or None."""
    return db.session.execute(sa.select(SonaGrant.state).where(
        SonaGrant.participant_id == participant.id)).scalar_one_or_none()


def retry(slug: str | None = None, *, actor: str) -> dict[str, str]:
    """Send every grant not yet credited (failed ones too, by hand): public id -> new state."""
    query = (sa.select(SonaGrant.id, Participant.public_id)
             .join(Participant, Participant.id == SonaGrant.participant_id)
             .join(Experiment, Experiment.id == SonaGrant.experiment_id)
             .where(SonaGrant.state != GrantState.GRANTED.value).order_by(SonaGrant.id))
    if slug is not None:
        query = query.where(Experiment.slug == slug)
    return {pid: send(gid, retry_failed=True, actor=actor)
            for gid, pid in db.session.execute(query).all()}


def retry_one(participant: Participant, *, actor: str) -> str | None:
    """The dashboard's "retry grant" on one participant: send it now (failed ones too); its new
    state, or None when the participant has no grant."""
    grant_id = db.session.execute(sa.select(SonaGrant.id).where(
        SonaGrant.participant_id == participant.id)).scalar_one_or_none()
    return None if grant_id is None else send(grant_id, retry_failed=True, actor=actor)
