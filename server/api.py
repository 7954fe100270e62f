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
from werkzeug.exceptions import MethodNotAllowed, NotFound, RequestEntityTooLarge

from humanlike.server import experiments
from humanlike.server.database import autocommit_engine, write_lock
from humanlike.server.errors import api_abort, json_errors
from humanlike.server.extensions import csrf, db
from humanlike.server.lifecycle import (
    COMPLETE,
    COMPLETE_GATE,
    CONSENT,
    DECLINE,
    EVENT_GATE,
    PRE_TRIAL,
    RESUME_STARTED,
    START,
    TRIAL_GATE,
    TRIAL_STORABLE,
    Gate,
    ParticipantStatus,
    resume,
)
from humanlike.server.models import Event, Participant, Trial, utcnow
from humanlike.server.openapi import openapi_document
from humanlike.server.payloads import (
    CompleteIn,
    ConsentIn,
    EventIn,
    JSONPolicyError,
    TrialIn,
    parse_json,
)
from humanlike.server.platforms import completion_code, completion_target
from humanlike.server.timeline import design_of, estimated_minutes
from humanlike.server.tokens import hash_token, token_matches
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


def _load_auth(public_id: str) -> _Auth | None:
    row = db.session.execute(
        sa.select(Participant).where(Participant.public_id == public_id)
    ).scalar_one_or_none()
    if row is None:
        return None
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


_NO_ONE = hash_token("no participant has this token")


def _bearer_token() -> str:
    """The token of an ``Authorization: Bearer <token>`` header (scheme matched case-insensitively)."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or len(token) < 9:
        api_abort(401, "missing_token", "send 'Authorization: Bearer <token>'")
    return token


def authorize(public_id: str) -> _Auth:
    """The participant named in the URL, provided the Bearer token is theirs: 401 without a token,
    403 ``forbidden`` alike whether the id is unknown or belongs to someone else."""
    token = _bearer_token()
    auth = _cache.get(public_id)
    if auth is None:
        auth = _load_auth(public_id)
        if auth is not None:
            _cache.put(public_id, auth)
    if auth is not None and not token_matches(auth.token_hash, token):
        fresh = _load_auth(public_id)  # another process may have reissued the token (resume)
        if fresh is not None:
            _cache.put(public_id, fresh)
            auth = fresh
    if not token_matches(auth.token_hash if auth else _NO_ONE, token) or auth is None:
        api_abort(403, "forbidden", "this token does not open this participant")
    return auth


def _gone_or_revoked(auth: _Auth) -> None:
    """403 ``forbidden`` for a cached participant whose row is gone (deleted) or whose token was
    reissued since this process cached it (a resume handled by another process)."""
    _cache.pop(auth.public_id)
    api_abort(403, "forbidden", "this token does not open this participant")


def _raw_body() -> bytes:
    """The request body, refused with 413 when over the limit (chunked bodies included)."""
    limit = cast(int, request.max_content_length)  # MAX_CONTENT_LENGTH is always set (config.py)
    if request.content_length is not None and request.content_length > limit:
        api_abort(413, "body_too_large", f"at most {limit} bytes")
    chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
    if chunked and request.content_length is None and not request.environ.get("wsgi.input_terminated"):
        api_abort(411, "length_required", "this server needs a Content-Length (or a chunk-decoding front end)")
    try:
        raw = request.get_data(cache=False)
        cut = request.content_length is None and len(raw) >= limit  # a stream cut at the limit
    except RequestEntityTooLarge:
        cut = True
    if cut:
        api_abort(413, "body_too_large", f"at most {limit} bytes")
    return raw


def _json_body(allow_empty: bool = False) -> Any:
    """The body as JSON under the API's policy (``payloads.parse_json``): 400 otherwise."""
    raw = _raw_body()
    if allow_empty and not raw.strip():
        return {}
    try:
        return parse_json(raw)
    except JSONPolicyError as exc:
        api_abort(400, exc.error, exc.detail)
    except ValueError as exc:  # UnicodeDecodeError included
        api_abort(400, "malformed_json", str(exc))


def _validation_detail(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
    ]


