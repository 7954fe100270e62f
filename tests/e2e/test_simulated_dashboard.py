"""The experiments page counts a rehearsal's simulated participants apart ("N simulated" beneath
the total), in headless Chromium; screenshot in test-artifacts/simulated/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import serving
from tests.server.admin.dashboard_helpers import add_admin
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "simulated"


def test_the_experiments_page_counts_simulated_participants_apart(database_url, tmp_path,
                                                                  chromium):
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        api_client,
        simulate_participants,
    )
    from humanlike.server.participants.rehearsal import rehearsal_key

    small = write_small_experiment(tmp_path / "small")

    def setup(app):
        add_admin(app, "alice", "correct horse battery")
        study = SimulatedStudy(small, SimulationSettings(n_participants=2, fail_catch=0))
        with api_client(app=app, rehearsal_key=rehearsal_key(app.config["SECRET_KEY"],
                                                              "small")) as client:
            simulate_participants(client, study)
        with api_client(app=app) as client:  # and one who is not a rehearsal
            assert client.get("/start/small?PROLIFIC_PID=REAL1&STUDY_ID=s&SESSION_ID=x"
                              ).status_code == 302

    with serving(database_url, small, setup=setup) as live:
        page = chromium.new_context(viewport={"width": 1400, "height": 700}).new_page()
        page.set_default_timeout(20000)
        page.goto(f"{live.url}/admin/")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        row = page.locator('tr[data-slug="small"]')
        assert row.locator('[data-col="total"]').inner_text().split() == ["3", "2", "simulated"]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "experiments.png"), full_page=True)
