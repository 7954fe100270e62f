"""The participant JSON API (Bearer-token auth): timeline, consent, trials, events, completion, health."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa
from flask import Blueprint, current_app, jsonify, request, url_for
from pydantic import ValidationError
from sqlalchemy.dialects import postgresql, sqlite

from humanlike.server import experiments
from humanlike.server.database import autocommit_engine, ping, write_lock
from humanlike.server.errors import api_abort
from humanlike.server.extensions import csrf, db
from humanlike.server.models import Event, Participant, Trial, utcnow
from humanlike.server.payloads import EventIn, TrialIn, validate_response

bp = Blueprint("api", __name__)
csrf.exempt(bp)

PRE_TRIAL_STATUSES = ("allocated", "consented")


def hash_token(token: str) -> str:
    """Tokens are stored as their sha256; the secret itself lives only in the participant's browser."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class _Auth:
    """What the API needs to know about a participant on every request (immutable after allocation)."""

    id: int
    public_id: str
    token_hash: str
    slug: str
    n_trials: int
    trials: list[dict[str, Any]]
    labels: list[str]
    status: str


class _AuthCache:
    """A small per-process LRU of participants' immutable data, so a trial costs one insert."""

    def __init__(self, size: int = 4096):
        self.size, self.lock = size, threading.Lock()
        self.items: OrderedDict[str, _Auth] = OrderedDict()

    def get(self, key: str) -> _Auth | None:
        with self.lock:
            item = self.items.get(key)
            if item is not None:
                self.items.move_to_end(key)
            return item

    def put(self, key: str, value: _Auth) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_cache = _AuthCache()


def _load_auth(public_id: str) -> _Auth:
    row = db.session.execute(
        sa.select(Participant).where(Participant.public_id == public_id)
    ).scalar_one_or_none()
    if row is None:
        api_abort(404, "unknown_participant", f"no participant {public_id!r}")
    timeline = row.timeline
    return _Auth(
        id=row.id,
        public_id=row.public_id,
        token_hash=row.token_hash,
        slug=row.experiment.slug,
        n_trials=row.n_trials,
        trials=timeline["trials"],
        labels=[c["label"] for c in timeline["categories"]],
        status=row.status,
    )


def authorize(public_id: str) -> _Auth:
    """The participant named in the URL, provided the Bearer token is theirs (401/403/404 otherwise)."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer ") or len(header) < 16:
        api_abort(401, "missing_token", "send 'Authorization: Bearer <token>'")
    auth = _cache.get(public_id)
    if auth is None:
        auth = _load_auth(public_id)
        _cache.put(public_id, auth)
    if not hmac.compare_digest(auth.token_hash, hash_token(header[7:].strip())):
        api_abort(403, "wrong_token", "this token does not belong to this participant")
    return auth


def _raw_body() -> bytes:
    """The request body, refused with 413 when over the limit."""
    limit = cast(int, request.max_content_length)  # MAX_CONTENT_LENGTH is always set (config.py)
    if request.content_length is not None and request.content_length > limit:
        api_abort(413, "body_too_large", f"at most {limit} bytes")
    return request.get_data(cache=False)


def _json_body() -> Any:
    raw = _raw_body()
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        api_abort(400, "malformed_json", str(exc))


def _validation_detail(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
    ]


def _current_status(auth: _Auth) -> str:
    status = db.session.execute(
        sa.select(Participant.status).where(Participant.id == auth.id)
    ).scalar_one()
    auth.status = status
    return status


@bp.get("/healthz")
def healthz():
    """Liveness and database reachability."""
    ok = ping()
    return jsonify(status="ok" if ok else "degraded", db="ok" if ok else "unreachable"), (
        200 if ok else 503
    )


@bp.get("/api/v1/participants/<pid>/timeline")
def timeline(pid: str):
    """The participant's whole timeline plus which trials are already stored (for resume)."""
    auth = authorize(pid)
    loaded = experiments.get(auth.slug)
    if loaded is None:
        api_abort(410, "experiment_not_served", f"experiment {auth.slug!r} is not served here")
    participant = db.session.get(Participant, auth.id)
    assert participant is not None  # authorize() found it
    acknowledged = db.session.execute(
        sa.select(Trial.trial_index).where(Trial.participant_id == auth.id).order_by(Trial.trial_index)
    ).scalars().all()
    done = set(acknowledged)
    next_index = next((i for i in range(auth.n_trials) if i not in done), auth.n_trials)
    spec = loaded.spec
    presentation = spec.presentation_for(participant.condition)
    base = url_for("participant.stimulus_file", slug=auth.slug, filename="")
    blocks = {b.name: b for b in spec.blocks}
    trials = []
    for entry in auth.trials:
        public = {k: v for k, v in entry.items() if k not in ("stimulus_id", "stimulus_ids")}
        block = blocks.get(entry["block"].removesuffix("-practice"))
        public["prompt"] = block.prompt if block else ""
        trials.append(public)
    return jsonify(
        participant=pid,
        status=participant.status,
        condition=participant.condition,
        categories=participant.timeline["categories"],
        presentation=presentation.model_dump(mode="json"),
        stimulus_base=base,
        trials=trials,
        acknowledged=acknowledged,
        next_index=next_index,
        n_trials=auth.n_trials,
        consent_html=loaded.markdown_html("consent"),
        instructions_html=loaded.markdown_html("instructions"),
        debrief=[q.model_dump(mode="json") for q in spec.debrief],
        title=spec.title,
    )


