"""Prolific's webhooks (https://docs.prolific.com/api-reference/webhooks): ``POST /hooks/prolific``.

Each delivery's ``X-Prolific-Request-Signature`` is checked first: base64 of HMAC-SHA256 over
``X-Prolific-Request-Timestamp`` + the body with the workspace's secret (".../webhooks/verifying");
a wrong or missing one is refused (401) and changes nothing, and so is one whose signed timestamp
(a UNIX time of when the request was sent) is more than ``PROLIFIC_WEBHOOK_MAX_AGE_S`` (300)
seconds from this server's clock: a captured delivery cannot be replayed later. ``X-Event-ID`` and
``X-Timestamp`` are not signed: an event is kept once by its ``X-Event-ID`` (Prolific's retries) and
once by its signature (a replay under a new id); either repeat is answered 200 and does nothing.
What a submission event applies is Prolific's own status of the submission, read back
(``GET /api/v1/submissions/{id}/``), never the order the events claim; an event whose status
Prolific no longer holds is ``stale``, and the participant still moves to what Prolific holds, only
along the participant lifecycle, as a conditional UPDATE (two deliveries at once move a participant
once). Without ``PROLIFIC_TOKEN`` there is nothing to read back: the signed request time orders the
events of one resource. Prolific unreachable for the read-back: 503 and nothing kept (Prolific
retries). ``study.status.change`` (read back too) and ``study.has_high_return_rate`` are noted on
the experiment's listing for the dashboard. Polling (``recruit prolific sync``, the dashboard's
"Sync now") stays the fallback. The secret comes from ``PROLIFIC_WEBHOOK_SECRET`` or the instance
file ``recruit prolific hooks`` writes."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import os
import re
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, current_app, jsonify, request
from sqlalchemy.exc import IntegrityError

from humanlike.server import audit
from humanlike.server.extensions import csrf, db
from humanlike.server.tables.core import Experiment, Participant, utcnow
from humanlike.server.tables.platform_events import EventOutcome, PlatformEvent

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


CONFIRMED_FILE = "prolific_webhook_subscriptions.json"
"""The subscriptions ``recruit prolific hooks`` confirmed (Prolific's API does not show it)."""


def confirmed_subscriptions(instance_path: str) -> dict[str, str]:
    """Subscription id -> event type of every subscription this server confirmed."""
    path = Path(instance_path) / CONFIRMED_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def store_confirmed(instance_path: str, confirmed: dict[str, str]) -> None:
    """Keep the ids of the subscriptions this server confirmed, in the instance folder."""
    path = Path(instance_path) / CONFIRMED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(confirmed, indent=1, sort_keys=True))


def webhook_secret() -> str | None:
    """``PROLIFIC_WEBHOOK_SECRET``, else the secret ``recruit prolific hooks`` stored."""
    if os.environ.get("PROLIFIC_WEBHOOK_SECRET"):
        return os.environ["PROLIFIC_WEBHOOK_SECRET"]
    path = secret_path(current_app.instance_path)
    return path.read_text().strip() or None if path.exists() else None


def signature_ok(secret: str, stamp: str, body: bytes, signature: str) -> bool:
    """Prolific's check: base64(HMAC-SHA256(secret, timestamp + body)) equals the header (compared
    in constant time). The body is taken as received and as Prolific's example re-serialises it
    (a body nested too deeply to parse is taken as received only)."""
    bodies = [body]
    with contextlib.suppress(ValueError, RecursionError):
        bodies.append(json.dumps(json.loads(body)).encode())
    for candidate in bodies:
        digest = hmac.new(secret.encode(), stamp.encode() + candidate, hashlib.sha256).digest()
        if hmac.compare_digest(base64.b64encode(digest), signature.encode()):
            return True
    return False


MAX_AGE_S = 300
"""How far (seconds, either way) a signed request time may be from this server's clock."""
STAMP = re.compile(r"[0-9]{1,11}(\.[0-9]{1,9})?")
"""A UNIX time in seconds, as Prolific signs it."""
MAX_BODY = 64 * 1024
"""The largest delivery taken (Prolific's are a few hundred bytes)."""


class ProlificUnavailable(Exception):
    """Prolific did not answer the read-back (a time-out, a 5xx): the delivery is refused with
    503 so that Prolific sends it again."""


