"""Prolific's webhooks (https://docs.prolific.com/api-reference/webhooks): ``POST /hooks/prolific``.

Each delivery's ``X-Prolific-Request-Signature`` is checked first: base64 of HMAC-SHA256 over
``X-Prolific-Request-Timestamp`` + the body with the workspace's secret (".../webhooks/verifying");
a wrong or missing one is refused (401) and changes nothing. An event is kept once by its
``X-Event-ID`` (a redelivery is answered 200 and does nothing); a submission's status is applied
only when no event of that submission that happened later (``X-Timestamp``) was applied already,
and only along the participant lifecycle, as a conditional UPDATE (two deliveries at once move a
participant once). ``study.status.change`` and ``study.has_high_return_rate`` are noted on the
experiment's listing for the dashboard. Polling (``recruit prolific sync``, the dashboard's "Sync
now") stays the fallback. The secret comes from ``PROLIFIC_WEBHOOK_SECRET`` or the instance file
``recruit prolific hooks`` writes."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, current_app, jsonify, request
from sqlalchemy.exc import IntegrityError

from humanlike.server import audit
from humanlike.server.extensions import csrf, db
from humanlike.server.models import Experiment, Participant, utcnow
from humanlike.server.platform_events import EventOutcome, PlatformEvent

bp = Blueprint("prolific_hooks", __name__, url_prefix="/hooks")
csrf.exempt(bp)

SECRET_FILE = "prolific_webhook_secret"
EVENT_TYPES = ("submission.status.change", "study.status.change", "study.has_high_return_rate")
"""The events ``recruit prolific hooks`` subscribes to."""
ACTOR = "prolific:webhook"


def secret_path(instance_path: str) -> Path:
    return Path(instance_path) / SECRET_FILE


def store_secret(instance_path: str, value: str) -> Path:
    """Keep the workspace's webhook secret in the instance folder, readable by its owner only."""
    path = secret_path(instance_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value)
    return path


def webhook_secret() -> str | None:
    """``PROLIFIC_WEBHOOK_SECRET``, else the secret ``recruit prolific hooks`` stored."""
    if os.environ.get("PROLIFIC_WEBHOOK_SECRET"):
        return os.environ["PROLIFIC_WEBHOOK_SECRET"]
    path = secret_path(current_app.instance_path)
    return path.read_text().strip() or None if path.exists() else None


def signature_ok(secret: str, stamp: str, body: bytes, signature: str) -> bool:
    """Prolific's check: base64(HMAC-SHA256(secret, timestamp + body)) equals the header (compared
    in constant time). The body is taken as received and as Prolific's example re-serialises it."""
    bodies = [body]
    with contextlib.suppress(ValueError):
        bodies.append(json.dumps(json.loads(body)).encode())
    for candidate in bodies:
        digest = hmac.new(secret.encode(), stamp.encode() + candidate, hashlib.sha256).digest()
        if hmac.compare_digest(base64.b64encode(digest), signature.encode()):
            return True
    return False


