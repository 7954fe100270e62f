"""The circuit breaker's banner reaches an experiment page that is already open: careless
participants trip the breaker while the researcher watches, and the banner appears without a
reload (htmx replaces the empty slot with it, and it then polls no more, so a note being typed
into its Resume form stays: no htmx attribute is left to replace it). Screenshot in test-artifacts/dashboard/."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import serving
from tests.e2e.test_dashboard import shoot
from tests.server.admin.dashboard_helpers import add_admin, run_participant
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser
RULES = "\n[breaker]\nmin_participants = 5\nwindow_minutes = 60\n"


@pytest.fixture
def breaker_server(database_url, tmp_path):
    small = write_small_experiment(tmp_path / "small")
    small.write_text(small.read_text() + RULES)

    with serving(database_url, small, setup=lambda app: add_admin(
            app, "alice", "correct horse battery")) as live:
        yield live


def test_a_trip_appears_on_the_open_page_and_a_typed_note_survives(breaker_server, chromium):
    app, url = breaker_server.app, breaker_server.url
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(20000)
    try:
        page.goto(f"{url}/admin/login")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        page.goto(f"{url}/admin/experiments/small")
        assert page.locator("#breaker").count() == 0
        for i in range(5):  # careless: every catch trial failed, each from their own address
            careless = app.test_client()
            careless.environ_base["REMOTE_ADDR"] = f"198.51.100.{i + 1}"
            run_participant(careless, f"PROLIFIC_PID=CARELESS{i}&STUDY_ID=s&SESSION_ID=x{i}")
        page.wait_for_selector("#breaker", timeout=25000)  # the slot asks every 10 s
        # nothing polls any more: no slot, and no htmx attribute on the banner or inside it
        assert page.locator("#breaker-slot").count() == 0
        assert page.locator("#breaker[hx-get], #breaker [hx-get], #breaker [hx-trigger]").count() == 0
        note = "the link was posted on a forum; removed"
        page.fill("#breaker textarea[name=note]", note)
        page.wait_for_timeout(1000)
        assert page.input_value("#breaker textarea[name=note]") == note
        assert "qc_fail_share 1.00 > 0.50" in page.inner_text("#breaker")
        shoot(page, "breaker-banner-live")
    finally:
        context.close()
