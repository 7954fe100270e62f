"""The progress of the bulk actions' background jobs (``humanlike.server.participants.jobs``): a job's page
(its progress bar, then every participant's result, as the confirm page shows them) and the
experiment page's list of unfinished and recent jobs; both re-fetched by htmx while a job runs."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from flask import abort, render_template

from humanlike.server.admin.actions import ACTIONS
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import requires
from humanlike.server.extensions import db
from humanlike.server.lab.access import Permission
from humanlike.server.participants import jobs
from humanlike.server.tables.core import Experiment, utcnow
from humanlike.server.tables.jobs import ActionJob

RECENT = dt.timedelta(hours=1)
"""Finished jobs listed on the experiment page for this long."""


def job_or_404(job_id: str) -> tuple[ActionJob, Experiment]:
    """The job and its experiment, or a 404."""
    job = db.session.get(ActionJob, int(job_id)) if job_id.isdigit() and len(job_id) < 10 else None
    if job is None:
        abort(404)
    exp = db.session.get(Experiment, job.experiment_id)
    assert exp is not None
    return job, exp


def _context(job_id: str) -> dict:
    job, exp = job_or_404(job_id)
    return {"job": job, "exp": exp, "label": ACTIONS.get(job.action, job.action),
            "results": jobs.results(job) if job.status == "done" else None}


@bp.get("/jobs/<job_id>")
@requires(Permission.VIEW)
def job_page(job_id: str):
    """A job's progress, then its results."""
    return render_template("admin/job.html", **_context(job_id))


@bp.get("/jobs/<job_id>/progress")
@requires(Permission.VIEW)
def job_fragment(job_id: str):
    """The job's progress (htmx asks every second while it runs)."""
    return render_template("admin/_job.html", **_context(job_id))


@bp.get("/experiments/<slug>/jobs")
@requires(Permission.VIEW)
def experiment_jobs(slug: str):
    """The experiment's unfinished jobs and those finished within the last hour."""
    exp = experiment_or_404(slug)
    rows = db.session.execute(sa.select(ActionJob).where(
        ActionJob.experiment_id == exp.id,
        sa.or_(ActionJob.status != "done", ActionJob.finished_at > utcnow() - RECENT))
        .order_by(ActionJob.id.desc()).limit(10)).scalars().all()
    return render_template("admin/_jobs.html", exp=exp, rows=rows, labels=ACTIONS)
