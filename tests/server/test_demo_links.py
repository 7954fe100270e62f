"""Every link ``humanlike demo`` prints works for the person who runs it: the demo declares
Prolific, so its Prolific-style link lets anyone in and its plain link only the logged-in
researcher (a preview, recorded as simulated); it prints no MTurk link (issue 45 item 8)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import sqlalchemy as sa

from humanlike.cli.demo import demo_links
from humanlike.server.demo.build import demo_text
from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Participant
from tests.server.admin.dashboard_helpers import login
from tests.server.sources import app_factory


def test_the_demo_declares_prolific():
    assert 'platform = "prolific"\n' in demo_text("experiment.toml")


def test_every_link_the_demo_prints_works_for_its_user(
        database_url, small_experiment, tmp_path, monkeypatch):
    demo = tmp_path / "demo"
    shutil.copytree(small_experiment.parent, demo)  # the small study under the demo's slug
    (demo / "experiment.toml").write_text(
        small_experiment.read_text().replace('slug = "small"', 'slug = "demo"'))
    lines = demo_links("http://127.0.0.1:5055", Path("pw"))
    texts = dict(lines)
    assert not any("workerId" in text or "assignmentId" in text for _, text in lines)
    prolific = texts["Prolific-style link"].removeprefix("http://127.0.0.1:5055")
    preview = texts["researcher preview"].split()[0].removeprefix("http://127.0.0.1:5055")
    assert re.fullmatch(r"/start/demo\?PROLIFIC_PID=demo-[0-9a-f]{6}&STUDY_ID=demo-study"
                        r"&SESSION_ID=demo-session-[0-9a-f]{6}", prolific)
    assert preview == "/start/demo" and "log in" in texts["researcher preview"]
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        app = make(demo / "experiment.toml")
        assert app.test_client().get(prolific).status_code == 302
        assert app.test_client().get(preview).status_code == 403  # not logged in
        researcher = app.test_client()
        login(app, researcher)
        assert researcher.get(preview).status_code == 302
        with app.app_context():
            rows = db.session.execute(sa.select(Participant.platform, Participant.simulated)
                                      .order_by(Participant.id)).all()
            events = db.session.execute(sa.select(Event.type)).scalars().all()
    assert [tuple(r) for r in rows] == [("prolific", False), ("local", True)]
    assert events == ["preview"]
