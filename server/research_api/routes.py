"""The researcher API's routes, read top to bottom as the requests they answer: the document,
experiments (list, one, status), participants (a filtered page with QC), actions (approve,
reject, exclude, bonus: ``participants.actions``, once per ``Idempotency-Key``), the export zip
and the panel's result."""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from flask import Blueprint, Response, current_app, g, jsonify, request, stream_with_context
from pydantic import BaseModel, ValidationError

from humanlike.server import audit
from humanlike.server.database import as_utc
from humanlike.server.errors import api_abort, json_errors
from humanlike.server.export.writer import write_export
from humanlike.server.export.zipped import zip_stream
from humanlike.server.extensions import csrf, db
from humanlike.server.lab.access import Permission, visible_experiment_ids
from humanlike.server.lifecycle import ExperimentStatus, ParticipantStatus
from humanlike.server.participants import actions
from humanlike.server.participants.overrides import excluded_clause
from humanlike.server.research_api import idempotency
from humanlike.server.research_api.auth import (
    actor,
    allowed,
    authenticate,
    needs,
    rate_key,
    rate_limit,
)
from humanlike.server.research_api.models import (
    ActionOut,
    BonusIn,
    ExcludeIn,
    ExperimentOut,
    PanelOut,
    ParticipantOut,
    ParticipantPage,
    RejectIn,
    StatusIn,
)
from humanlike.server.rights.pseudonyms import key_from_secret
from humanlike.server.security import limiter
from humanlike.server.tables.core import Experiment, PanelResult, Participant, ParticipantQC, utcnow

bp = Blueprint("research_api", __name__, url_prefix="/api/research/v1")
json_errors(bp)
# The API is authenticated by the Authorization header alone: no cookie is read or set, so a
# page on another site cannot make a browser send a request that carries the researcher's
# authority (what CSRF tokens defend against); scripts could not send a CSRF token anyway.
csrf.exempt(bp)
limited = limiter.shared_limit(rate_limit, scope="research_api", key_func=rate_key)
"""One budget per token across every route of the API (config ``RESEARCH_API_RATE_LIMIT``)."""



@bp.errorhandler(429)
def _too_many(exc: Exception):
    """Over the token's budget: JSON, and when to retry."""
    limit = limiter.current_limit
    wait = max(1, math.ceil(limit.reset_at - time.time())) if limit is not None else 60
    response = jsonify(error="too_many_requests",
                       detail=f"this token's limit is {rate_limit()}: retry in {wait} s")
    response.status_code = 429
    response.headers["Retry-After"] = str(wait)
    return response


Model = TypeVar("Model", bound=BaseModel)
PER_PAGE = 100
MAX_PER_PAGE = 1000


def body_of(model: type[Model]) -> Model:
    """The JSON body as ``model``, or a 422 naming each field that is wrong."""
    data = request.get_json(silent=True)
    if data is None:
        api_abort(400, "invalid_json", "send a JSON object body (Content-Type: application/json)")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        api_abort(422, "invalid_body", [{"field": ".".join(str(p) for p in e["loc"]),
                                         "problem": e["msg"]} for e in exc.errors()])


@bp.get("/openapi.json")
def openapi():
    """The OpenAPI 3.1 document of this API (no token needed)."""
    from humanlike.server.research_api.openapi import openapi_document

    return jsonify(openapi_document())


def _experiment_out(exp: Experiment) -> ExperimentOut:
    counts = dict(db.session.execute(
        sa.select(Participant.status, sa.func.count()).where(Participant.experiment_id == exp.id)
        .group_by(Participant.status)).all())
    return ExperimentOut(slug=exp.slug, title=exp.title, status=exp.status, platform=exp.platform,
                         participants=sum(counts.values()), by_status=counts)


@bp.get("/experiments")
@limited
@needs(None)
def experiments():
    """The experiments the token's login may see (every one for an owner)."""
    _, user = authenticate()
    visible = visible_experiment_ids(user)
    stmt = sa.select(Experiment).order_by(Experiment.slug)
    if visible is not None:
        stmt = stmt.where(Experiment.id.in_(visible))
    return jsonify([_experiment_out(e).model_dump(mode="json")
                    for e in db.session.execute(stmt).scalars()])


