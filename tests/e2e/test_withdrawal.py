"""Withdrawal in a real browser: mid-study from the task page's header link, and after completion
from the completion page (the debrief shows the link too); the confirmation page, the deleted page,
and nothing left in the database or in the browser's storage (screenshots kept)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.core import AuditEntry, Participant, Trial
from tests.e2e.conftest import serving
from tests.e2e.participant_driver import STATE_JS, Played, play
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "withdrawal"
STORAGE_JS = """() => Object.keys(localStorage).concat(Object.keys(sessionStorage))
  .filter(k => k.startsWith('humanlike'))"""


@pytest.fixture
def server(database_url, tmp_path):
    spec = write_small_experiment(tmp_path / "exp")
    spec.write_text(spec.read_text().replace('platform = "prolific"', 'platform = "local"'))
    with serving(database_url, spec) as live:
        yield live


def stored(app) -> tuple[int, int]:
    with app.app_context():
        return (db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar_one(),
                db.session.execute(sa.select(sa.func.count()).select_from(Trial)).scalar_one())


def confirm_and_check(page, server, name: str) -> None:
    page.wait_for_selector("#withdraw-confirm")
    page.screenshot(path=str(SHOTS / f"{name}-confirm.png"), full_page=True)
    assert page.input_value("#withdraw-token")  # the token came from this browser's storage
    page.click("#withdraw-confirm")
    page.wait_for_selector("#withdraw-done")
    page.screenshot(path=str(SHOTS / f"{name}-deleted.png"), full_page=True)
    assert page.evaluate(STORAGE_JS) == []


def test_withdrawing_mid_study_and_after_completion_in_the_browser(server, chromium):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = chromium.new_context(viewport={"width": 1100, "height": 760})
    page = context.new_page()
    page.goto(f"{server.url}/start/small")
    play(page, Played(), max_trials=3)
    page.wait_for_function(f"() => ({STATE_JS})() === 'rating'")
    page.screenshot(path=str(SHOTS / "task-header.png"))
    assert stored(server.app)[1] >= 3
    page.click("#withdraw-link")
    confirm_and_check(page, server, "mid-study")
    assert stored(server.app) == (0, 0)

    second = context.new_page()
    second.goto(f"{server.url}/start/small")
    play(second, Played(), max_trials=15)
    second.wait_for_selector("#debrief-withdraw")
    second.screenshot(path=str(SHOTS / "debrief.png"), full_page=True)
    play(second, Played(), until=f"{server.url}/done/")
    second.wait_for_selector("#withdraw-link")
    second.screenshot(path=str(SHOTS / "done.png"), full_page=True)
    assert stored(server.app)[1] > 10
    second.click("#withdraw-link")
    confirm_and_check(second, server, "after-completion")
    assert stored(server.app) == (0, 0)
    with server.app.app_context():
        phases = sorted(e.detail["phase"] for e in db.session.execute(
            sa.select(AuditEntry).where(AuditEntry.action == "withdraw")).scalars())
    assert phases == ["after_completion", "mid_study"]
    context.close()
