"""A psiTurk task written as the older psiTurk example and most public tasks write it,
``var psiturk = PsiTurk(uniqueId, adServerLoc);`` (no ``new``, no ``mode``), completes in headless
Chromium through the ad, the consent popup and the task in debug and sandbox modes, with every save
stored once. Its task.js (fixtures/legacy_task/, written for this test) exercises preloadPages and
showPage, doInstructions, recordTrialData, recordUnstructuredData, saveData with callbacks,
computeBonus (psiTurk's example custom.py) and completeHIT, and reads the template variables.
Screenshots go to test-artifacts/psiturk/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server import database
from humanlike.server.extensions import db
from humanlike.server.tables.psiturk import PsiturkAssignment
from tests.e2e.conftest import LiveServer
from tests.server.psiturk.conftest import make_app
from tests.server.psiturk.test_stroop_browser import participant, records, shot

pytestmark = pytest.mark.browser
FIXTURE = Path(__file__).parent / "fixtures" / "legacy_task"
N_TRIALS = 6
#: records the task writes: instructions Begin, two page turns (NextPage, FinishInstructions), trials
N_RECORDS = 1 + 2 + N_TRIALS


@pytest.fixture
def legacy_project(stroop_project) -> Path:
    """psiTurk's example project (its templates, libraries and custom.py) with the legacy task.js."""
    shutil.copy(FIXTURE / "task.js", stroop_project / "static" / "js" / "task.js")
    shutil.copy(FIXTURE / "templates" / "legacy-trial.html",
                stroop_project / "templates" / "legacy-trial.html")
    return stroop_project


@pytest.fixture
def server(database_url, legacy_project):
    app = make_app(database_url, legacy_project, TESTING=False)
    live = LiveServer(app)
    yield live
    live.stop()
    database.dispose(app)


@pytest.mark.parametrize("mode, ids", [
    ("debug", "hitId=debugH&assignmentId=debugA&workerId=debugW"),
    ("sandbox", "hitId=H1&assignmentId=A1&workerId=W1"),
])
def test_a_task_calling_psiturk_without_new_completes(chromium, server, mode, ids):
    uid = "{workerId}:{assignmentId}".format(**dict(p.split("=") for p in ids.split("&")))
    label = f"legacy-{mode}"
    context = chromium.new_context()
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    page = context.new_page()
    page.goto(f"{server.url}/ad?{ids}&mode={mode}")
    with context.expect_page() as opened:
        page.get_by_role("button", name="Begin Experiment").click()
    popup = opened.value
    popup.wait_for_load_state()
    popup.get_by_role("button", name="I agree").click()
    popup.wait_for_url("**/exp?**")
    popup.locator(".continue").wait_for()
    probe = popup.evaluate("() => window.legacyProbe")
    # psiTurk's own file is sloppy-mode code: called without `new`, `this` is the window
    assert probe["returnedWindow"] and probe["globalApi"] and probe["taskdataOnWindow"]
    assert probe["taskdataMode"] == "live"  # no mode passed: psiTurk's default
    shot(popup, f"{label}-1-instructions")
    for _ in range(2):
        popup.locator(".continue").click()
    for n in range(N_TRIALS):
        popup.locator("#respond").wait_for()
        assert popup.locator("#number").inner_text() == str(n + 1)
        if n == 0:
            shot(popup, f"{label}-2-trial")
        popup.locator("#respond").click()
        popup.wait_for_function("n => window.legacyProbe.saves.ok > n", arg=n)
    assert popup.evaluate("() => window.legacyProbe.saves") == {
        "ok": N_TRIALS, "failed": 0, "args": [True, "user data saved"]}
    popup.locator("#engagement").wait_for()
    popup.select_option("#engagement", "5")
    shot(popup, f"{label}-3-questionnaire")
    popup.click("#next")
    popup.wait_for_event("close", timeout=15000)  # completeHIT -> /complete -> closepopup.html
    page.get_by_role("button", name="Complete HIT").wait_for()
    shot(page, f"{label}-4-submit")
    assert errors == []

    data = records(server.app, uid)  # each record once, positions without a gap
    assert len(data) == N_RECORDS
    assert [r["current_trial"] for r in data] == list(range(N_RECORDS))
    tests = [r["trialdata"] for r in data if r["trialdata"].get("phase") == "TEST"]
    assert [t["trial"] for t in tests] == list(range(N_TRIALS))
    with server.app.app_context():
        from humanlike.server.tables.psiturk import blob

        stored = blob(db.session.execute(sa.select(PsiturkAssignment).where(
            PsiturkAssignment.uniqueid == uid)).scalar_one())
    answers = stored["questiondata"]
    row, part = participant(server.app, uid)
    assert answers["engagement"] == "5" and answers["saves_before_bonus"] == N_TRIALS
    assert answers["bonus_answer"] == {"bonusComputed": "success"}
    project = server.app.extensions["psiturk"].project
    assert answers["template_variables"] == {
        "uniqueId": uid, "condition": part.cond, "counterbalance": part.counterbalance,
        "codeversion": project.code_version, "contact_address": project.contact_email,
        "adServerLoc": "/complete", "mode": mode}
    assert project.code_version and "@" in project.contact_email
    assert stored["mode"] == "live" and part.mode == mode
    assert part.bonus == pytest.approx(0.02 * len([t for t in tests if t["hit"]]))
    assert part.status == 3 and row.status == "completed"
    context.close()