def _require(gate: Gate, status: str) -> None:
    """Refuse with 409 (naming the current status) unless ``gate`` allows ``status``."""
    if not gate.allows(status):
        error, detail = gate.refusal(status)
        api_abort(409, error, detail)


def _participant(auth: _Auth) -> Participant:
    """The participant's row, resumed (and committed) if it had timed out: it has come back.
    403 when the row is gone or holds another token than the cached one (see ``_gone_or_revoked``)."""
    participant = db.session.get(Participant, auth.id)
    if participant is None or participant.token_hash != auth.token_hash:
        _gone_or_revoked(auth)  # changed by another process since this one cached it
    assert participant is not None
    if resume(participant, utcnow()):
        db.session.commit()
    auth.status = participant.status
    return participant


def _current_status(auth: _Auth) -> str:
    """The participant's status as stored now (403 when deleted or its token reissued since)."""
    row = db.session.execute(
        sa.select(Participant.status, Participant.token_hash).where(Participant.id == auth.id)
    ).one_or_none()
    if row is None or row.token_hash != auth.token_hash:
        _gone_or_revoked(auth)
    assert row is not None
    auth.status = row.status
    return str(row.status)


@bp.get("/participants/<pid>/timeline")
def timeline(pid: str):
    """The participant's whole timeline plus which trials are already stored (for resume)."""
    auth = authorize(pid)
    participant = _participant(auth)
    loaded = experiments.for_participant(participant)  # the spec version it was allocated under
    if loaded is None:
        api_abort(410, "experiment_not_served", f"experiment {auth.slug!r} is not served here")
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
    try:
        answer = ConsentIn.model_validate(_json_body())
    except ValidationError:
        api_abort(400, "invalid_body", "send {\"agree\": true} or {\"agree\": false}")
    participant = _participant(auth)
    (CONSENT if answer.agree else DECLINE).apply(participant, utcnow())
    db.session.commit()
    auth.status = participant.status
    return jsonify(status=participant.status)


_TRIAL_COLUMNS = ("participant_id", "trial_index", "trial_type", "design", "block", "stimulus_id",
                  "stimuli", "response", "rt_ms", "first_rt_ms", "presented_ms", "frames",
                  "is_repeat", "repeat_of", "client_time", "server_time")


@functools.cache
def _insert_statement(dialect: str, statuses: frozenset[str]) -> sa.Insert:
    """INSERT ... SELECT <values> WHERE <the participant's status is in ``statuses``>
    ON CONFLICT (participant_id, trial_index) DO NOTHING RETURNING id, built once.

    The status and token checks sit in the statement itself, so a status changed by another
    process (a decline, a time-out), a token it reissued (a resume) or a participant it deleted is
    seen even when this process's cached copy is stale."""
    module = postgresql if dialect == "postgresql" else sqlite
    table = Trial.__table__
    columns = [table.c[name] for name in _TRIAL_COLUMNS]
    params: dict[str, Any] = {c.name: sa.bindparam(c.name, type_=c.type) for c in columns}
    # PostgreSQL types a SELECT list's parameters only when told; SQLite must not cast (affinity)
    values = [sa.cast(params[c.name], c.type) if dialect == "postgresql" else params[c.name]
              for c in columns]
    people = Participant.__table__
    storable = sa.exists().where(
        people.c.id == params["participant_id"],
        people.c.status.in_(sorted(statuses)),
        people.c.token_hash == sa.bindparam("token_hash", type_=people.c.token_hash.type),
    )
    stmt = module.insert(table).from_select(columns, sa.select(*values).where(storable))
    stmt = stmt.on_conflict_do_nothing(index_elements=["participant_id", "trial_index"])
    return stmt.returning(table.c.id)


_SENT = ("trial_type", "response", "rt_ms", "first_rt_ms", "presented_ms", "frames", "client_time")


