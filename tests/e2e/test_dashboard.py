"""The researcher dashboard in headless Chromium: log in, watch a participant's progress rise while
they do the demo in a second browser context (no reload), open the participant page, bulk-approve
the QC-passing participants (a background job whose page follows its progress; one audit row
each) and double-click a bonus (paid once). Screenshots of
each page are written to test-artifacts/dashboard/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.live.panel import refresh_all
from humanlike.server.tables.core import AuditEntry, Participant, Payment
from tests.e2e.conftest import serving
from tests.e2e.participant_driver import Played, play
from tests.server.admin.dashboard_helpers import add_admin, run_participant
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
QUERY = "PROLIFIC_PID={pid}&STUDY_ID=demo-study&SESSION_ID=demo-session"


@pytest.fixture
def dashboard_server(database_url, demo_spec, tmp_path):
    small = write_small_experiment(tmp_path / "small")
    def setup(app):
        add_admin(app, "alice", "correct horse battery")

    with serving(database_url, demo_spec, small, setup=setup) as live:
        yield live


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
    # on a 1366-px laptop screen every column of the table is inside the window (issue 36.7)
    page.set_viewport_size({"width": 1366, "height": 768})
    edges = page.evaluate("""() => ({right: Math.max(...[...document.querySelectorAll(
        'table.participants th, table.participants td')].map(c => c.getBoundingClientRect().right)),
        width: document.documentElement.clientWidth})""")
    assert edges["right"] <= edges["width"], edges
    page.set_viewport_size({"width": 1400, "height": 1000})

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
    page.click("#analysis > summary")  # the analysis is folded below the participants table
    page.wait_for_selector("#panel [data-panel=computed]")
    shoot(page, "experiment-small-with-panel")
    page.click("button.preset")
    page.wait_for_selector("button.confirm-button")
    shoot(page, "confirm-bulk-approve")
    app.config["ACTION_INLINE_SECONDS"] = 0  # as a long bulk action: all of it in the background
    try:
        page.click("button.confirm-button")
        page.wait_for_selector("#job[data-job-status]")
        assert "/admin/jobs/" in page.url  # the job's page, following its progress
        page.wait_for_selector("#job[data-job-status=done] table.results")
    finally:
        app.config.pop("ACTION_INLINE_SECONDS")
        app.extensions["job_runner"].stop()
    shoot(page, "bulk-approve-results")
    page.goto(f"{url}/admin/experiments/small")
    page.wait_for_selector('#jobs li[data-job-status="done"]')  # listed on the experiment page
    shoot(page, "experiment-small-with-job")
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
    from humanlike.server.tables.core import Trial

    with app.app_context():
        return db.session.execute(sa.select(sa.func.count()).select_from(Trial).join(Participant)
                                  .where(Participant.public_id == public_id)).scalar_one()


SHOTS = ARTIFACTS / "at-300"


@pytest.fixture
def small_server(database_url, tmp_path):
    """The small rating study served live, with 300 simulated participants."""
    small = write_small_experiment(tmp_path / "small")
    def setup(app):
        add_admin(app, "alice", "correct horse battery")
        three_hundred(app)

    with serving(database_url, small, setup=setup) as live:
        yield live


def three_hundred(app) -> None:
    """300 participants of the small study in a spread of statuses and durations: one enters
    through the study link, the others are copies of its row with their own ids, recorded as
    simulated (``participant.simulated``, as the server records `humanlike simulate`'s)."""
    import datetime as dt
    import secrets

    from humanlike.server.tables.core import Event, utcnow
    from tests.server.conftest import enter

    enter(app.test_client(), "PROLIFIC_PID=SIM-0000&STUDY_ID=sim-study&SESSION_ID=SIM-0000-s")
    statuses = ("completed", "started", "approved", "submitted", "completed", "timed_out")
    now = utcnow()
    with app.app_context():
        seed = db.session.execute(sa.select(Participant)).scalar_one()
        rows = []
        for i in range(1, 300):
            started = now - dt.timedelta(minutes=30 + i % 40)
            status = statuses[i % len(statuses)]
            finished = status in ("completed", "approved", "submitted")
            rows.append({
                "public_id": secrets.token_hex(8), "experiment_id": seed.experiment_id,
                "platform": seed.platform, "platform_id": f"SIM-{i:04d}",
                "study_id": "sim-study", "session_id": f"SIM-{i:04d}-s",
                "condition": seed.condition, "spec_version_id": seed.spec_version_id,
                "token_hash": seed.token_hash, "seed": i, "timeline": seed.timeline,
                "n_trials": seed.n_trials, "status": status, "created_at": started,
                "consented_at": started, "started_at": started,
                "completed_at": started + dt.timedelta(minutes=8 + (i * 7) % 15) if finished else None,
                "bonus": 0.25 * (i % 3) if status == "approved" else None, "simulated": True})
        db.session.execute(sa.insert(Participant), rows)
        ids = db.session.execute(sa.select(Participant.id)).scalars().all()
        db.session.execute(sa.insert(Event), [
            {"participant_id": pid, "type": "environment", "server_time": now,
             "value": {"screen_width": 1920, "screen_height": 1080, "simulated": True}}
            for pid in ids])
        db.session.commit()


def ticked_ids(page) -> list[str]:
    return page.eval_on_selector_all(
        "#participant-rows input[name=participant]:checked", "boxes => boxes.map(b => b.value)")


def refreshes(page) -> int:
    return int(page.get_attribute("#participant-rows", "data-refreshes") or 0)


def test_ticks_survive_live_refreshes_and_the_bulk_action_acts_on_exactly_those(small_server,
                                                                              chromium):
    app, url = small_server.app, small_server.url
    SHOTS.mkdir(parents=True, exist_ok=True)
    admin = chromium.new_context(viewport={"width": 1500, "height": 1000})
    page = admin.new_page()
    page.set_default_timeout(20000)
    page.goto(f"{url}/admin/login")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.goto(f"{url}/admin/experiments/small?status=completed")
    page.wait_for_selector("tr[data-participant]")
    page.screenshot(path=str(SHOTS / "experiment-300-top.png"))
    page.screenshot(path=str(SHOTS / "experiment-300-full.png"), full_page=True)
    rows = page.eval_on_selector_all("#participant-rows tr[data-participant]",
                                     "rows => rows.map(r => r.dataset.participant)")
    chosen = rows[1:6]
    for pid in chosen:
        page.check(f'tr[data-participant="{pid}"] input[name=participant]')
    assert page.inner_text("#ticked-count") == "5"
    page.evaluate("() => { window.__noReload = true; }")

    # three live refreshes, while the numbers change underneath: a bonus for a ticked row and
    # another row's QC-relevant status, so cells are rewritten in place
    start = refreshes(page)
    with app.app_context():
        db.session.execute(sa.update(Participant).where(Participant.public_id == chosen[0])
                           .values(bonus=2))
        db.session.commit()
    page.wait_for_function(f"() => Number(document.getElementById('participant-rows')"
                           f".dataset.refreshes || 0) >= {start + 3}", timeout=15000)
    assert page.evaluate("() => window.__noReload === true"), "the page reloaded"
    assert sorted(ticked_ids(page)) == sorted(chosen)
    assert page.inner_text(f'tr[data-participant="{chosen[0]}"] td[data-col="bonus"]') == "2.00"
    page.screenshot(path=str(SHOTS / "experiment-300-ticked.png"))

    # the bulk action: exclude from analysis, reviewed, confirmed; it acts on exactly those five
    page.select_option("select[name=action]", "exclude")
    page.click("#review-ticked")
    page.wait_for_selector("button.confirm-button")
    assert page.locator(".error").count() == 0  # the confirm page opens clean
    listed = page.eval_on_selector_all("ul.who input[name=participant]",
                                       "boxes => boxes.map(b => b.value)")
    assert sorted(listed) == sorted(chosen)
    page.fill("input[name=reason]", "pilot: the instructions were changed after these five")
    page.screenshot(path=str(SHOTS / "confirm-exclude-five.png"), full_page=True)
    page.click("button.confirm-button")
    page.wait_for_selector("table.results")
    with app.app_context():
        excluded = db.session.execute(sa.select(Participant.public_id).where(
            Participant.analysis_override == "exclude")).scalars().all()
        audits = db.session.execute(sa.select(AuditEntry.target).where(
            AuditEntry.action == "exclude")).scalars().all()
    assert sorted(excluded) == sorted(chosen) and sorted(audits) == sorted(chosen)

    # the reject confirmation opens clean and makes the researcher choose a category
    page.goto(f"{url}/admin/experiments/small?status=completed")
    page.check(f'tr[data-participant="{rows[7]}"] input[name=participant]')
    page.select_option("select[name=action]", "reject")
    page.click("#review-ticked")
    page.wait_for_selector("button.confirm-button")
    assert page.locator(".error").count() == 0
    assert page.eval_on_selector("select[name=category]", "s => s.value") == ""
    assert page.is_checked("input[type=checkbox][name=exclude_too]")
    page.screenshot(path=str(SHOTS / "confirm-reject.png"), full_page=True)

    # the analysis section is folded below the table and remembers being opened
    page.goto(f"{url}/admin/experiments/small")
    page.wait_for_selector("tr[data-participant]")
    assert page.evaluate("() => document.getElementById('analysis').open") is False
    page.click("#analysis > summary")
    page.goto(f"{url}/admin/experiments/small")
    page.wait_for_selector("tr[data-participant]")
    assert page.evaluate("() => document.getElementById('analysis').open") is True
    page.screenshot(path=str(SHOTS / "experiment-300-analysis-open.png"), full_page=True)
    page.goto(f"{url}/admin/audit?action=exclude")
    page.screenshot(path=str(SHOTS / "audit-filtered.png"), full_page=True)
    admin.close()
