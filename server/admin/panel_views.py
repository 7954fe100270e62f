"""The live panel's own routes: its fragment (fetched by the experiment page while its analysis
section is open; ``static/js/admin_table.js``) and a "recompute now"
button that only marks the result stale (the background worker does the work)."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from flask import flash, make_response, redirect, render_template, request, url_for

from humanlike.server import audit
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import requires
from humanlike.server.admin.stats import without_gc_pauses
from humanlike.server.database import as_utc
from humanlike.server.extensions import db
from humanlike.server.lab.access import Permission
from humanlike.server.live.panel import panel_view
from humanlike.server.tables.core import Experiment, PanelResult, utcnow


@bp.get("/experiments/<slug>/panel")
@requires(Permission.VIEW)
@without_gc_pauses
def panel_fragment(slug: str):
    """The panel's HTML (fetched while the experiment page's analysis section is open); 304 when
    the browser's ETag names the stored result shown (nothing read but its small columns)."""
    exp = experiment_or_404(slug)
    tag = panel_etag(exp)
    if request.if_none_match.contains(tag):
        response = make_response("", 304)
    else:
        response = make_response(render_template("admin/_panel.html", exp=exp,
                                                 panel=panel_view(exp)))
    response.set_etag(tag)
    response.headers["Cache-Control"] = "no-cache, private"
    return response


def panel_etag(exp: Experiment) -> str:
    """What the panel fragment shows depends on: the stored result's version and time, and
    whether a worker holds the lease (the "recomputing" note)."""
    row = db.session.execute(sa.select(
        PanelResult.data_version, PanelResult.computed_at, PanelResult.lease_until).where(
        PanelResult.experiment_id == exp.id)).one_or_none()
    if row is None:
        return f"panel-{exp.id}-none"
    lease = as_utc(row.lease_until)
    computing = lease is not None and lease > utcnow()
    key = f"{exp.id}:{row.data_version}:{row.computed_at}:{computing}"
    return "panel-" + hashlib.sha256(key.encode()).hexdigest()[:20]


@bp.post("/experiments/<slug>/panel/stale")
@requires(Permission.ACT)
def panel_stale(slug: str):
    """Ask the background worker to recompute the panel on its next pass."""
    exp = experiment_or_404(slug)
    db.session.execute(sa.update(PanelResult).where(PanelResult.experiment_id == exp.id)
                       .values(data_version=None))
    audit.record(actor(), "panel_recompute", experiment=exp.slug, target=exp.slug)
    db.session.commit()
    flash("The panel will be recomputed on the worker's next pass.")
    return redirect(url_for("admin.experiment", slug=slug))
