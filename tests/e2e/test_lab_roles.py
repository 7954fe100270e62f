"""Roles on the dashboard in headless Chromium (issue 40): an owner invites a researcher on the
users page (the one-time password shown once), makes them a member of a study with one
permission on its members page, and a viewer's experiment page shows the data without a single
action; the viewer makes an API token, shown once. Screenshots in test-artifacts/lab/
(git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.access import StudyMember
from humanlike.server.tables.core import AdminUser, Experiment
from tests.e2e.conftest import serving
from tests.server.admin.dashboard_helpers import run_participant
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "lab"
PASSWORD = "correct horse battery"
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def setup(app):
    with app.app_context():
        for name, role in (("olga", "owner"), ("vera", "viewer")):
            user = AdminUser(username=name, role=role)
            user.set_password(PASSWORD)
            db.session.add(user)
        db.session.flush()
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "small")
                                 ).scalar_one()
        vera = db.session.execute(sa.select(AdminUser).where(AdminUser.username == "vera")
                                  ).scalar_one()
        db.session.add(StudyMember(user_id=vera.id, experiment_id=exp.id, can_act=False,
                                   can_spend=False, can_reveal=False, can_delete=False))
        db.session.commit()
    for n in range(3):
        run_participant(app.test_client(), f"PROLIFIC_PID=lab{n}&STUDY_ID=s&SESSION_ID=x{n}",
                        careful=n != 1)


def log_in(browser, url: str, name: str):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(f"{url}/admin/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/admin/")
    return context, page


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@SQLITE
def test_owner_invites_and_grants_and_a_viewer_sees_no_actions(database_url, tmp_path, chromium):
    small = write_small_experiment(tmp_path / "small")
    with serving(database_url, small, setup=setup) as live:
        owner, page = log_in(chromium, live.url, "olga")
        page.click("text=Users")
        page.fill("input[name=username]", "rosa")
        page.select_option("select[name=role]:not([aria-label])", "researcher")
        page.click("button:has-text('Invite')")
        password = page.locator("#one-time-password").inner_text()
        assert len(password) >= 16
        assert "must choose a password" in page.locator('tr[data-user="rosa"]').inner_text()
        shoot(page, "users")
        page.goto(f"{live.url}/admin/experiments/small/members")
        page.fill("input[name=username]", "rosa")
        page.check("input[name=can_act]")
        page.click("button:has-text('Save')")
        row = page.locator('tr[data-member="rosa"]')
        assert [c.strip() for c in row.locator("td").all_inner_texts()[2:6]] == [
            "yes", "–", "–", "–"]
        assert page.locator('tr[data-member="vera"]').count() == 1
        shoot(page, "members")
        owner.close()

        viewer, page = log_in(chromium, live.url, "vera")
        assert page.locator("text=Users").count() == 0
        assert page.locator("tr[data-slug=small] form").count() == 0  # no status switch
        page.click("text=small")
        page.wait_for_selector("#participant-rows tr")
        assert page.locator("#participant-rows tr").count() == 3
        for gone in ("#review-ticked", "button.preset", "form.reveal", ".listing-actions",
                     "input[name=participant]"):
            assert page.locator(gone).count() == 0, gone
        assert page.locator("form.downloads button").inner_text() == (
            "Download export (zip, pseudonymised)")
        shoot(page, "viewer-experiment")
        page.click("text=API tokens")
        page.fill("input[name=name]", "weekly export")
        page.fill("input[name=days]", "30")
        page.click("button:has-text('Create')")
        token = page.locator("#new-token").inner_text()
        assert token.startswith("hl_") and len(token) > 40
        row = page.locator("tr[data-token]").first.inner_text()
        assert "weekly export" in row and "view" in row and token not in row
        shoot(page, "tokens")
        page.goto(f"{live.url}/admin/tokens")  # shown once: not on the page again
        assert page.locator("#new-token").count() == 0
        viewer.close()
