"""Participant sources in Chromium: a SONA arrival lands on SONA's client-side completion URL with
its survey code (and, with a server-side URL, the fake SONA site gets one grant); a lab session
started from the lab entry page runs full screen and exports the typed id (its study link is
refused: the experimenter starts each session)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.export.writer import write_export
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.tables.core import Event, Participant
from tests.e2e.conftest import LiveServer
from tests.e2e.participant_driver import Played, play
from tests.server.conftest import write_small_experiment
from tests.server.fake_sona import RunningSona


@pytest.fixture
def shots(tmp_path) -> Path:
    """Where the screenshots go: $HUMANLIKE_SHOTS (to look at them), else the test's folder."""
    folder = Path(os.environ.get("HUMANLIKE_SHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory) -> Path:
    return write_small_experiment(tmp_path_factory.mktemp("sources") / "small").parent


def serve(folder: Path, dest: Path, head: str, tail: str, database_url: str):
    """The small experiment with its platform replaced, served on a free port."""
    shutil.copytree(folder, dest)
    spec = dest / "experiment.toml"
    text = spec.read_text().replace('platform = "prolific"\n', "")
    spec.write_text(head + text + "\n" + tail)
    app = create_app({"SECRET_KEY": "e2e", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    return app, LiveServer(app)


@pytest.fixture
def fake_sona():
    running = RunningSona()
    yield running
    running.stop()


def test_a_sona_arrival_completes_on_the_client_side_url_with_its_survey_code(
        chromium, database_url, small_folder, tmp_path, fake_sona, shots):
    fake = fake_sona.fake
    table = (f'[platform]\npreset = "sona"\ncompletion_url = "{fake.client_side_url}"\n'
             f'server_completion_url = "{fake.server_side_url}"\n')
    app, live = serve(small_folder, tmp_path / "sona", "", table, database_url)
    code, other = fake.sign_up(), fake.sign_up()
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(f"{live.url}/start/small?survey_code={code}")
        play(page, Played(), until=f"{fake.url}/webstudy_credit.aspx")
        page.wait_for_selector("#sona-status")
        landed = urlsplit(page.url)
        assert parse_qs(landed.query) == {"experiment_id": ["123"],
                                          "credit_token": ["9185d436e5f94b1581b0918162e8"],
                                          "survey_code": [code]}
        # the server-side grant came first, so SONA tells the participant the credit is there
        assert page.inner_text("#sona-status") == "You have already received credit for this study."
        page.screenshot(path=str(shots / "sona-client-side-landing.png"))
    finally:
        context.close()
        live.stop()
    # the server-side grant went first (at /complete), once; the browser's load then found the
    # survey code credited already: one credit in all, and none for a code that never completed
    assert [c.outcome for c in fake.server_calls(code)] == ["granted"]
    assert fake.credited(code) == 1 and fake.credited(other) == 0
    assert [c.outcome for c in fake.requests if c.side == "client"] == ["already"]
    with app.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.platform, row.platform_id, row.status) == ("sona", code, "completed")
    database.dispose(app)


def test_a_lab_session_runs_full_screen_and_exports_the_typed_id(chromium, database_url,
                                                                  small_folder, tmp_path, shots):
    table = '[platform]\npreset = "lab"\nid_pattern = "P[0-9]{2}"\n'
    app, live = serve(small_folder, tmp_path / "lab", "", table, database_url)
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        refused = page.goto(f"{live.url}/start/small")  # the study link skips the experimenter
        assert refused.status == 403 and "runs in the lab" in page.inner_text("main")
        page.screenshot(path=str(shots / "lab-study-link-refused.png"))
        page.goto(f"{live.url}/lab/small")
        assert page.evaluate("document.activeElement.id") == "participant_id"  # ready to scan
        page.screenshot(path=str(shots / "lab-entry.png"))
        page.keyboard.type("participant 7")
        page.keyboard.press("Enter")
        page.wait_for_selector("#lab-error")
        assert "format" in page.inner_text("#lab-error")
        page.screenshot(path=str(shots / "lab-entry-error.png"))
        page.fill("#participant_id", "P07")
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live.url}/run/**")
        page.wait_for_selector("#consent-agree:not([disabled])")
        page.keyboard.press("Enter")  # the participant consents, then the study asks for full screen
        page.wait_for_selector("[data-screen='fullscreen']")
        page.screenshot(path=str(shots / "lab-fullscreen-prompt.png"))
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.fullscreenElement !== null")
        play(page, Played(), until=f"{live.url}/done/")
        page.wait_for_selector("#lab-finished")
        assert page.locator("#return-link").count() == 0  # no platform to return to
        page.screenshot(path=str(shots / "lab-done.png"))
        # the same id again (another participant typed the wrong id?): refused, nothing changed
        page.goto(f"{live.url}/lab/small")
        page.fill("#participant_id", "P07")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=already taken part")
    finally:
        context.close()
        live.stop()
    with app.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.platform, row.platform_id, row.status) == ("lab", "P07", "completed")
        kinds = set(db.session.execute(sa.select(Event.type).where(
            Event.participant_id == row.id)).scalars())
        assert "fullscreen_enter" in kinds
        write_export("small", tmp_path / "export")
    participants = pd.read_csv(tmp_path / "export" / "participants.csv", dtype=str)
    assert participants[["platform", "platform_id", "session_id"]].values.tolist() == [
        ["lab", "P07", "1"]]
    database.dispose(app)