def _when(value: str | None) -> dt.datetime | None:
    """``X-Timestamp`` as a UTC time (ISO 8601 or UNIX seconds); None when absent or unreadable."""
    if not value:
        return None
    try:
        when = (dt.datetime.fromtimestamp(float(value), dt.UTC) if value.replace(".", "").isdigit()
                else dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
    except (ValueError, OverflowError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _error(status: int, error: str, detail: str):
    return jsonify(error=error, detail=detail), status


@bp.post("/prolific")
def receive():
    """One delivery from Prolific (or the subscription handshake, answered with its secret)."""
    handshake = request.headers.get("X-Hook-Secret")
    body = request.get_data()
    if handshake is not None and not body:
        response = jsonify(ok=True)
        response.headers["X-Hook-Secret"] = handshake
        return response
    secret = webhook_secret()
    if not secret:
        return _error(503, "not_configured", "no webhook secret here: run `humanlike recruit "
                      "prolific hooks` or set PROLIFIC_WEBHOOK_SECRET")
    signature = request.headers.get("X-Prolific-Request-Signature", "")
    stamp = request.headers.get("X-Prolific-Request-Timestamp", "")
    if not signature or not stamp or not signature_ok(secret, stamp, body, signature):
        return _error(401, "bad_signature", "X-Prolific-Request-Signature does not match this "
                      "body and timestamp under the workspace's secret")
    try:
        payload = json.loads(body)
    except ValueError:
        return _error(400, "bad_body", "the body is not JSON")
    if not isinstance(payload, dict) or not isinstance(payload.get("event_type"), str) \
            or not isinstance(payload.get("resource_id"), str):
        return _error(400, "bad_body", "event_type and resource_id are required")
    event_id = request.headers.get("X-Event-ID") or hashlib.sha256(
        request.headers.get("X-Timestamp", "").encode() + body).hexdigest()
    return jsonify(record(payload, event_id[:128], _when(request.headers.get("X-Timestamp"))))


def record(payload: dict[str, Any], event_id: str, happened_at: dt.datetime | None
           ) -> dict[str, Any]:
    """Keep the event once and apply it; what it did (``duplicate`` when already received)."""
    status = payload.get("status")
    event = PlatformEvent(platform="prolific", event_id=event_id,
                          event_type=str(payload["event_type"])[:64],
                          resource_id=str(payload["resource_id"])[:128],
                          status=str(status)[:32] if status is not None else None,
                          happened_at=happened_at, received_at=utcnow(),
                          outcome=EventOutcome.UNKNOWN.value)
    db.session.add(event)
    try:
        db.session.flush()
    except IntegrityError:
        db.session.rollback()
        return {"event": event_id, "duplicate": True}
    if event.event_type == "submission.status.change":
        _submission(event)
    elif event.event_type in ("study.status.change", "study.has_high_return_rate"):
        _study(event)
    db.session.commit()
    return {"event": event_id, "outcome": event.outcome}


def _later_applied(event: PlatformEvent) -> bool:
    """An event of the same resource that happened after this one has been applied."""
    if event.happened_at is None:
        return False
    stmt = sa.select(PlatformEvent.id).where(
        PlatformEvent.resource_id == event.resource_id, PlatformEvent.id != event.id,
        PlatformEvent.outcome.in_([EventOutcome.APPLIED.value, EventOutcome.UNCHANGED.value]),
        PlatformEvent.happened_at > event.happened_at).limit(1)
    return db.session.execute(stmt).first() is not None


def _submission(event: PlatformEvent) -> None:
    """Move the participant whose Prolific submission this is, if the lifecycle allows."""
    from humanlike.deploy.prolific import STATUS_TRANSITIONS

    participant = db.session.execute(sa.select(Participant).where(
        Participant.platform == "prolific", Participant.session_id == event.resource_id)
    ).scalar_one_or_none()
    if participant is None:
        event.outcome = EventOutcome.UNKNOWN.value
        return
    event.experiment_id = participant.experiment_id
    if _later_applied(event):
        event.outcome = EventOutcome.STALE.value
        return
    transition = STATUS_TRANSITIONS.get(event.status or "")
    if transition is None or participant.status == transition.target:
        event.outcome = EventOutcome.UNCHANGED.value
        return
    before = participant.status
    moved = db.session.execute(
        sa.update(Participant)
        .where(Participant.id == participant.id, Participant.status.in_(
            sorted(s.value for s in transition.sources)))
        .values(**transition.values(utcnow()))
        .execution_options(synchronize_session=False))
    if getattr(moved, "rowcount", 0) != 1:
        event.outcome = EventOutcome.CONFLICT.value
        event.detail = {"local": before}
        return
    event.outcome = EventOutcome.APPLIED.value
    db.session.expire(participant)
    audit.record(ACTOR, f"hook_{transition.name}", experiment=participant.experiment.slug,
                 target=participant.public_id,
                 detail={"from": before, "to": transition.target.value, "platform": event.status,
                         "event": event.event_id})


def _study(event: PlatformEvent) -> None:
    """Note the listing's status or its high return rate on the experiment (shown on the
    dashboard)."""
    experiment = db.session.execute(sa.select(Experiment).where(
        Experiment.platform == "prolific", Experiment.recruitment_ref == event.resource_id)
    ).scalar_one_or_none()
    if experiment is None:
        event.outcome = EventOutcome.UNKNOWN.value
        return
    event.experiment_id = experiment.id
    if _later_applied(event) and event.event_type == "study.status.change":
        event.outcome = EventOutcome.STALE.value
        return
    meta = dict(experiment.recruitment_meta or {})
    when = (event.happened_at or event.received_at).isoformat().replace("+00:00", "Z")
    if event.event_type == "study.status.change":
        meta["platform_status"], meta["platform_status_at"] = event.status, when
    else:
        meta["high_return_rate_at"] = when
    meta["last_event_at"] = when
    experiment.recruitment_meta = meta
    event.outcome = EventOutcome.APPLIED.value
    audit.record(ACTOR, f"hook_{event.event_type.replace('.', '_')}", experiment=experiment.slug,
                 target=event.resource_id, detail={"status": event.status, "event": event.event_id})