def _check_replay(values: dict[str, Any]) -> None:
    """A trial index that was not newly stored must be a replay of the body already stored:
    409 ``trial_conflict`` when the stored body differs (the first version stays), and 409
    ``trial_not_stored`` when nothing is stored under it (never acknowledge what is not stored)."""
    table = Trial.__table__
    with autocommit_engine().connect() as conn:
        stored = conn.execute(
            sa.select(*(table.c[name] for name in _SENT))
            .where(table.c.participant_id == values["participant_id"],
                   table.c.trial_index == values["trial_index"])
        ).one_or_none()
    if stored is None:
        api_abort(409, "trial_not_stored", {
            "trial_index": values["trial_index"],
            "message": "this trial could not be stored in the participant's current state"})
    differ = [name for name in sorted(_SENT) if stored._mapping[name] != values[name]]
    if differ:
        api_abort(409, "trial_conflict", {
            "trial_index": values["trial_index"], "fields": differ,
            "message": "a different trial is already stored under this index; the first one stays"})


_FAST_STATUSES = frozenset(s.value for s in TRIAL_GATE.allowed - PRE_TRIAL)
_STORABLE_STATUSES = frozenset(s.value for s in TRIAL_STORABLE)


def _insert_trial(values: dict[str, Any], status_update: bool) -> bool:
    """Insert unless (participant, trial_index) exists, the participant's status forbids it or its
    token is no longer ``values["token_hash"]``; True when a new row was written.

    The usual trial is one autocommitted statement (one round trip to PostgreSQL), taken only by
    a started (or finished) participant; the first trial, or the first after a time-out, also
    moves the participant along ``START`` (or back to ``started``) in the same transaction."""
    engine = db.engine
    if not status_update:
        stmt = _insert_statement(engine.dialect.name, _FAST_STATUSES)
        with autocommit_engine().connect() as conn, write_lock():
            return conn.execute(stmt, values).first() is not None
    stmt = _insert_statement(engine.dialect.name, _STORABLE_STATUSES)
    with write_lock(), engine.begin() as conn:
        created = conn.execute(stmt, values).first() is not None
        if created:
            now, people = utcnow(), Participant.__table__
            conn.execute(
                sa.update(people)
                .where(people.c.id == values["participant_id"],
                       people.c.status.in_(START.sources))
                .values(**START.values(now))
            )
            conn.execute(  # a timed-out participant who sends a trial has come back
                sa.update(people)
                .where(people.c.id == values["participant_id"],
                       people.c.status.in_(RESUME_STARTED.sources))
                .values(**RESUME_STARTED.values(now),
                        started_at=sa.func.coalesce(people.c.started_at, now))
            )
    return created


@bp.post("/participants/<pid>/trials")
def post_trial(pid: str):
    """Store one trial; 201 when new, 200 when this index was already stored (idempotent)."""
    auth = authorize(pid)
    try:
        trial = TrialIn.model_validate(_json_body())
    except ValidationError as exc:
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
    values: dict[str, Any] = {
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
        "token_hash": auth.token_hash,  # checked in the INSERT, not stored in the trial
    }
    fast = auth.status in _FAST_STATUSES
    created = _insert_trial(values, status_update=not fast)
    if not created:  # a replay, or a status that takes no trials (read from the database)
        status = _current_status(auth)
        if status == ParticipantStatus.TIMED_OUT:  # back after a time-out: store, and resume
            fast = False
            created = _insert_trial(values, status_update=True)
            if not created:
                _check_replay(values)
                _participant(auth)  # a replay: resume all the same
        else:
            _require(TRIAL_GATE, status)
            _check_replay(values)  # only an identical replay is acknowledged again
    if created and not fast:
        auth.status = START.target
    ack = b'{"trial_index":%d}\n' % trial.trial_index
    return current_app.response_class(ack, status=201 if created else 200,
                                      mimetype="application/json")


@bp.post("/participants/<pid>/events")
def post_event(pid: str):
    """Log a browser event (blur, focus, fullscreen exit, resize, error, environment)."""
    auth = authorize(pid)
    participant = _participant(auth)
    _require(EVENT_GATE, participant.status)
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
    try:
        CompleteIn.model_validate(_json_body(allow_empty=True))
    except ValidationError as exc:
        api_abort(422, "invalid_body", _validation_detail(exc))
    participant = _participant(auth)
    empty_timeline = participant.status in PRE_TRIAL and auth.n_trials == 0
    if not empty_timeline:
        _require(COMPLETE_GATE, participant.status)
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


@bp.get("/openapi.json")
def openapi():
    """The OpenAPI 3.1 document of this API (no token needed)."""
    return jsonify(openapi_document())


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
