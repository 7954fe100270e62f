"""The participant JSON API under /api/v1 (Bearer-token auth): timeline, consent, trials, events,
completion; every error, unknown URLs under the prefix included, answers JSON."""

from __future__ import annotations

import json
from typing import Any, cast

import sqlalchemy as sa
from flask import Blueprint, current_app, jsonify, request, url_for
from pydantic import ValidationError
from werkzeug.exceptions import MethodNotAllowed, NotFound, RequestEntityTooLarge

from humanlike.server.errors import api_abort, json_errors
from humanlike.server.extensions import csrf, db
from humanlike.server.lifecycle import (
    COMPLETE,
    COMPLETE_GATE,
    CONSENT,
    DECLINE,
    EVENT_GATE,
    PRE_TRIAL,
    START,
    TRIAL_GATE,
    Gate,
    ParticipantStatus,
    resume,
)
from humanlike.server.participants import (
    auth_cache,
    display,
    exits,
    resume_policy,
    trial_store,
)
from humanlike.server.participants.auth_cache import ParticipantAuth
from humanlike.server.participants.payloads import (
    CompleteIn,
    ConsentIn,
    EventIn,
    JSONPolicyError,
    TrialIn,
    parse_json,
)
from humanlike.server.platforms import Exit, completion_target, declared_exit
from humanlike.server.sources import sona
from humanlike.server.study import experiments
from humanlike.server.study.settings import DisplaySettings
from humanlike.server.study.timeline import estimated_minutes
from humanlike.server.tables.core import Event, Participant, utcnow
from humanlike.server.trial_types.registry import TRIAL_TYPES
from humanlike.server.web import outcomes
from humanlike.server.web.openapi import openapi_document

bp = Blueprint("api", __name__, url_prefix="/api/v1")
csrf.exempt(bp)
json_errors(bp)


def _bearer_token() -> str:
    """The token of an ``Authorization: Bearer <token>`` header (scheme matched case-insensitively)."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or len(token) < 9:
        api_abort(401, "missing_token", "send 'Authorization: Bearer <token>'")
    return token


def authorize(public_id: str) -> ParticipantAuth:
    """The participant named in the URL, provided the Bearer token is theirs: 401 without a token,
    403 ``forbidden`` alike whether the id is unknown or belongs to someone else."""
    auth = auth_cache.opened_by(public_id, _bearer_token())
    if auth is None:
        api_abort(403, "forbidden", "this token does not open this participant")
    return auth


def _gone_or_revoked(auth: ParticipantAuth) -> None:
    """403 ``forbidden`` for a cached participant whose row is gone (deleted) or whose token was
    reissued since this process cached it (a resume handled by another process)."""
    auth_cache.forget(auth.public_id)
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


def _participant(auth: ParticipantAuth) -> Participant:
    """The participant's row, resumed (and committed) if it had timed out: it has come back.
    403 when the row is gone or holds another token than the cached one (see ``_gone_or_revoked``)."""
    participant = db.session.get(Participant, auth.id)
    if participant is None or participant.token_hash != auth.token_hash:
        _gone_or_revoked(auth)  # changed by another process since this one cached it
    assert participant is not None
    if resume(participant, utcnow()):
        db.session.commit()
    auth.status, auth.attempt = participant.status, participant.attempt
    return participant


def _current_status(auth: ParticipantAuth) -> str:
    """The participant's status as stored now (403 when deleted or its token reissued since);
    ``auth.attempt`` is refreshed with it (another process may have restarted a block)."""
    row = db.session.execute(
        sa.select(Participant.status, Participant.token_hash, Participant.attempt)
        .where(Participant.id == auth.id)
    ).one_or_none()
    if row is None or row.token_hash != auth.token_hash:
        _gone_or_revoked(auth)
    assert row is not None
    auth.status, auth.attempt = row.status, row.attempt
    return str(row.status)


@bp.get("/participants/<pid>/timeline")
def timeline(pid: str):
    """The participant's whole timeline plus which trials are already stored (for resume)."""
    auth = authorize(pid)
    participant = _participant(auth)
    loaded = experiments.for_participant(participant)  # the spec version it was allocated under
    if loaded is None:
        api_abort(410, "experiment_not_served", f"experiment {auth.slug!r} is not served here")
    acknowledged = trial_store.stored_indices(auth.id)
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
        attempt=auth.attempt,
        restarted_block=resume_policy.restarted_block(participant),
        n_trials=auth.n_trials,
        consent_html=loaded.markdown_html("consent"),
        instructions_html=loaded.markdown_html("instructions"),
        debrief=[q.model_dump(mode="json") for q in spec.debrief],
        title=spec.title,
        blocks=block_info,
        break_every=spec.break_every,
        fullscreen=spec.fullscreen,
        display=(spec.display or DisplaySettings()).model_dump(mode="json"),
        calibration=display.stored_calibration(auth.id) if spec.display and spec.display.calibration
        else None,
        estimated_minutes=estimated_minutes(auth.designs, presentation, spec.break_every),
    ), {"Cache-Control": "no-store"}  # a token-bound answer: no cache, shared or local, keeps it


