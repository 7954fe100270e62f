"""Display calibration and frame timing in a real browser, end to end (issue 30).

Chromium's display runs at whatever rate the machine gives headless Chromium, so each test installs
a controlled frame clock before the page loads: requestAnimationFrame callbacks come every
1000/hz ms (a timer) with timestamps exactly one frame apart, never skipping one (a display at hz
with no dropped frames). The clock can be stopped and stepped by hand, which puts the blind-spot
ball a chosen number of frames from its start when the test presses Space: the test gives the card
and blind-spot answers, and checks the pixels per degree, the 4-degree image's rendered size, the
stored record, whole frames at 60 and 120 Hz, the certificate, and the polite refusal at 144 Hz.
Screenshots go to /tmp/shots/issue30 (looked at by hand).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.participants import display
from humanlike.server.tables.core import Participant, Trial
from tests.e2e import participant_driver
from tests.e2e.conftest import serving
from tests.e2e.participant_driver import Played, play
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots/issue30")
DISPLAY = """
[display]
calibration = true
refresh_hz = [60, 120, 144]
whole_frames = true
max_frame_miss = 1
"""

FRAME_CLOCK = """
(() => {
  const frame = 1000 / %(hz)s;
  let queue = [], nextId = 0, k = 0, base = performance.now(), manual = false, timer = null;
  function run() {
    k += 1;
    const t = base + k * frame, due = queue;
    queue = [];
    due.forEach(([, cb]) => cb(t));
  }
  function tick() { timer = null; if (!manual) { run(); schedule(); } }
  function schedule() { if (timer === null && !manual && queue.length) timer = setTimeout(tick, frame); }
  window.requestAnimationFrame = (cb) => { nextId += 1; queue.push([nextId, cb]); schedule(); return nextId; };
  window.cancelAnimationFrame = (id) => { queue = queue.filter(([j]) => j !== id); };
  window.__frames = {
    manual() { manual = true; if (timer !== null) { clearTimeout(timer); timer = null; } },
    // back to real time; virtual time may lag event times but never runs ahead of them
    auto() { manual = false; base = Math.min(base, performance.now() - k * frame); schedule(); },
    step(n) { for (let i = 0; i < n; i++) run(); },
  };
})();
"""


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory) -> Path:
    path = write_small_experiment(tmp_path_factory.mktemp("display"))
    text = path.read_text().replace(
        '[presentation]\nmode = "until_response"',
        '[presentation]\nmode = "duration"\nduration_ms = 200\nimage_height_deg = 4')
    text = text.replace("catch_trials = 2\nrepeats = 2", "catch_trials = 1\nrepeats = 1\nmax_trials = 4")
    path.write_text(text + DISPLAY)
    return path


@pytest.fixture
def server(database_url, spec_path):
    with serving(database_url, spec_path) as live:
        yield live


def open_task(chromium, server, hz: float, who: str):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.route("https://app.prolific.com/**", lambda route: route.fulfill(
        status=200, body="<h1>Prolific (test double)</h1>", content_type="text/html"))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.add_init_script(FRAME_CLOCK % {"hz": hz})
    page.goto(f"{server.url}/start/small?PROLIFIC_PID={who}&STUDY_ID=s1&SESSION_ID=x{who}")
    page.wait_for_selector("#consent-agree:not([disabled])")
    page.keyboard.press("Enter")
    return context, page, errors


def calibrate(page, card_px: int, sweep_frames: list[int], shots: bool) -> dict:
    """Answer the card and blind-spot screens; returns what the answers were in pixels."""
    page.wait_for_selector(".hl-calibration[data-phase='card']")
    page.fill("#card-size", str(card_px))
    if shots:
        page.screenshot(path=str(SHOTS / "calibration-card.png"))
    page.click("#card-done")
    page.wait_for_selector(".hl-calibration[data-phase='blind_spot']")
    page.evaluate("() => window.__frames.manual()")
    offsets = []
    for n in sweep_frames:
        page.keyboard.press("Space")  # the ball starts
        page.evaluate(f"() => window.__frames.step({n})")
        offsets.append(float(page.get_attribute("#blind-field", "data-ball-offset")))
        if shots and not offsets[1:]:
            page.screenshot(path=str(SHOTS / "calibration-blind-spot.png"))
        page.keyboard.press("Space")  # it disappeared
    page.evaluate("() => window.__frames.auto()")
    return {"card_px": card_px, "offsets": offsets}


@pytest.mark.parametrize("hz, requested", [(60, 12), (120, 24)])
def test_calibrated_degrees_and_whole_frames_at_the_forced_rate(chromium, server, hz, requested,
                                                               monkeypatch):
    SHOTS.mkdir(parents=True, exist_ok=True)
    # answer a rating only once its image is hidden (the response would otherwise end it early)
    monkeypatch.setattr(participant_driver, "STATE_JS", participant_driver.STATE_JS.replace(
        "r.dataset.phase === 'loading'", "r.dataset.phase === 'loading' || r.dataset.phase === 'stimulus'"))
    context, page, errors = open_task(chromium, server, hz, f"p{hz}")
    try:
        answers = calibrate(page, 323, [150, 152, 149, 151, 150], shots=hz == 60)
        # the ball starts 15 % of the field left of the square and moves 2 px a frame
        start = answers["offsets"][0] - 2 * 150
        assert answers["offsets"] == [start + 2 * n for n in [150, 152, 149, 151, 150]]
        # independent of the code under test: the closed forms of Li et al. (2020)
        ppmm = 323 / 85.6
        distance = (sum(answers["offsets"]) / 5 / ppmm) / math.tan(math.radians(13.5))
        ppd = ppmm * 2 * distance * math.tan(math.radians(0.5))
        # through the instructions and the block's introduction to the first (practice) rating
        for _ in range(4):
            page.wait_for_selector(".hl-rating, #jspsych-html-button-response-btngroup button")
            if page.query_selector(".hl-rating"):
                break
            participant_driver.press_button_screen(page)
        page.wait_for_selector(".hl-rating[data-phase='stimulus']")
        page.evaluate("() => window.__frames.manual()")  # hold the image on screen
        height = page.eval_on_selector(".hl-rating img.hl-stimulus", "img => img.getBoundingClientRect().height")
        assert height == round(4 * ppd)
        if hz == 60:
            page.screenshot(path=str(SHOTS / "stimulus-4-degrees.png"))
        page.evaluate("() => window.__frames.auto()")
        play(page, Played(), until="https://app.prolific.com/")
        assert errors == []
    finally:
        context.close()
    with server.app.app_context():
        participant = db.session.execute(
            sa.select(Participant).where(Participant.platform_id == f"p{hz}")).scalar_one()
        [record] = db.session.execute(sa.select(display.DisplayCalibration).where(
            display.DisplayCalibration.participant_id == participant.id)).scalars().all()
        trials = db.session.execute(sa.select(Trial).where(
            Trial.participant_id == participant.id, Trial.trial_type == "rating")).scalars().all()
        cert = display.participant_certificate(participant, participant.experiment.spec)
    assert record.suitable and record.refresh_hz == pytest.approx(hz, rel=1e-3)
    assert record.px_per_mm == pytest.approx(ppmm, rel=1e-9)
    assert record.viewing_distance_mm == pytest.approx(distance, rel=1e-9)
    assert record.px_per_deg == pytest.approx(ppd, rel=1e-9)
    assert record.image_height_px == round(4 * ppd)
    assert record.detail["blind_spot_px"] == answers["offsets"]
    assert trials and {t.frames for t in trials} == {requested}
    assert [t.presented_ms for t in trials] == pytest.approx([200.0] * len(trials), abs=0.1)
    [row] = cert["by_type"]
    assert row["requested_frames"] == requested and row["frames_shown"] == requested
    assert row["n_off"] == 0 and row["max_frame_miss"] == 0
    assert row["duration_error_mean_ms"] == pytest.approx(0.0, abs=0.1)
    assert row["n_timed"] == sum(not t.practice for t in trials)


def test_a_144_hz_display_gets_the_polite_screen_before_any_trial(chromium, server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context, page, errors = open_task(chromium, server, 144, "p144")
    try:
        page.wait_for_selector("[data-screen='unsuitable']")
        assert page.get_attribute("[data-screen='unsuitable']", "data-reason") == "whole_frames"
        assert "28.80 frames at 144.0 Hz" in page.text_content("#unsuitable-detail")
        page.screenshot(path=str(SHOTS / "unsuitable-144hz.png"))
        assert page.query_selector(".hl-calibration") is None and errors == []
    finally:
        context.close()
    with server.app.app_context():
        participant = db.session.execute(
            sa.select(Participant).where(Participant.platform_id == "p144")).scalar_one()
        [record] = db.session.execute(sa.select(display.DisplayCalibration)).scalars().all()
        n_trials = db.session.execute(sa.select(sa.func.count()).select_from(Trial)).scalar_one()
    assert not record.suitable and record.reason == "whole_frames" and n_trials == 0
    assert participant.refresh_hz == pytest.approx(144, rel=1e-3)


def test_implausible_card_answers_are_asked_again_then_end_politely(chromium, server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context, page, errors = open_task(chromium, server, 60, "pcard")
    try:
        page.wait_for_selector(".hl-calibration[data-phase='card']")
        for attempt in range(3):  # 100 px for 85.6 mm: 1.17 px/mm, below the plausible 1.5
            page.fill("#card-size", "100")
            page.click("#card-done")
            if attempt < 2:
                page.wait_for_function("() => document.querySelector('#card-notice').textContent.length > 0")
                if attempt == 0:
                    page.screenshot(path=str(SHOTS / "calibration-card-retry.png"))
        page.wait_for_selector("[data-screen='unsuitable']")
        assert page.get_attribute("[data-screen='unsuitable']", "data-reason") == "calibration_failed"
        assert errors == []
    finally:
        context.close()
    with server.app.app_context():
        [record] = db.session.execute(sa.select(display.DisplayCalibration)).scalars().all()
        n_trials = db.session.execute(sa.select(sa.func.count()).select_from(Trial)).scalar_one()
    assert not record.suitable and record.reason == "calibration_failed" and n_trials == 0
    assert record.px_per_deg is None


def test_an_implausible_viewing_distance_is_measured_again(chromium, server):
    context, page, errors = open_task(chromium, server, 60, "pblind")
    try:
        # 1000 px for 85.6 mm (11.7 px/mm: plausible); Space at once puts the ball at its start,
        # about 184 px from the square: 184 / 11.7 / tan(13.5 deg) = 65 mm, closer than 200 mm
        calibrate(page, 1000, [0] * 5, shots=False)
        page.wait_for_function("() => document.querySelector('#blind-notice').textContent.includes('unlikely')")
        assert page.text_content("#blind-left") == "5"
        page.evaluate("() => window.__frames.manual()")
        offsets = []
        for _ in range(5):  # now 2 px a frame for 300 frames more: about 784 px, 275 mm
            page.keyboard.press("Space")
            page.evaluate("() => window.__frames.step(300)")
            offsets.append(float(page.get_attribute("#blind-field", "data-ball-offset")))
            page.keyboard.press("Space")
        page.evaluate("() => window.__frames.auto()")
        page.wait_for_selector("#jspsych-html-button-response-btngroup button")  # the instructions
        assert errors == []
    finally:
        context.close()
    with server.app.app_context():
        [record] = db.session.execute(sa.select(display.DisplayCalibration)).scalars().all()
    ppmm = 1000 / 85.6
    assert record.suitable and record.detail["blind_spot_attempts"] == 2
    assert record.detail["blind_spot_px"] == offsets
    assert record.viewing_distance_mm == pytest.approx(
        sum(offsets) / 5 / ppmm / math.tan(math.radians(13.5)), rel=1e-9)


@pytest.fixture
def fullscreen_server(database_url, spec_path, tmp_path):
    import shutil

    folder = tmp_path / "full"
    shutil.copytree(spec_path.parent, folder)  # the same study, asking for full screen
    path = folder / spec_path.name
    path.write_text("fullscreen = true\n" + spec_path.read_text())
    with serving(database_url, path) as live:
        yield live


def test_full_screen_comes_before_the_display_is_measured(chromium, fullscreen_server):
    """A study in full screen asks for it before calibrating: the stimulus' fit is judged in the
    window the trials run in. Headless Chromium does not resize on full screen, so the test does
    (a 130-pixel-high window, 900 in full screen): a 4-degree image fits only the latter."""
    context, page, errors = open_task(chromium, fullscreen_server, 60, "pfull")
    try:
        page.set_viewport_size({"width": 1280, "height": 130})
        page.wait_for_selector("[data-screen='fullscreen']")
        assert page.query_selector(".hl-calibration") is None
        page.click("#jspsych-html-button-response-btngroup button")
        page.set_viewport_size({"width": 1280, "height": 900})  # what full screen gives
        calibrate(page, 323, [150, 152, 149, 151, 150], shots=False)
        page.wait_for_selector("#jspsych-html-button-response-btngroup button")  # the instructions
        assert page.query_selector("[data-screen='unsuitable']") is None and errors == []
        assert page.evaluate("() => document.fullscreenElement !== null")
    finally:
        context.close()
    with fullscreen_server.app.app_context():
        [record] = db.session.execute(sa.select(display.DisplayCalibration)).scalars().all()
    assert record.suitable and record.window_height == 900
    assert 0.9 * 130 < record.image_height_px <= 0.9 * 900  # 141 px: refused in the 130-px window