@bp.get("/experiments/<slug>")
@limited
@needs(Permission.VIEW)
def experiment(slug: str):
    """One experiment: status and participants by status."""
    return jsonify(_experiment_out(g.experiment).model_dump(mode="json"))


@bp.post("/experiments/<slug>/status")
@limited
@needs(Permission.ACT)
def set_status(slug: str):
    """Switch the experiment to draft, live or closed (audited, as on the dashboard)."""
    wanted = body_of(StatusIn)
    exp = g.experiment
    old, exp.status = exp.status, ExperimentStatus(wanted.status).value
    audit.record(actor(), "experiment_status", experiment=exp.slug, target=exp.slug,
                 detail={"from": old, "to": exp.status})
    db.session.commit()
    return jsonify(_experiment_out(exp).model_dump(mode="json"))


def _int_arg(name: str, default: int, low: int, high: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        api_abort(422, "invalid_query", f"{name} must be a whole number from {low} to {high}")
    return int(raw)


@bp.get("/experiments/<slug>/participants")
@limited
@needs(Permission.VIEW)
def participants(slug: str):
    """A page of participants with their QC; filters ``status``, ``qc`` (failed / passed),
    ``excluded`` (yes / no); ``page`` and ``per_page`` (at most 1000)."""
    exp = g.experiment
    page, per_page = _int_arg("page", 1, 1, 10**6), _int_arg("per_page", PER_PAGE, 1, MAX_PER_PAGE)
    stmt = (sa.select(Participant, ParticipantQC)
            .outerjoin(ParticipantQC, ParticipantQC.participant_id == Participant.id)
            .where(Participant.experiment_id == exp.id))
    status = request.args.get("status")
    if status is not None:
        if status not in {s.value for s in ParticipantStatus}:
            api_abort(422, "invalid_query", f"status must be one of "
                                            f"{', '.join(s.value for s in ParticipantStatus)}")
        stmt = stmt.where(Participant.status == status)
    excluded = excluded_clause(Participant.analysis_override, ParticipantQC.qc_failed)
    for name, clause in (("qc", sa.func.coalesce(ParticipantQC.qc_failed, sa.false())),
                         ("excluded", excluded)):
        value = request.args.get(name)
        if value is None:
            continue
        yes, no = ("failed", "passed") if name == "qc" else ("yes", "no")
        if value not in (yes, no):
            api_abort(422, "invalid_query", f"{name} must be {yes} or {no}")
        stmt = stmt.where(clause if value == yes else ~clause)
    total = db.session.execute(sa.select(sa.func.count()).select_from(stmt.subquery())).scalar_one()
    rows = db.session.execute(stmt.add_columns(excluded).order_by(Participant.id)
                              .limit(per_page).offset((page - 1) * per_page)).all()
    reveal = allowed(Permission.REVEAL, exp)
    out = [ParticipantOut(
        public_id=p.public_id, status=p.status, condition=p.condition,
        platform_id=p.platform_id if reveal else None, started_at=as_utc(p.started_at),
        completed_at=as_utc(p.completed_at), bonus=p.bonus,
        n_stored=qc.n_stored if qc else None,
        catch_accuracy=qc.catch_accuracy if qc else None,
        repeat_reliability=qc.repeat_reliability if qc else None,
        median_rt_ms=qc.median_rt_ms if qc else None, qc_failed=qc.qc_failed if qc else None,
        qc_reasons=[r for r in (qc.qc_reasons if qc else "").split(";") if r],
        analysis_override=p.analysis_override, excluded=bool(is_excluded))
        for p, qc, is_excluded in rows]
    return jsonify(ParticipantPage(total=total, page=page, per_page=per_page, participants=out
                                   ).model_dump(mode="json"))


def _participant(exp: Experiment, public_id: str) -> Participant:
    row = db.session.execute(sa.select(Participant).where(
        Participant.experiment_id == exp.id, Participant.public_id == public_id)
    ).scalar_one_or_none()
    if row is None:
        api_abort(404, "not_found", f"no participant {public_id!r} in {exp.slug!r}")
    return row


def _act(slug: str, public_id: str, do: Any):
    """Run one action once per Idempotency-Key; an ``ActionError`` (a refused input or state)
    is a 4xx naming the field, and nothing is kept."""
    token, _ = authenticate()
    exp = g.experiment

    def run() -> tuple[dict[str, Any], int]:
        participant = _participant(exp, public_id)
        try:
            result = do(participant, actor())
        except actions.ActionError as exc:
            api_abort(exc.status, "action_refused", {"field": exc.field, "problem": str(exc)})
        out = ActionOut(participant=result.participant, action=result.action, ok=result.ok,
                        message=result.message, detail=result.as_dict())
        return out.model_dump(mode="json"), 200 if result.ok else 502

    return idempotency.once(token.id, run)


BASE = "/experiments/<slug>/participants/<public_id>"


@bp.post(f"{BASE}/approve")
@limited
@needs(Permission.ACT)
def approve(slug: str, public_id: str):
    """Approve a completed participant (the platform is told where a client is configured)."""
    return _act(slug, public_id, lambda p, who: actions.approve(p, who))


@bp.post(f"{BASE}/reject")
@limited
@needs(Permission.ACT)
def reject(slug: str, public_id: str):
    """Reject a submission with a message (and, on Prolific, a category)."""
    body = body_of(RejectIn)
    return _act(slug, public_id, lambda p, who: actions.reject(p, who, body.message, body.category))


@bp.post(f"{BASE}/exclude")
@limited
@needs(Permission.ACT)
def exclude(slug: str, public_id: str):
    """Exclude the participant from analysis whatever QC says (reason audited)."""
    body = body_of(ExcludeIn)
    return _act(slug, public_id,
                lambda p, who: actions.set_analysis_override(p, who, "exclude", body.reason))


@bp.post(f"{BASE}/bonus")
@limited
@needs(Permission.SPEND)
def bonus(slug: str, public_id: str):
    """Pay a bonus, at most once per (participant, reason) and once per Idempotency-Key."""
    body = body_of(BonusIn)
    return _act(slug, public_id, lambda p, who: actions.pay_bonus(p, who, body.amount, body.reason))


@bp.post("/experiments/<slug>/export.zip")
@limited
@needs(Permission.VIEW)
def export_zip(slug: str):
    """The experiment's export as a streamed zip (``?pseudonymise=1``: platform ids replaced by
    pseudonyms; without it the reveal scope and permission are needed). Audited."""
    exp = g.experiment
    pseudonymise = request.args.get("pseudonymise") == "1"
    if not pseudonymise and not allowed(Permission.REVEAL, exp):
        api_abort(403, "forbidden", "an export with platform ids needs the 'reveal' scope and "
                                    "permission: add ?pseudonymise=1 (nothing was changed)")
    key = key_from_secret(current_app.config["SECRET_KEY"]) if pseudonymise else None
    audit.record(actor(), "download_export", experiment=exp.slug, target=exp.slug,
                 detail={"pseudonymised": pseudonymise})
    db.session.commit()
    name = f"{exp.slug}-{utcnow():%Y%m%dT%H%M%SZ}"

    def generate() -> Iterator[bytes]:
        with tempfile.TemporaryDirectory(prefix="humanlike-export-") as tmp:
            write_export(slug, Path(tmp), pseudonym_key=key)
            db.session.rollback()
            yield from zip_stream(Path(tmp), name)

    return Response(stream_with_context(generate()), mimetype="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{name}.zip"'})


@bp.get("/experiments/<slug>/panel")
@limited
@needs(Permission.VIEW)
def panel(slug: str):
    """The live panel's last stored result (computed by the background worker)."""
    row = db.session.get(PanelResult, g.experiment.id)
    out = PanelOut(computed_at=as_utc(row.computed_at) if row else None,
                   n_participants=row.n_participants if row else None,
                   stale=row is None or row.data_version is None,
                   result=row.result if row else None)
    return jsonify(out.model_dump(mode="json"))