@bp.post("/participants/<pid>/consent")
def consent(pid: str):
    """Record consent (``{"agree": true}``) or its refusal (the participant has then returned the study)."""
    auth = authorize(pid)
    try:
        answer = ConsentIn.model_validate(_json_body())
    except ValidationError:
        api_abort(400, "invalid_body", "send {\"agree\": true} or {\"agree\": false}")
    participant = _participant(auth)
    target = None
    if answer.agree:
        CONSENT.apply(participant, utcnow())
        db.session.commit()
    elif DECLINE.allows(participant.status) or participant.outcome == Exit.NO_CONSENT:
        target = outcomes.leave(participant, Exit.NO_CONSENT)  # the platform's no-consent code
    auth.status = participant.status
    return jsonify(status=participant.status, **({"next": target} if target else {}))


def _check_replay(values: dict[str, Any]) -> None:
    """409 unless the trial index holds this very body (``trial_store.check_replay``)."""
    try:
        trial_store.check_replay(values)
    except trial_store.ReplayRefused as exc:
        api_abort(409, exc.error, exc.detail)


def _older_attempt(auth: ParticipantAuth, trial: TrialIn, values: dict[str, Any]):
    """A trial answered before its block restarted (resume policy ``restart_block``), sent from
    the browser's queue afterwards: 200 when it is an identical replay of a trial kept through the
    restart (its acknowledgement was lost); else kept aside (``resume_policy.keep_stale``) and
    refused with 409, so the repeated block stores the new answer under its index."""
    if trial.attempt > auth.attempt:
        api_abort(422, "attempt_unknown",
                  f"attempt {trial.attempt} was never handed out (this participant is on "
                  f"attempt {auth.attempt})")
    try:
        trial_store.check_replay(values)
    except trial_store.ReplayRefused:
        resume_policy.keep_stale(auth.id, trial.model_dump(mode="json"), auth.attempt)
        api_abort(409, "trial_from_restarted_block", {
            "trial_index": trial.trial_index, "attempt": trial.attempt,
            "current_attempt": auth.attempt,
            "message": "this trial was answered before its block restarted: it is kept aside "
                       "(exported with the events) and the block is asked again"})
    return _acknowledge(trial.trial_index, created=False)