@bp.post("/api/v1/participants/<pid>/consent")
def consent(pid: str):
    """Record consent (``{"agree": true}``) or its refusal (the participant is then 'returned')."""
    auth = authorize(pid)
    body = _json_body()
    if not isinstance(body, dict) or not isinstance(body.get("agree"), bool):
        api_abort(400, "invalid_body", "send {\"agree\": true} or {\"agree\": false}")
    participant = db.session.get(Participant, auth.id)
    assert participant is not None  # authorize() found it
    if body["agree"]:
        if participant.status == "allocated":
            participant.status, participant.consented_at = "consented", utcnow()
    elif participant.status in PRE_TRIAL_STATUSES:
        participant.status = "returned"
    db.session.commit()
    auth.status = participant.status
    return jsonify(status=participant.status)


@functools.cache
def _insert_statement(dialect: str) -> sa.Insert:
    """INSERT ... ON CONFLICT (participant_id, trial_index) DO NOTHING RETURNING id, built once."""
    module = postgresql if dialect == "postgresql" else sqlite
    table = Trial.__table__
    stmt = module.insert(table).on_conflict_do_nothing(index_elements=["participant_id", "trial_index"])
    return stmt.returning(table.c.id)


def _insert_trial(values: dict[str, Any], status_update: bool) -> bool:
    """Insert unless (participant, trial_index) exists; True when a new row was written.

    The usual trial is one autocommitted statement (one round trip to PostgreSQL); the first trial
    also moves the participant to 'started', in the same transaction."""
    engine = db.engine
    stmt = _insert_statement(engine.dialect.name)
    if not status_update:
        with autocommit_engine().connect() as conn, write_lock():
            return conn.execute(stmt, values).first() is not None
    with write_lock(), engine.begin() as conn:
        created = conn.execute(stmt, values).first() is not None
        if created:
            conn.execute(
                sa.update(Participant.__table__)
                .where(Participant.id == values["participant_id"],
                       Participant.status.in_(PRE_TRIAL_STATUSES))
                .values(status="started", started_at=utcnow())
            )
    return created


@bp.post("/api/v1/participants/<pid>/trials")
def post_trial(pid: str):
    """Store one trial; 201 when new, 200 when this index was already stored (idempotent)."""
    auth = authorize(pid)
    raw = _raw_body()
    try:
        trial = TrialIn.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            api_abort(400, "malformed_json", exc.errors()[0]["msg"])
        api_abort(422, "invalid_trial", _validation_detail(exc))
    if trial.trial_index >= auth.n_trials:
        api_abort(422, "trial_index_out_of_range",
                  f"trial_index must be below {auth.n_trials} for this participant")
    entry = auth.trials[trial.trial_index]
    if trial.trial_type != entry["type"]:
        api_abort(422, "wrong_trial_type",
                  f"trial {trial.trial_index} is a {entry['type']!r} trial, not {trial.trial_type!r}")
    problem = validate_response(trial.trial_type, trial.response, auth.labels)
    if problem:
        api_abort(422, "invalid_response", problem)
    if auth.status == "allocated" and _current_status(auth) == "allocated":
        api_abort(409, "no_consent", "the participant has not consented yet")
    created = _insert_trial(
        {
            "participant_id": auth.id,
            "trial_index": trial.trial_index,
            "trial_type": trial.trial_type,
            "block": entry.get("block"),
            "stimulus_id": entry.get("stimulus_id"),
            "stimuli": entry.get("stimuli"),
            "response": trial.response,
            "rt_ms": trial.rt_ms,
            "first_rt_ms": trial.first_rt_ms,
            "presented_ms": trial.presented_ms,
            "frames": trial.frames,
            "is_repeat": bool(entry.get("is_repeat")),
            "repeat_of": entry.get("repeat_of"),
            "client_time": trial.client_time,
            "server_time": utcnow(),
        },
        status_update=auth.status in PRE_TRIAL_STATUSES,
    )
    if created:
        auth.status = "started"
    ack = b'{"trial_index":%d}\n' % trial.trial_index
    return current_app.response_class(ack, status=201 if created else 200,
                                      mimetype="application/json")


