"""The researcher dashboard in headless Chromium: log in, watch a participant's progress rise while
they do the demo in a second browser context (no reload), open the participant page, bulk-approve
the QC-passing participants (one audit row each) and double-click a bonus (paid once). Screenshots of
each page are written to test-artifacts/dashboard/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database, experiments
from humanlike.server.admin.panel import refresh_all
from humanlike.server.extensions import db
from humanlike.server.models import AuditEntry, Participant, Payment
from tests.e2e.conftest import LiveServer
from tests.e2e.participant_driver import Played, play
from tests.server.admin.dashboard_helpers import add_admin, run_participant
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
QUERY = "PROLIFIC_PID={pid}&STUDY_ID=demo-study&SESSION_ID=demo-session"


@pytest.fixture
def dashboard_server(database_url, demo_spec, tmp_path):
    small = write_small_experiment(tmp_path / "small")
    app = create_app({"SECRET_KEY": "e2e", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(demo_spec), str(small)]})
    database.upgrade(app)
    experiments.sync_all(app)
    add_admin(app, "alice", "correct horse battery")
    live = LiveServer(app)
    yield live
    live.stop()
    database.dispose(app)


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def stored_of(page, public_id: str) -> int:
    cell = page.locator(f'tr[data-participant="{public_id}"] td.progress')
    return int(cell.get_attribute("data-stored"))


def public_id_of(app, platform_id: str) -> str:
    with app.app_context():
        return db.session.execute(sa.select(Participant.public_id).where(
            Participant.platform_id == platform_id)).scalar_one()


def test_researcher_watches_judges_and_pays_without_reloads(dashboard_server, chromium):
    app, url = dashboard_server.app, dashboard_server.url
    admin = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = admin.new_page()
    page.set_default_timeout(20000)
    page.goto(f"{url}/admin/")
    assert "/admin/login" in page.url
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector('tr[data-slug="demo"]')

    # a participant starts the demo in a second browser context
    participant = chromium.new_context(viewport={"width": 1280, "height": 900})
    task = participant.new_page()
    task.set_default_timeout(20000)
    task.goto(f"{url}/start/demo?" + QUERY.format(pid="watched-1"))
    played = play(task, Played(), max_trials=2)
    # the experiments page's numbers follow without a reload
    page.evaluate("() => { window.__noReload = true; }")
    page.wait_for_function("() => document.querySelector("
                           "'tr[data-slug=\"demo\"] td[data-col=\"total\"]').textContent.trim() === '1'")
    shoot(page, "experiments")

    pid = public_id_of(app, "watched-1")
    page.goto(f"{url}/admin/experiments/demo")
    page.wait_for_selector(f'tr[data-participant="{pid}"]')
    before = stored_of(page, pid)
    page.evaluate("() => { window.__noReload = true; }")
    play(task, played, max_trials=3)
    page.wait_for_function(
        f"""() => Number(document.querySelector('tr[data-participant="{pid}"] td.progress')
            .dataset.stored) > {before}""", timeout=10000)
    assert page.evaluate("() => window.__noReload === true"), "the page reloaded"
    assert stored_of(page, pid) > before
    shoot(page, "experiment")

    # the participant page lists the trials stored so far
    page.click(f'tr[data-participant="{pid}"] a')
    page.wait_for_selector("table.trials")
    assert page.locator("tr[data-trial]").count() == stored_of_db(app, pid)
    shoot(page, "participant")

    # three participants of the small study: two careful (pass QC), one careless (fails catch)
    client = app.test_client()
    passing = [public_id_of(app, run_participant(client, f"PROLIFIC_PID=good{i}&STUDY_ID=s&SESSION_ID=x",
                                                 careful=True) and f"good{i}") for i in (1, 2)]
    failing = run_participant(client, "PROLIFIC_PID=bad1&STUDY_ID=s&SESSION_ID=x")
    with app.app_context():
        refresh_all()  # what the background worker does: QC rows and the live panel
    page.goto(f"{url}/admin/experiments/small")
    page.wait_for_selector("#panel [data-panel=computed]")
    shoot(page, "experiment-small-with-panel")
    page.click("button.preset")
    page.wait_for_selector("button.confirm-button")
    shoot(page, "confirm-bulk-approve")
    page.click("button.confirm-button")
    page.wait_for_selector("table.results")
    shoot(page, "bulk-approve-results")
    with app.app_context():
        rows = db.session.execute(sa.select(AuditEntry).where(AuditEntry.action == "approve")
                                  ).scalars().all()
        assert sorted(r.target for r in rows) == sorted(passing)
        assert all(r.detail["ok"] and r.detail["local_only"] for r in rows)
        status = dict(db.session.execute(sa.select(Participant.public_id, Participant.status)
                                         .where(Participant.public_id.in_([*passing, failing]))).all())
    assert status == {passing[0]: "approved", passing[1]: "approved", failing: "completed"}

    # a double-clicked bonus is paid once, and so is a retry of the same form
    applies: list[str] = []
    page.on("request", lambda r: applies.append(r.url)
            if r.method == "POST" and r.url.endswith("/actions/apply") else None)
    page.goto(f"{url}/admin/participants/{passing[0]}")
    page.select_option("select[name=action]", "bonus")
    page.click("section.actions button[type=submit]")
    page.fill("input[name=amount]", "1.50")
    page.fill("input[name=reason]", "accuracy bonus")
    page.dblclick("button.confirm-button")
    page.wait_for_selector("table.results")
    page.go_back()  # the researcher retries: the confirmation form, submitted again
    page.wait_for_selector("button.confirm-button")
    page.fill("input[name=amount]", "1.50")
    page.fill("input[name=reason]", "accuracy bonus")
    page.click("button.confirm-button")
    page.wait_for_selector("table.results")
    assert "already recorded" in page.inner_text("table.results")
    with app.app_context():
        payments = db.session.execute(sa.select(Payment)).scalars().all()
        bonus = db.session.execute(sa.select(Participant.bonus).where(
            Participant.public_id == passing[0])).scalar_one()
        audits = db.session.execute(sa.select(AuditEntry).where(AuditEntry.action == "bonus")
                                    ).scalars().all()
    assert len(applies) >= 2 and len(audits) == len(applies)
    assert len(payments) == 1 and float(payments[0].amount) == 1.5
    assert float(bonus) == 1.5
    assert sum(1 for a in audits if a.detail.get("duplicate")) == len(audits) - 1
    shoot(page, "bonus-result")
    page.goto(f"{url}/admin/audit")
    shoot(page, "audit")
    participant.close()
    admin.close()


def stored_of_db(app, public_id: str) -> int:
    from humanlike.server.models import Trial

    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(Trial).join(Participant)
                                  .where(Participant.public_id == public_id)).scalar_one()