def _acknowledge(trial_index: int, created: bool):
    """``{"trial_index": N}``: 201 when the trial was stored now, 200 when it was already."""
    ack = b'{"trial_index":%d}\n' % trial_index
    return current_app.response_class(ack, status=201 if created else 200,
                                      mimetype="application/json")


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
    values = trial_store.trial_values(trial, design, auth.id,
                                      auth.stimulus_ids[trial.trial_index], auth.token_hash)
    if trial.attempt != auth.attempt:
        _current_status(auth)  # refreshes auth.attempt: another process may have restarted a block
        if trial.attempt != auth.attempt:
            return _older_attempt(auth, trial, values)
    fast = auth.status in trial_store.FAST_STATUSES
    created = trial_store.insert(values, status_update=not fast)
    if not created:  # a replay, or a status that takes no trials (read from the database)
        status = _current_status(auth)
        if trial.attempt != auth.attempt:  # the block restarted since this process last looked
            return _older_attempt(auth, trial, values)
        if status == ParticipantStatus.TIMED_OUT:  # back after a time-out: store, and resume
            fast = False
            created = trial_store.insert(values, status_update=True)
            if not created:
                _check_replay(values)
                _participant(auth)  # a replay: resume all the same
        else:
            _require(TRIAL_GATE, status)
            _check_replay(values)  # only an identical replay is acknowledged again
    if created and not fast:
        auth.status = START.target
    return _acknowledge(trial.trial_index, created)


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


@bp.post("/participants/<pid>/display")
def post_display(pid: str):
    """Store what the browser measured of the display before the first trial: refresh rate,
    calibration, rendered size, suitability (``server/participants/display.py``); 201, one row per measurement."""
    auth = authorize(pid)
    participant = _participant(auth)
    _require(EVENT_GATE, participant.status)
    try:
        record = display.DisplayIn.model_validate(_json_body())
    except ValidationError as exc:
        api_abort(422, "invalid_display", _validation_detail(exc))
    display.store(auth.id, record)
    participant.refresh_hz = record.refresh_hz
    db.session.commit()
    target = None  # a declared exit ends the study here (before any trial) on the platform
    if not record.suitable and participant.status in PRE_TRIAL and declared_exit(
            participant.experiment.spec, Exit.DISPLAY_UNSUITABLE) is not None:
        target = outcomes.leave(participant, Exit.DISPLAY_UNSUITABLE)
    return jsonify(stored=True, **({"next": target} if target else {})), 201


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
    stored = set(trial_store.stored_indices(auth.id))
    missing = [i for i in range(auth.n_trials) if i not in stored]
    if missing:
        api_abort(409, "trials_missing", {"missing": missing[:100], "n_missing": len(missing)})
    if COMPLETE.apply(participant, utcnow()):
        exits.record(participant, exits.finishing_outcome(participant))  # with its code
        sona.record_pending(participant)  # a SONA server-side grant, committed with the completion
        db.session.commit()
    sona.send_for(participant)
    return jsonify(status=participant.status, next=completion_target(participant))


@bp.get("/openapi.json")
def openapi():
    """The OpenAPI 3.1 document of this API (no token needed)."""
    return jsonify(openapi_document())


def _route_methods() -> list[str]:
    """The methods the URL's own route answers (the catch-all below left out)."""
    adapter = current_app.url_map.bind_to_environ(request.environ)
    allowed = []
    for method in ("GET", "POST"):
        try:
            endpoint, _ = adapter.match(method=method)
        except (NotFound, MethodNotAllowed):
            continue
        if endpoint != "api.unknown":
            allowed.append(method)
    return allowed


@bp.after_request
def _allow_own_methods(response):
    """OPTIONS lists the route's own methods: Flask's answer adds the catch-all's (schemathesis
    ST205); a URL no route answers is a 404."""
    if request.method != "OPTIONS" or "Allow" not in response.headers:
        return response
    methods = _route_methods()
    if not methods:
        missing = jsonify(error="not_found", detail=NotFound.description)
        missing.status_code = 404
        return missing
    response.headers["Allow"] = ", ".join([*methods, *(["HEAD"] if "GET" in methods else []),
                                           "OPTIONS"])
    return response


@bp.route("/<path:_unknown>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def unknown(_unknown: str):
    """Any other URL under the prefix: 405 when the path exists for another method, else 404."""
    allowed = _route_methods()
    if allowed:
        raise MethodNotAllowed(valid_methods=allowed)
    raise NotFound()