def signed_at(stamp: str) -> dt.datetime | None:
    """``X-Prolific-Request-Timestamp`` (UNIX seconds) as a UTC time; None when it is not one."""
    if not STAMP.fullmatch(stamp):
        return None
    return dt.datetime.fromtimestamp(float(stamp), dt.UTC)


def _error(status: int, error: str, detail: str):
    return jsonify(error=error, detail=detail), status


@bp.post("/prolific")
def receive():
    """One delivery from Prolific (or the subscription handshake, answered with its secret)."""
    handshake = request.headers.get("X-Hook-Secret")
    if request.content_length is not None and request.content_length > MAX_BODY:
        return _error(413, "body_too_large", f"a webhook delivery is at most {MAX_BODY} bytes")
    body = request.get_data()
    if len(body) > MAX_BODY:
        return _error(413, "body_too_large", f"a webhook delivery is at most {MAX_BODY} bytes")
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
    sent = signed_at(stamp)
    max_age = float(current_app.config.get("PROLIFIC_WEBHOOK_MAX_AGE_S", MAX_AGE_S))
    if sent is None or abs((utcnow() - sent).total_seconds()) > max_age:
        return _error(401, "stale_signature", "X-Prolific-Request-Timestamp is not within "
                      f"{max_age:g} seconds of this server's clock: a delivery is accepted only "
                      "when it is sent")
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return _error(400, "bad_body", "the body is not JSON")
    if not isinstance(payload, dict) or not isinstance(payload.get("event_type"), str) \
            or not isinstance(payload.get("resource_id"), str):
        return _error(400, "bad_body", "event_type and resource_id are required")
    delivery = hashlib.sha256(signature.encode()).hexdigest()
    event_id = (request.headers.get("X-Event-ID") or delivery)[:128]
    if _known(event_id, delivery):
        return jsonify(event=event_id, duplicate=True)
    try:
        platform_status = read_back(str(payload["event_type"]), str(payload["resource_id"]))
    except ProlificUnavailable as exc:
        return _error(503, "platform_unavailable", f"Prolific's own state could not be read "
                      f"back ({exc}); nothing was kept, so Prolific's retry is applied")
    claimed = request.headers.get("X-Timestamp")
    return jsonify(record(payload, event_id, sent, delivery=delivery,
                          platform_status=platform_status,
                          claimed=claimed[:64] if claimed else None))


def _known(event_id: str, delivery: str) -> bool:
    """This event (X-Event-ID) or this very delivery (its signature) was kept already."""
    return db.session.execute(sa.select(PlatformEvent.id).where(sa.or_(
        PlatformEvent.event_id == event_id, PlatformEvent.delivery == delivery)).limit(1)
    ).first() is not None


def read_back(event_type: str, resource_id: str) -> str | None:
    """Prolific's own current status of the event's submission or study; None when there is
    nothing to read back (no ``PROLIFIC_TOKEN`` here, an event without a status, or a resource
    this server does not know). ``ProlificUnavailable`` when Prolific does not answer."""
    if not os.environ.get("PROLIFIC_TOKEN"):
        return None
    if event_type == "submission.status.change":
        known = sa.select(Participant.id).where(Participant.platform == "prolific",
                                                Participant.session_id == resource_id)
    elif event_type == "study.status.change":
        known = sa.select(Experiment.id).where(Experiment.platform == "prolific",
                                               Experiment.recruitment_ref == resource_id)
    else:
        return None
    if db.session.execute(known.limit(1)).first() is None:
        return None
    from humanlike.server.sources.prolific import ProlificClient, ProlificError

    client = ProlificClient(retries=1, timeout=5.0)  # inside Prolific's delivery: bounded
    try:
        if event_type == "submission.status.change":
            current = client.get_submission(resource_id)
        else:
            current = client.get_study(resource_id)
    except ProlificError as exc:
        if exc.unknown or exc.status is None or exc.status == 429:
            raise ProlificUnavailable(str(exc)) from exc
        return None  # Prolific refuses to show it (4xx): nothing better than the event itself
    finally:
        client.close()
    status = current.get("status") if isinstance(current, dict) else None
    return str(status) if status is not None else None


