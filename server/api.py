"""The participant JSON API under /api/v1 (Bearer-token auth): timeline, consent, trials, events,
completion; every error, unknown URLs under the prefix included, answers JSON."""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa
from flask import Blueprint, current_app, jsonify, request, url_for
from pydantic import ValidationError
from sqlalchemy.dialects import postgresql, sqlite
from werkzeug.exceptions import MethodNotAllowed, NotFound

from humanlike.server import experiments
from humanlike.server.database import autocommit_engine, write_lock
from humanlike.server.errors import api_abort, json_errors
from humanlike.server.extensions import csrf, db
from humanlike.server.lifecycle import (
    COMPLETE,
    CONSENT,
    DECLINE,
    FILLED,
    PRE_TRIAL,
    START,
    ParticipantStatus,
)
from humanlike.server.models import Event, Participant, Trial, utcnow
from humanlike.server.payloads import EventIn, TrialIn
from humanlike.server.platforms import completion_code, completion_target
from humanlike.server.timeline import design_of, estimated_minutes
from humanlike.server.tokens import token_matches
from humanlike.server.trial_types import TRIAL_TYPES

bp = Blueprint("api", __name__, url_prefix="/api/v1")
csrf.exempt(bp)
json_errors(bp)


@dataclass
class _Auth:
    """What the API needs to know about a participant on every request (immutable after allocation)."""

    id: int
    public_id: str
    token_hash: str
    slug: str
    n_trials: int
    designs: list[dict[str, Any]]
    stimulus_ids: list[int | None]
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

    def pop(self, key: str) -> None:
        with self.lock:
            self.items.pop(key, None)


_cache = _AuthCache()


def forget_auth(public_id: str) -> None:
    """Drop a participant's cached data (its token was reissued on resume)."""
    _cache.pop(public_id)


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
        designs=[design_of(entry) for entry in timeline["trials"]],
        stimulus_ids=[entry.get("stimulus_id") for entry in timeline["trials"]],
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
    if not token_matches(auth.token_hash, header[7:].strip()):
        auth = _load_auth(public_id)  # another process may have reissued the token (resume)
        _cache.put(public_id, auth)
    if not token_matches(auth.token_hash, header[7:].strip()):
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


@bp.get("/participants/<pid>/timeline")
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
    for design in auth.designs:
        block = blocks.get(design["block"])
        trials.append(dict(design, prompt=block.prompt if block else ""))
    block_info = {
        b.name: {"intro": b.intro, "trial_type": b.trial_type,
                 "practice_feedback": b.practice_feedback}
        for b in spec.blocks
    }
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
        blocks=block_info,
        break_every=spec.break_every,
        fullscreen=spec.fullscreen,
        estimated_minutes=estimated_minutes(auth.designs, presentation, spec.break_every),
    )


@bp.post("/participants/<pid>/consent")
def consent(pid: str):
    """Record consent (``{"agree": true}``) or its refusal (the participant has then returned the study)."""
    auth = authorize(pid)
    body = _json_body()
    if not isinstance(body, dict) or not isinstance(body.get("agree"), bool):
        api_abort(400, "invalid_body", "send {\"agree\": true} or {\"agree\": false}")
    participant = db.session.get(Participant, auth.id)
    assert participant is not None  # authorize() found it
    (CONSENT if body["agree"] else DECLINE).apply(participant, utcnow())
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
    also moves the participant along ``START``, in the same transaction."""
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
                       Participant.status.in_(START.sources))
                .values(**START.values(utcnow()))
            )
    return created


@bp.post("/participants/<pid>/trials")
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
    design = auth.designs[trial.trial_index]  # the design comes from the timeline, never the browser
    if trial.trial_type != design["type"]:
        api_abort(422, "wrong_trial_type",
                  f"trial {trial.trial_index} is a {design['type']!r} trial, not {trial.trial_type!r}")
    problem = TRIAL_TYPES[trial.trial_type].validate(trial.response, auth.labels)
    if problem:
        api_abort(422, "invalid_response", problem)
    allocated = ParticipantStatus.ALLOCATED
    if auth.status == allocated and _current_status(auth) == allocated:
        api_abort(409, "no_consent", "the participant has not consented yet")
    created = _insert_trial(
        {
            "participant_id": auth.id,
            "trial_index": trial.trial_index,
            "trial_type": trial.trial_type,
            "design": design,
            "block": design.get("block"),
            "stimulus_id": auth.stimulus_ids[trial.trial_index],
            "stimuli": design.get("stimuli"),
            "response": trial.response,
            "rt_ms": trial.rt_ms,
            "first_rt_ms": trial.first_rt_ms,
            "presented_ms": trial.presented_ms,
            "frames": trial.frames,
            "is_repeat": bool(design.get("is_repeat")),
            "repeat_of": design.get("repeat_of"),
            "client_time": trial.client_time,
            "server_time": utcnow(),
        },
        status_update=START.allows(auth.status),
    )
    if created:
        auth.status = START.target
    ack = b'{"trial_index":%d}\n' % trial.trial_index
    return current_app.response_class(ack, status=201 if created else 200,
                                      mimetype="application/json")


@bp.post("/participants/<pid>/events")
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


@bp.post("/participants/<pid>/complete")
def complete(pid: str):
    """Mark the participant completed once every trial is stored; returns where to go next."""
    auth = authorize(pid)
    participant = db.session.get(Participant, auth.id)
    assert participant is not None  # authorize() found it
    empty_timeline = participant.status in PRE_TRIAL and auth.n_trials == 0
    if participant.status not in FILLED and not empty_timeline:
        api_abort(409, "not_started", f"participant status is {participant.status!r}")
    stored = set(db.session.execute(
        sa.select(Trial.trial_index).where(Trial.participant_id == auth.id)
    ).scalars())
    missing = [i for i in range(auth.n_trials) if i not in stored]
    if missing:
        api_abort(409, "trials_missing", {"missing": missing[:100], "n_missing": len(missing)})
    if COMPLETE.apply(participant, utcnow()):
        participant.completion_code = completion_code(participant)
        db.session.commit()
    return jsonify(status=participant.status, next=completion_target(participant))


@bp.route("/<path:_unknown>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def unknown(_unknown: str):
    """Any other URL under the prefix: 405 when the path exists for another method, else 404."""
    adapter = current_app.url_map.bind_to_environ(request.environ)
    allowed = []
    for method in ("GET", "POST"):
        try:
            endpoint, _ = adapter.match(method=method)
        except (NotFound, MethodNotAllowed):
            continue
        if endpoint != "api.unknown":
            allowed.append(method)
    if allowed:
        raise MethodNotAllowed(valid_methods=allowed)
    raise NotFound()
