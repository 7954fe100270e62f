"""Actions on participants from the dashboard, one at a time or in bulk, each through a confirmation
page: approve, reject (message >= 100 characters and a category), bonus (amount, reason), exclude /
include from analysis (reason). Everything is done by ``humanlike.server.participants.actions`` (one
implementation with the CLI: platform call when a recruiter is registered, audit row, bonus
idempotency), as a background job (``humanlike.server.participants.jobs``: the request does the first few
seconds, the server's job runner the rest, ``admin/jobs.py`` shows its progress); this module
only collects the participants and the inputs."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import abort, current_app, redirect, render_template, request, url_for
from flask_wtf import FlaskForm

from humanlike.server.admin import stats
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import from_action, person, requires, signed_in
from humanlike.server.extensions import db
from humanlike.server.lab.access import visible_experiment_ids
from humanlike.server.lifecycle import APPROVE
from humanlike.server.participants import actions, jobs
from humanlike.server.tables.core import AuditEntry, Experiment, Participant, ParticipantQC

ACTIONS = {"approve": "Approve", "reject": "Reject", "bonus": "Pay a bonus",
           "exclude": "Exclude from analysis", "include": "Include in analysis",
           "clear": "Clear the analysis override",
           "mark_paid": "Mark a bonus paid after checking Prolific",
           "message": "Send a message on Prolific"}
SPENDING = frozenset({"bonus", "mark_paid"})
"""Actions that move money (the ``spend`` permission); the others need ``act``."""
PRESETS = {"completed_passing_qc": "every completed participant who passes QC"}
MAX_BULK = 5000


class ActionForm(FlaskForm):
    """CSRF token for the action forms (their fields are read from the request)."""


def _inputs() -> dict[str, str]:
    form = request.form
    inputs = {k: (form.get(k) or "").strip()
              for k in ("message", "category", "amount", "reason", "message_body")}
    # a hidden "0" before the checkbox: unticked sends "0", ticked "0" then "1"; absent = default on
    inputs["exclude_too"] = (form.getlist("exclude_too") or [""])[-1]
    return inputs


def _selected(exp: Experiment) -> list[Participant]:
    """The participants the form names (ticked rows) or its preset selects."""
    preset = request.form.get("preset", "")
    stmt = sa.select(Participant).where(Participant.experiment_id == exp.id)
    if preset == "completed_passing_qc":
        stmt = (stmt.outerjoin(ParticipantQC, ParticipantQC.participant_id == Participant.id)
                .where(Participant.status.in_(sorted(APPROVE.sources)),
                       ParticipantQC.participant_id.is_not(None), ~stats.excluded_clause()))
    elif preset:
        abort(400, f"unknown selection {preset!r}")
    else:
        ids = request.form.getlist("participant")[:MAX_BULK]
        if not ids:
            return []
        stmt = stmt.where(Participant.public_id.in_(ids))
    return list(db.session.execute(stmt.order_by(Participant.id).limit(MAX_BULK)).scalars())


def _check(action: str, inputs: dict[str, str], exp: Experiment) -> str | None:
    """What is wrong with the inputs (before anything is done), or None."""
    try:
        if action == "reject":
            actions.validate_rejection(inputs["message"], inputs["category"] or None, exp.platform)
        elif action == "bonus":
            actions._amount(inputs["amount"])
            if not inputs["reason"]:
                raise actions.ActionError("say what the bonus is for (a reason is required)")
        elif action in ("exclude", "include") and not inputs["reason"]:
            raise actions.ActionError("say why (a reason is required)")
        elif action == "message" and not inputs["message_body"]:
            raise actions.ActionError("write the message (it is empty)")
        elif action == "mark_paid" and not inputs["reason"]:
            raise actions.ActionError("name the bonus (its reason) whose state is unknown")
    except actions.ActionError as exc:
        return str(exc)
    return None


def _render(exp: Experiment, action: str, people: list[Participant], inputs: dict[str, str],
            error: str | None, results: list[Any] | None = None, status: int = 200):
    return render_template(
        "admin/confirm.html", exp=exp, action=action, label=ACTIONS.get(action, action),
        people=people, inputs=inputs, error=error, results=results, form=ActionForm(),
        preset=request.form.get("preset", ""), presets=PRESETS,
        categories=actions.PROLIFIC_REJECTION_CATEGORIES,
        local_only=actions.recruiter_for(exp) is None), status


@bp.post("/experiments/<slug>/actions/confirm")
@requires(from_action("action", SPENDING))
def confirm_action(slug: str):
    """Show what the action will do to whom and ask for its inputs and a confirmation (nothing
    changes yet). The page opens clean: the inputs are checked when it is submitted."""
    exp = experiment_or_404(slug)
    action = request.form.get("action", "")
    if action not in ACTIONS:
        abort(400, f"unknown action {action!r}")
    inputs = _inputs()
    people = _selected(exp)
    error = None if people else "no participants selected: tick some first"
    return _render(exp, action, people, inputs, error, status=400 if error else 200)


@bp.post("/experiments/<slug>/actions/apply")
@requires(from_action("action", SPENDING))
def apply_action(slug: str):
    """Do the confirmed action to each named participant; one audit row each (a refusal for one is
    reported and the rest go on). A repeated submit cannot pay a bonus twice."""
    exp = experiment_or_404(slug)
    action = request.form.get("action", "")
    if action not in ACTIONS or request.form.get("confirmed") != "yes":
        abort(400, "confirm the action first")
    inputs = _inputs()
    error = _check(action, inputs, exp)
    people = _selected(exp)
    if error or not people:
        return _render(exp, action, people, inputs, error or "no participants selected", status=400)
    if action == "message":  # one bulk request for everyone, not one per participant
        try:
            results = actions.send_message(people, actor(), inputs["message_body"])
        except actions.ActionError as exc:
            return _render(exp, action, people, inputs, str(exc), status=exc.status)
        return _render(exp, action, people, inputs, None, results=results)
    # a background job: done here for a few seconds (a few participants finish in this request),
    # the rest by the server's job runner while the job's page shows the progress
    job = jobs.enqueue(exp, action, inputs, actor(), [p.public_id for p in people])
    owner = jobs.new_owner()
    budget = float(current_app.config.get("ACTION_INLINE_SECONDS", jobs.INLINE_SECONDS))
    if jobs.claim(job.id, owner) and jobs.run(job.id, owner, budget=budget):
        return _render(exp, action, people, inputs, None, results=jobs.results(job))
    if current_app.config.get("JOB_THREAD", True):
        jobs.wake(current_app._get_current_object())  # type: ignore[attr-defined]
    return redirect(url_for("admin.job_page", job_id=job.id), 303)


AUDIT_PAGE = 100
AUDIT_FILTERS = ("action", "experiment", "actor", "target")


@bp.get("/audit")
@signed_in
def audit_log():
    """The audit log, newest first, a page at a time, filtered by action, experiment, actor or
    target (exact values; ``actor`` and ``target`` also match a prefix). A login that is not an
    owner sees the rows of its own studies only."""
    args = {k: (request.args.get(k) or "").strip()[:128] for k in AUDIT_FILTERS}
    try:
        page = max(1, int(request.args.get("page", 1)))
    except ValueError:
        page = 1
    stmt = sa.select(AuditEntry)
    visible = visible_experiment_ids(person())
    slugs = None if visible is None else sorted(db.session.execute(
        sa.select(Experiment.slug).where(Experiment.id.in_(visible))).scalars())
    if slugs is not None:
        stmt = stmt.where(AuditEntry.experiment.in_(slugs))
    if args["action"]:
        stmt = stmt.where(AuditEntry.action == args["action"])
    if args["experiment"]:
        stmt = stmt.where(AuditEntry.experiment == args["experiment"])
    for name in ("actor", "target"):
        if args[name]:
            column = getattr(AuditEntry, name)
            stmt = stmt.where(column.startswith(args[name], autoescape=True))
    total = db.session.execute(sa.select(sa.func.count()).select_from(stmt.subquery())).scalar_one()
    rows = db.session.execute(stmt.order_by(AuditEntry.id.desc()).limit(AUDIT_PAGE)
                              .offset((page - 1) * AUDIT_PAGE)).scalars().all()
    known = db.session.execute(stmt.with_only_columns(AuditEntry.action).distinct()
                               .order_by(AuditEntry.action)).scalars().all()
    experiments = slugs if slugs is not None else db.session.execute(
        sa.select(Experiment.slug).order_by(Experiment.slug)).scalars().all()
    query = {k: v for k, v in args.items() if v}
    return render_template("admin/audit.html", rows=rows, total=total, page=page,
                           pages=max(1, -(-total // AUDIT_PAGE)), args=args, query=query,
                           actions=known, experiments=experiments)
