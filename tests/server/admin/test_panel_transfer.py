"""What the live panel costs a browser: the experiment page carries no panel (it is fetched only
while the analysis section is open, static/js/admin_table.js), and a poll of an unchanged panel
is a 304 with no body, whatever the panel's size."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.core import Experiment, PanelResult
from tests.server.admin.dashboard_helpers import login

BIG = "<svg>" + "<rect/>" * 300_000 + "</svg>"  # a 2 MB figure stored in the panel's result


def store_panel(app, seconds: float) -> None:
    """A computed panel for 'small' with one big figure (as a 300-participant kappa matrix was)."""
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "small")
                                 ).scalar_one()
        row = db.session.get(PanelResult, exp.id) or PanelResult(experiment_id=exp.id)
        row.data_version, row.seconds, row.n_participants = f"v{seconds}", seconds, 3
        row.computed_at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
        row.result = {"kind": None, "n_participants": 3, "mlds_scales": None, "stopping": None,
                      "errors": {}, "ec": {"n_participants": 3, "n_pairs": 3, "n_significant": 0,
                                           "confidence_level": 0.95, "n_resamples": 10,
                                           "max_halfwidth": 0.1, "conditions": [], "svg": BIG}}
        db.session.add(row)
        db.session.commit()


def test_the_experiment_page_neither_embeds_nor_polls_the_panel(app, client):
    store_panel(app, 1.0)
    login(app, client)
    html = client.get("/admin/experiments/small").get_data(as_text=True)
    assert len(html.encode()) < 100_000, len(html)  # the panel's 2 MB figure is not in it
    assert "<rect/>" not in html and 'data-panel="folded"' in html
    section = html[html.index('<section id="panel"'):]
    section = section[:section.index(">")]
    assert 'data-panel-url="/admin/experiments/small/panel"' in section
    assert "hx-get" not in section and "hx-trigger" not in section  # no polling while folded


def test_an_unchanged_panel_is_a_304_without_a_body(app, client):
    store_panel(app, 1.0)
    login(app, client)
    first = client.get("/admin/experiments/small/panel")
    assert first.status_code == 200 and first.get_data(as_text=True).count("<rect/>") == 300_000
    tag = first.headers["ETag"]
    assert "no-cache" in first.headers["Cache-Control"]
    again = client.get("/admin/experiments/small/panel", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.get_data() == b"" and again.headers["ETag"] == tag
    store_panel(app, 2.0)  # the worker stored a new result: the whole panel again
    fresh = client.get("/admin/experiments/small/panel", headers={"If-None-Match": tag})
    assert fresh.status_code == 200 and fresh.headers["ETag"] != tag
    assert 'data-n="3"' in fresh.get_data(as_text=True)
