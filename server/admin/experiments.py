"""The experiments page: every experiment with its numbers (refreshed by polling a fragment), and the
draft / live / closed switch (a closed or draft experiment shows new arrivals a polite page)."""

from __future__ import annotations

import sqlalchemy as sa
from flask import abort, flash, jsonify, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import SelectField
from wtforms.validators import DataRequired

from humanlike.server import audit
from humanlike.server.admin import stats
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.permissions import Permission, person, requires, signed_in
from humanlike.server.extensions import db
from humanlike.server.lab.access import visible_experiment_ids
from humanlike.server.lifecycle import ExperimentStatus
from humanlike.server.tables.core import Experiment


class StatusForm(FlaskForm):
    """Switch an experiment between draft, live and closed."""

    status = SelectField("Status", choices=[s.value for s in ExperimentStatus],
                         validators=[DataRequired()])


def experiment_or_404(slug: str) -> Experiment:
    """The experiment called ``slug`` or a 404."""
    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if exp is None:
        abort(404)
    return exp


def visible_summaries() -> list[stats.ExperimentSummary]:
    """``stats.summaries()`` of the studies the login may see (every one for an owner)."""
    visible = visible_experiment_ids(person())
    return [row for row in stats.summaries() if visible is None or row.id in visible]


@bp.get("/")
@signed_in
@stats.without_gc_pauses
def index():
    """Every experiment with status, platform, participants by status, completion and exclusions."""
    rows = visible_summaries()
    forms = {row.slug: StatusForm(formdata=None, status=row.status) for row in rows}
    return render_template("admin/index.html", rows=rows, forms=forms, statuses=stats.STATUSES)


@bp.get("/experiments.rows")
@signed_in
@stats.without_gc_pauses
def experiment_rows():
    """The experiments table's body (htmx polls it every few seconds)."""
    rows = visible_summaries()
    forms = {row.slug: StatusForm(formdata=None, status=row.status) for row in rows}
    return render_template("admin/_experiment_rows.html", rows=rows, forms=forms,
                           statuses=stats.STATUSES)


@bp.get("/experiments.json")
@signed_in
@stats.without_gc_pauses
def experiments_json():
    """The same numbers as JSON."""
    return jsonify([row.as_dict() for row in visible_summaries()])


@bp.post("/experiments/<slug>/status")
@requires(Permission.ACT)
def set_status(slug: str):
    """Switch the experiment's status (audited)."""
    exp = experiment_or_404(slug)
    form = StatusForm()
    if not form.validate_on_submit():
        abort(400, "status must be one of draft, live, closed")
    old, exp.status = exp.status, form.status.data
    audit.record(actor(), "experiment_status", experiment=exp.slug, target=exp.slug,
                 detail={"from": old, "to": exp.status})
    db.session.commit()
    flash(f"{exp.slug}: status {old} -> {exp.status}"
          + (" (new arrivals now see a 'study closed' page)" if exp.status != ExperimentStatus.LIVE else ""))
    return redirect(url_for("admin.index"))