CALLS = {
    "new, with mode": "new PsiTurk('W9:A9', '/complete', 'sandbox')",
    "new, without mode": "new PsiTurk('W9:A9', '/complete')",
    "plain, with mode": "PsiTurk('W9:A9', '/complete', 'sandbox')",
    "plain, without mode": "PsiTurk('W9:A9', '/complete')",
    "called on an object": "PsiTurk.call(window.holder = {}, 'W9:A9', '/complete')",
}
OBSERVE = """(call) => {
  const made = eval(call);
  const isWindow = made === window;
  const added = Object.keys(window).filter(k => !window.keysBefore.includes(k)
                                                 && k !== "keysBefore" && k !== "file");
  const own = isWindow ? added.filter(k => k !== "holder") : Object.keys(made);
  return {isWindow, isInstance: made instanceof PsiTurk, onHolder: made === window.holder,
          own: own.sort(), globals: added.sort(),
          methods: own.filter(k => typeof made[k] === "function").sort(),
          mode: made.taskdata.get("mode"), id: made.taskdata.id,
          adServerLoc: made.taskdata.adServerLoc,
          pagesEmpty: JSON.stringify(made.pages) === "{}"};
}"""


def test_psiturk_js_is_called_as_psiturks_own_file_is(chromium, server, psiturk_wheel):
    """psiTurk 3.3.1's psiturk.js (from its wheel) is the oracle: called with or without ``new``,
    with or without ``mode`` (or on an object), ours gives the same ``this``, return value, API
    keys, task data mode and new globals."""
    project = Path(server.app.extensions["psiturk"].project.root)
    shutil.copy(psiturk_wheel / "psiturk_js" / "psiturk.js",
                project / "static" / "js" / "psiturk-3.3.1.js")
    shutil.copy(FIXTURE / "semantics.html", project / "templates" / "semantics.html")
    context = chromium.new_context()
    try:
        seen = {}
        for file in ("psiturk-3.3.1.js", "psiturk.js"):
            for name, call in CALLS.items():
                page = context.new_page()
                page.goto(f"{server.url}/semantics.html?file={file}")
                page.wait_for_function("() => typeof PsiTurk === 'function'")
                seen[file, name] = page.evaluate(OBSERVE, call)
                page.close()
        for name in CALLS:
            theirs, ours = seen["psiturk-3.3.1.js", name], seen["psiturk.js", name]
            assert ours == theirs, (name, ours, theirs)
        assert seen["psiturk.js", "plain, without mode"]["isWindow"]
        assert seen["psiturk.js", "new, without mode"]["mode"] == "live"
        assert seen["psiturk.js", "plain, with mode"]["mode"] == "sandbox"
        assert "recordTrialData" in seen["psiturk.js", "plain, without mode"]["globals"]
    finally:
        context.close()
