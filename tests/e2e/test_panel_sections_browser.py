"""The live panel of a simulated demo study in headless Chromium: rating, MLDS and error-consistency
sections with their figures (inline SVG) on the experiment page, fetched only while the analysis
section is open (a 304 while the stored result is unchanged). Screenshot written to
test-artifacts/dashboard/panel_sections.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from humanlike.server.extensions import db
from humanlike.server.live.panel import refresh_all
from tests.e2e.conftest import LiveServer
from tests.server.admin.dashboard_helpers import add_admin
from tests.server.admin.test_dashboard_panel import demo_app, demo_study, simulate

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory):
    from humanlike.server.demo.build import build_demo

    return build_demo(tmp_path_factory.mktemp("panel-demo") / "demo", controversial=False).parent


def test_the_panel_shows_ratings_mlds_and_kappa_sections(database_url, demo_folder, tmp_path,
                                                         chromium):
    app, spec = demo_app(database_url, demo_folder, tmp_path,
                         'measure = "mlds_halfwidth"\nthreshold = 0.05')
    simulate(app, demo_study(spec), 4, "a")
    with app.app_context():
        refresh_all()
        db.session.remove()
    add_admin(app, "alice", "correct horse battery")
    live = LiveServer(app)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(f"{live.url}/admin/login")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        panel_answers: list[int] = []
        page.on("response", lambda r: panel_answers.append(r.status)
                if r.url.endswith("/admin/experiments/demo/panel") else None)
        page.goto(f"{live.url}/admin/experiments/demo")
        # folded: the panel is neither in the page nor fetched (the rows refresh meanwhile)
        page.wait_for_function("() => Number(document.getElementById('participant-rows')"
                               ".dataset.refreshes || 0) >= 2")
        assert panel_answers == [] and page.locator('[data-panel="folded"]').count() == 1
        page.click("#analysis > summary")  # the analysis is folded below the participants table
        page.wait_for_selector('[data-section="ec"] svg')
        # open: asked again every 5 s, answered 304 (no body) while the result is unchanged
        page.wait_for_function(
            "() => Number(document.getElementById('panel').dataset.loads || 0) >= 2")
        assert panel_answers[:2] == [200, 304], panel_answers
        page.click("#analysis > summary")  # folded again: no more requests
        asked = len(panel_answers)
        page.wait_for_timeout(6000)
        assert len(panel_answers) == asked
        page.click("#analysis > summary")
        for section in ("mlds", "ec"):
            box = page.locator(f'[data-section="{section}"] figure svg').bounding_box()
            assert box is not None and box["width"] > 200 and box["height"] > 150, (section, box)
        assert page.locator('[data-ceiling="all-lower"]').count() == 1
        assert page.locator('[data-stopping]').count() == 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "panel_sections.png"), full_page=True)
    finally:
        context.close()  # an open dashboard keeps polling and busies the shared browser
        live.stop()