def record(payload: dict[str, Any], event_id: str, happened_at: dt.datetime | None, *,
           delivery: str | None = None, platform_status: str | None = None,
           claimed: str | None = None) -> dict[str, Any]:
    """Keep the event once and apply it; what it did (``duplicate`` when already received).
    ``happened_at`` is the signed request time; ``platform_status`` Prolific's status read back
    (None: apply the event's own, ordered by ``happened_at``); ``claimed`` the unsigned
    X-Timestamp, kept for the record only."""
    status = payload.get("status")
    detail: dict[str, Any] = {}
    if claimed is not None:
        detail["x_timestamp"] = claimed
    if platform_status is not None:
        detail["platform_status"] = platform_status
    event = PlatformEvent(platform="prolific", event_id=event_id, delivery=delivery,
                          event_type=str(payload["event_type"])[:64],
                          resource_id=str(payload["resource_id"])[:128],
                          status=str(status)[:32] if status is not None else None,
                          happened_at=happened_at, received_at=utcnow(),
                          outcome=EventOutcome.UNKNOWN.value, detail=detail or None)
    db.session.add(event)
    try:
        db.session.flush()
    except IntegrityError:
        db.session.rollback()
        return {"event": event_id, "duplicate": True}
    if event.event_type == "submission.status.change":
        _submission(event, platform_status)
    elif event.event_type in ("study.status.change", "study.has_high_return_rate"):
        _study(event, platform_status)
    db.session.commit()
    return {"event": event_id, "outcome": event.outcome}


def _later_applied(event: PlatformEvent) -> bool:
    """An event of the same resource sent (signed time) after this one has been applied."""
    if event.happened_at is None:
        return False
    stmt = sa.select(PlatformEvent.id).where(
        PlatformEvent.resource_id == event.resource_id, PlatformEvent.id != event.id,
        PlatformEvent.outcome.in_([EventOutcome.APPLIED.value, EventOutcome.UNCHANGED.value]),
        PlatformEvent.happened_at > event.happened_at).limit(1)
    return db.session.execute(stmt).first() is not None


def _submission(event: PlatformEvent, platform_status: str | None) -> None:
    """Move the participant whose Prolific submission this is to Prolific's status (read back, or
    the event's own when it cannot be), if the lifecycle allows."""
    from humanlike.server.sources.prolific import STATUS_TRANSITIONS

    participant = db.session.execute(sa.select(Participant).where(
        Participant.platform == "prolific", Participant.session_id == event.resource_id)
    ).scalar_one_or_none()
    if participant is None:
        event.outcome = EventOutcome.UNKNOWN.value
        return
    event.experiment_id = participant.experiment_id
    if platform_status is None and _later_applied(event):
        event.outcome = EventOutcome.STALE.value
        return
    superseded = platform_status is not None and platform_status != event.status
    status = platform_status if platform_status is not None else event.status
    transition = STATUS_TRANSITIONS.get(status or "")
    if transition is None or participant.status == transition.target:
        event.outcome = (EventOutcome.STALE if superseded else EventOutcome.UNCHANGED).value
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
        event.detail = {**(event.detail or {}), "local": before}
        return
    event.outcome = EventOutcome.APPLIED.value
    db.session.expire(participant)
    audit.record(ACTOR, f"hook_{transition.name}", experiment=participant.experiment.slug,
                 target=participant.public_id,
                 detail={"from": before, "to": transition.target.value, "platform": status,
                         "event": event.event_id})


def _study(event: PlatformEvent, platform_status: str | None) -> None:
    """Note the listing's status (Prolific's own, read back, where it can be) or its high return
    rate on the experiment (shown on the dashboard)."""
    experiment = db.session.execute(sa.select(Experiment).where(
        Experiment.platform == "prolific", Experiment.recruitment_ref == event.resource_id)
    ).scalar_one_or_none()
    if experiment is None:
        event.outcome = EventOutcome.UNKNOWN.value
        return
    event.experiment_id = experiment.id
    if platform_status is None and _later_applied(event) \
            and event.event_type == "study.status.change":
        event.outcome = EventOutcome.STALE.value
        return
    meta = dict(experiment.recruitment_meta or {})
    when = (event.happened_at or event.received_at).isoformat().replace("+00:00", "Z")
    if event.event_type == "study.status.change":
        status = platform_status if platform_status is not None else event.status
        meta["platform_status"], meta["platform_status_at"] = status, when
    else:
        meta["high_return_rate_at"] = when
    meta["last_event_at"] = when
    experiment.recruitment_meta = meta
    event.outcome = EventOutcome.APPLIED.value
    audit.record(ACTOR, f"hook_{event.event_type.replace('.', '_')}", experiment=experiment.slug,
                 target=event.resource_id, detail={"status": event.status, "event": event.event_id})
