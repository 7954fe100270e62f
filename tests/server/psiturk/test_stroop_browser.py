"""psiTurk 3.3.1's own Stroop example, unmodified, in headless Chromium: /ad, the consent popup, the
instructions, all nine trials, the questionnaire, and the MTurk submit form or the Prolific
redirect; a reload and an offline spell mid-task lose nothing. Screenshots go to
test-artifacts/psiturk/."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import sqlalchemy as sa

from humanlike.server import database
from humanlike.server.extensions import db
from humanlike.server.platforms import participant_code
from humanlike.server.tables.core import Participant
from humanlike.server.tables.psiturk import PsiturkAssignment, PsiturkTrial
from tests.e2e.conftest import LiveServer
from tests.server.psiturk.conftest import make_app

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "psiturk"
KEYS = {"red": "r", "green": "g", "blue": "b"}
#: records psiTurk's example writes: instructions Begin + 4 page turns, 9 trials, questionnaire 2
N_RECORDS = 1 + 4 + 9 + 2


@pytest.fixture
def server(database_url, stroop_project):
    app = make_app(database_url, stroop_project, TESTING=False)
    live = LiveServer(app)
    yield live
    live.stop()
    database.dispose(app)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def records(app, uniqueid: str) -> list[dict]:
    with app.app_context():
        part = db.session.execute(sa.select(PsiturkAssignment).where(
            PsiturkAssignment.uniqueid == uniqueid)).scalar_one()
        rows = db.session.execute(sa.select(PsiturkTrial.position, PsiturkTrial.record).where(
            PsiturkTrial.assignment_id == part.id).order_by(PsiturkTrial.position)).all()
    assert [p for p, _ in rows] == list(range(len(rows)))  # each record once, no gap
    return [json.loads(r) for _, r in rows]


def participant(app, uniqueid: str) -> tuple[Participant, PsiturkAssignment]:
    with app.app_context():
        part = db.session.execute(sa.select(PsiturkAssignment).where(
            PsiturkAssignment.uniqueid == uniqueid)).scalar_one()
        row = db.session.get(Participant, part.participant_id)
        db.session.expunge_all()
        return row, part


def open_task(context, page, ad_url: str, label: str):
    """The ad, its Begin button, the consent popup and its agree button: the task page."""
    page.goto(ad_url)
    shot(page, f"{label}-1-ad")
    with context.expect_page() as opened:
        page.get_by_role("button", name="Begin Experiment").click()
    popup = opened.value
    popup.wait_for_load_state()
    shot(popup, f"{label}-2-consent")
    popup.get_by_role("button", name="I agree").click()
    popup.wait_for_url("**/exp?**")
    return popup


def do_instructions(popup, label: str) -> None:
    for i in range(4):
        popup.locator(".continue").wait_for()
        if i == 0:
            shot(popup, f"{label}-3-instructions")
        popup.locator(".continue").click()


def do_trials(popup, n: int, label: str, done: int = 0) -> None:
    for i in range(n):
        word = popup.locator("#word")
        word.wait_for()
        color = word.evaluate("el => el.style.color")
        if i == 0:
            shot(popup, f"{label}-4-trial")
        popup.keyboard.press(KEYS[color])
        popup.wait_for_function("n => document.querySelectorAll('#word').length === 0 || "
                                "window.psiTurk.getTrialData().length > n", arg=5 + done + i)


def do_questionnaire(popup, label: str) -> None:
    popup.locator("#engagement").wait_for()
    popup.select_option("#engagement", "4")
    popup.select_option("#difficulty", "2")
    shot(popup, f"{label}-5-questionnaire")


def test_mturk_sandbox_worker_runs_the_stroop_example(chromium, server):
    submitted: list[dict] = []
    context = chromium.new_context()
    context.route("https://workersandbox.mturk.com/**", lambda route: (
        submitted.append(parse_qs(route.request.post_data or "")),
        route.fulfill(status=200, content_type="text/html", body="<h1>MTurk got it</h1>")))
    page = context.new_page()
    popup = open_task(context, page, server.url + "/ad?hitId=H1&assignmentId=A1&workerId=W1"
                      "&mode=sandbox", "mturk")
    do_instructions(popup, "mturk")
    do_trials(popup, 9, "mturk")
    do_questionnaire(popup, "mturk")
    popup.click("#next")
    popup.wait_for_event("close", timeout=15000)  # closepopup.html reloads the ad and closes
    page.get_by_role("button", name="Complete HIT").wait_for()
    shot(page, "mturk-6-submit")
    page.get_by_role("button", name="Complete HIT").click()
    page.wait_for_selector("text=MTurk got it")
    assert submitted == [{"assignmentId": ["A1"], "hitId": ["H1"], "workerId": ["W1"]}]

    data = records(server.app, "W1:A1")
    assert len(data) == N_RECORDS
    tests = [r["trialdata"] for r in data if r["trialdata"].get("phase") == "TEST"]
    assert len(tests) == 9 and all(t["hit"] for t in tests)
    assert sorted(t["word"] for t in tests) == sorted(
        ["SHIP", "MONKEY", "ZAMBONI", "RED", "GREEN", "BLUE", "GREEN", "BLUE", "RED"])
    with server.app.app_context():
        from humanlike.server.tables.psiturk import blob

        stored = blob(db.session.execute(sa.select(PsiturkAssignment).where(
            PsiturkAssignment.uniqueid == "W1:A1")).scalar_one())
    assert stored["questiondata"] == {"engagement": "4", "difficulty": "2"}
    assert stored["eventdata"][0]["eventtype"] == "initialized"
    row, part = participant(server.app, "W1:A1")
    assert (row.platform, row.platform_id, row.assignment_id, row.status) == (
        "mturk", "W1", "A1", "submitted")
    assert part.status == 4 and part.mode == "sandbox"
    assert part.bonus == pytest.approx(0.18)  # custom.py's compute_bonus: 0.02 per correct trial
    context.close()


def test_prolific_participant_runs_the_stroop_example(chromium, server):
    context = chromium.new_context()
    page = context.new_page()
    popup = open_task(context, page, server.url + "/ad?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1",
                      "prolific")
    do_instructions(popup, "prolific")
    do_trials(popup, 9, "prolific")
    do_questionnaire(popup, "prolific")
    # the reloaded ad redirects to Prolific (not reachable here: the redirect itself is checked)
    with page.expect_response(lambda r: "/ad?" in r.url and r.status == 302,
                              timeout=15000) as redirected:
        popup.click("#next")
    location = redirected.value.headers["location"]
    assert location.startswith("https://app.prolific.com/submissions/complete?cc=")
    assert len(records(server.app, "P1:X1")) == N_RECORDS
    row, _part = participant(server.app, "P1:X1")
    assert (row.platform, row.platform_id, row.study_id, row.session_id, row.status) == (
        "prolific", "P1", "S1", "X1", "completed")
    with server.app.app_context():  # the participant's own code: an HMAC, not its public id
        assert location.endswith("cc=" + participant_code(row.public_id))
    context.close()


def test_reload_mid_task_loses_nothing(chromium, server):
    context = chromium.new_context()
    page = context.new_page()
    popup = open_task(context, page, server.url + "/ad?hitId=H2&assignmentId=A2&workerId=W2"
                      "&mode=sandbox", "reload")
    popup.on("dialog", lambda dialog: dialog.accept())  # psiTurk's "you opt out" question
    do_instructions(popup, "reload")
    do_trials(popup, 4, "reload")
    popup.reload()
    shot(popup, "reload-after")
    deadline = time.monotonic() + 10
    while len(records(server.app, "W2:A2")) < 9 and time.monotonic() < deadline:
        time.sleep(0.1)
    data = records(server.app, "W2:A2")
    assert len(data) == 5 + 4  # instructions and the four trials done before the reload
    _row, part = participant(server.app, "W2:A2")
    assert part.status == 6  # psiTurk's QUITEARLY: the reload opted out, as in psiTurk
    assert "1008" in popup.content()  # psiTurk's error page: started, cannot restart
    context.close()


def test_offline_spell_mid_task_loses_nothing(chromium, server):
    context = chromium.new_context()
    page = context.new_page()
    popup = open_task(context, page, server.url + "/ad?hitId=H3&assignmentId=A3&workerId=W3"
                      "&mode=sandbox", "offline")
    do_instructions(popup, "offline")
    do_trials(popup, 3, "offline")
    context.set_offline(True)
    do_trials(popup, 6, "offline", done=3)
    do_questionnaire(popup, "offline")
    popup.click("#next")  # the save fails: the example offers to resubmit
    popup.get_by_role("button", name="Resubmit").wait_for()
    shot(popup, "offline-resubmit")
    context.set_offline(False)
    popup.get_by_role("button", name="Resubmit").click()
    popup.wait_for_event("close", timeout=15000)
    page.get_by_role("button", name="Complete HIT").wait_for()
    data = records(server.app, "W3:A3")
    assert len(data) == N_RECORDS
    assert [r["current_trial"] for r in data] == list(range(N_RECORDS))
    context.close()
