"""The live panel's own routes: its fragment (polled by the experiment page) and a "recompute now"
button that only marks the result stale (the background worker does the work)."""

from __future__ import annotations

import sqlalchemy as sa
from flask import flash, redirect, render_template, url_for

from humanlike.server import audit
from humanlike.server.admin import bp
from humanlike.server.admin.auth import actor
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.panel import panel_view
from humanlike.server.admin.stats import without_gc_pauses
from humanlike.server.extensions import db
from humanlike.server.models import PanelResult


@bp.get("/experiments/<slug>/panel")
@without_gc_pauses
def panel_fragment(slug: str):
    """The panel's HTML (htmx polls it)."""
    exp = experiment_or_404(slug)
    return render_template("admin/_panel.html", exp=exp, panel=panel_view(exp))


@bp.post("/experiments/<slug>/panel/stale")
def panel_stale(slug: str):
    """Ask the background worker to recompute the panel on its next pass."""
    exp = experiment_or_404(slug)
    db.session.execute(sa.update(PanelResult).where(PanelResult.experiment_id == exp.id)
                       .values(data_version=None))
    audit.record(actor(), "panel_recompute", experiment=exp.slug, target=exp.slug)
    db.session.commit()
    flash("The panel will be recomputed on the worker's next pass.")
    return redirect(url_for("admin.experiment", slug=slug))