@bp.post("/api/v1/participants/<pid>/events")
def post_event(pid: str):
    """Log a browser event (blur, focus, fullscreen exit, resize, error, environment)."""
    auth = authorize(pid)
    try:
        event = EventIn.model_validate(_json_body())
    except ValidationError as exc:
        api_abort(422, "invalid_event", _validation_detail(exc))
    value = event.value if isinstance(event.value, dict) or event.value is None else {"value": event.value}
    if len(json.dumps(value)) > 4000:
        api_abort(413, "event_too_large", "an event value must stay under 4000 characters")
    db.session.add(Event(participant_id=auth.id, type=event.type, value=value,
                         client_time=event.client_time, server_time=utcnow()))
    if event.type == "environment" and isinstance(value, dict):
        participant = db.session.get(Participant, auth.id)
        assert participant is not None  # authorize() found it
        participant.screen = {k: value[k] for k in list(value)[:20]}
        refresh = value.get("refresh_hz")
        if isinstance(refresh, (int, float)) and 1 <= refresh <= 1000:
            participant.refresh_hz = float(refresh)
    db.session.commit()
    return jsonify(stored=True), 201


def completion_target(participant: Participant) -> dict[str, Any]:
    """Where a finished participant goes: Prolific's completion URL, MTurk's form, or our page."""
    spec = participant.experiment.spec
    if participant.platform == "prolific" and spec.get("completion", {}).get("prolific_code"):
        code = participant.completion_code
        return {"kind": "redirect",
                "url": f"https://app.prolific.com/submissions/complete?cc={code}"}
    if participant.platform == "mturk":
        sandbox = spec.get("completion", {}).get("mturk_sandbox", True)
        host = participant.turk_submit_to or (
            "https://workersandbox.mturk.com" if sandbox else "https://www.mturk.com"
        )
        return {"kind": "mturk_form", "action": host.rstrip("/") + "/mturk/externalSubmit",
                "fields": {"assignmentId": participant.assignment_id, "completion": "done"}}
    return {"kind": "redirect", "url": url_for("participant.done", pid=participant.public_id)}


@bp.post("/api/v1/participants/<pid>/complete")
def complete(pid: str):
    """Mark the participant completed once every trial is stored; returns where to go next."""
    auth = authorize(pid)
    participant = db.session.get(Participant, auth.id)
    assert participant is not None  # authorize() found it
    finished = ("started", "completed", "submitted", "approved")
    empty_timeline = participant.status in PRE_TRIAL_STATUSES and auth.n_trials == 0
    if participant.status not in finished and not empty_timeline:
        api_abort(409, "not_started", f"participant status is {participant.status!r}")
    stored = set(db.session.execute(
        sa.select(Trial.trial_index).where(Trial.participant_id == auth.id)
    ).scalars())
    missing = [i for i in range(auth.n_trials) if i not in stored]
    if missing:
        api_abort(409, "trials_missing", {"missing": missing[:100], "n_missing": len(missing)})
    if participant.status in ("started", *PRE_TRIAL_STATUSES):
        spec = participant.experiment.spec
        participant.status, participant.completed_at = "completed", utcnow()
        participant.completion_code = (
            spec.get("completion", {}).get("prolific_code") if participant.platform == "prolific"
            else None
        ) or participant.public_id[:8].upper()
        db.session.commit()
    return jsonify(status=participant.status, next=completion_target(participant))
