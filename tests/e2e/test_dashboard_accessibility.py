"""axe-core on the dashboard's main pages in one browser session (issue 41 item 5): the login
page, the experiments list, an experiment page with its analysis and live panel open, a
participant's page, the bulk-action confirm page, the audit log, the users page, a study's
members and the API tokens page. No serious or critical violation may remain. Screenshots of each
page are kept in /tmp/shots/a11y-admin."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.e2e.conftest import serving
from tests.e2e.test_accessibility import AUDIT_JS, AXE
from tests.server.admin.dashboard_helpers import add_admin
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots/a11y-admin")


def _setup(app) -> None:
    """An owner and three completed participants of the small study, one with a bonus; QC and the
    live panel computed as the background worker does."""
    from humanlike.server.extensions import db
    from humanlike.server.live.panel import refresh_all
    from humanlike.server.participants import actions
    from humanlike.server.tables.core import Participant
    from tests.server.admin.dashboard_helpers import run_participant

    add_admin(app)
    client = app.test_client()
    for i in range(3):
        run_participant(client, f"PROLIFIC_PID=axe{i}&STUDY_ID=s&SESSION_ID=x{i}", careful=i != 2)
    with app.app_context():
        first = db.session.execute(sa.select(Participant).order_by(Participant.id)).scalars().first()
        actions.pay_bonus(first, "admin:alice", "0.50", "accuracy")
        refresh_all()


def _audit(page, name: str, found: dict[str, list]) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    if page.evaluate("() => typeof axe === 'undefined'"):
        page.evaluate(AXE.read_text())  # through the DevTools protocol: the page's CSP allows it
    found[name] = page.evaluate(AUDIT_JS)


def test_dashboard_pages_have_no_serious_axe_violations(chromium, tmp_path):
    assert AXE.is_file(), f"{AXE} is missing: run `make setup` (it copies axe-core from npm)"
    spec = write_small_experiment(tmp_path / "small")
    found: dict[str, list] = {}
    with serving(f"sqlite:///{tmp_path}/db.sqlite", spec, setup=_setup) as live:
        context = chromium.new_context(viewport={"width": 1366, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20000)
        page.goto(f"{live.url}/admin/login")
        _audit(page, "login", found)
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        page.wait_for_selector('tr[data-slug="small"]')
        _audit(page, "experiments", found)
        page.goto(f"{live.url}/admin/experiments/small")
        page.wait_for_selector("tr[data-participant]")
        page.click("#analysis > summary")
        page.wait_for_selector("#panel [data-panel=computed]")
        _audit(page, "experiment", found)
        page.click("tr[data-participant] a")
        page.wait_for_selector("table.trials")
        _audit(page, "participant", found)
        page.goto(f"{live.url}/admin/experiments/small")
        page.click("button.preset")
        page.wait_for_selector("button.confirm-button")
        _audit(page, "confirm", found)
        for name, path in (("audit", "/admin/audit"), ("users", "/admin/users"),
                           ("members", "/admin/experiments/small/members"),
                           ("tokens", "/admin/tokens")):
            response = page.goto(f"{live.url}{path}")
            assert response is not None and response.status == 200, path
            _audit(page, name, found)
        context.close()
    assert set(found) == {"login", "experiments", "experiment", "participant", "confirm",
                          "audit", "users", "members", "tokens"}
    assert {name: v for name, v in found.items() if v} == {}
