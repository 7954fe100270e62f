"""Browser tests of the jsPsych plugins `rating` and `triad` and of HumanlikeFrameClock.

Each test loads tests/e2e/plugin_harness/index.html (vendor jsPsych + our scripts, served from the
repository's static/ by a thread-local http.server), runs a small timeline with
`window.runHarness(timeline)`, drives it with Playwright's keyboard and mouse in headless Chromium,
and checks the trial data the plugin hands to jsPsych.finishTrial.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from PIL import Image
from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "static"
HARNESS = Path(__file__).resolve().parent / "plugin_harness"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
HARNESS_URL = "/tests/e2e/plugin_harness/index.html"
COLOURS = {
    "stim": (200, 40, 40),
    "mask": (128, 128, 128),
    "left": (40, 160, 40),
    "ref": (40, 40, 200),
    "right": (200, 200, 40),
}
DIGITS = [{"label": "one", "key": "1"}, {"label": "two", "key": "2"}, {"label": "ay", "key": "a"}]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves /static/ from the repository, the harness, and /img/ from a temporary folder."""

    mounts: ClassVar[dict[str, Path]] = {}

    def translate_path(self, path: str) -> str:
        path = path.split("?", 1)[0].split("#", 1)[0]
        for prefix, folder in self.mounts.items():
            if path.startswith(prefix):
                rel = Path(path[len(prefix) :])
                if ".." in rel.parts:
                    break
                return str(folder / rel)
        return str(Path("/nonexistent") / path.lstrip("/"))

    def end_headers(self) -> None:
        # Cacheable, so the pages of one browser context fetch jsPsych only once.
        self.send_header("Cache-Control", "max-age=600")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not (STATIC / "vendor" / "jspsych" / "jspsych.js").exists():
        pytest.fail("static/vendor is missing: run `make npm` first")
    images = tmp_path_factory.mktemp("img")
    for name, colour in COLOURS.items():
        Image.new("RGB", (48, 48), colour).save(images / f"{name}.png")
    mounts = {"/static/": STATIC, "/tests/e2e/plugin_harness/": HARNESS, "/img/": images}
    handler = type("Handler", (_Handler,), {"mounts": mounts})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser(chromium) -> Iterator[Browser]:
    """The session's one headless Chromium (tests/e2e/conftest.py): Playwright's sync API allows a
    single running instance per process."""
    yield chromium


@pytest.fixture(scope="module")
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context
    context.close()


@pytest.fixture
def page(context: BrowserContext, server: str) -> Iterator[Page]:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(server + HARNESS_URL)
    page.wait_for_function("typeof window.runHarness === 'function'")
    yield page
    page.close()
    assert errors == [], f"errors in the page: {errors}"


def start(page: Page, timeline: list[dict]) -> None:
    """Start the timeline without waiting for it to finish."""
    page.evaluate("tl => { window.harnessPromise = window.runHarness(tl); }", timeline)


def finish(page: Page) -> list[dict]:
    """Wait for the timeline to finish and return its trial data."""
    return page.evaluate("() => window.harnessPromise")


def wait_phase(page: Page, plugin: str, phase: str) -> None:
    page.wait_for_selector(f'.hl-{plugin}[data-phase="{phase}"]', state="attached", timeout=5000)


def rating(**params: object) -> dict:
    return {"type": "rating", "stimulus": "/img/stim.png", "categories": DIGITS, **params}


def triad(**params: object) -> dict:
    base = {
        "type": "triad",
        "reference": "/img/ref.png",
        "left": "/img/left.png",
        "right": "/img/right.png",
        "sequence": "seq-a",
        "s_left": 2,
        "s_ref": 4,
        "s_right": 7,
    }
    return {**base, **params}


def visibility(page: Page, selector: str) -> str:
    return page.eval_on_selector(selector, "el => getComputedStyle(el).visibility")


def measured_frame_ms(page: Page) -> float:
    result = page.evaluate("() => HumanlikeFrameClock.measureRefresh(20)")
    assert result["n_intervals"] == 20
    return result["frame_ms"]


# ---- rating: keyboard ----------------------------------------------------------------------


def test_rating_keys_step_up_shift_steps_down_saturating_and_enter_submits(page: Page) -> None:
    start(page, [rating()])
    wait_phase(page, "rating", "stimulus")
    kb = page.keyboard
    for _ in range(5):  # 0 -> 25 -> 50 -> 75 -> 100, the fifth press saturates
        kb.press("1")
    kb.press("Shift+Digit1")  # 100 -> 75; event.key is "!" here
    kb.press("2")  # 0 -> 25
    kb.press("Shift+Digit2")  # 25 -> 0
    kb.press("Shift+Digit2")  # saturates at 0
    kb.press("a")
    kb.press("a")
    kb.press("Shift+KeyA")  # event.key is "A": 50 -> 25
    selected = page.eval_on_selector_all(
        ".hl-level[aria-checked='true']", "els => els.map(e => e.textContent)"
    )
    assert selected == ["75%", "0%", "25%"]
    kb.press("Enter")
    (data,) = finish(page)

    keys = [k["key"] for k in page.evaluate("() => window.harnessKeys")]
    assert "!" in keys and "@" in keys and "A" in keys  # Shift really changed event.key
    assert data["ratings"] == {"one": 0.75, "two": 0.0, "ay": 0.25}
    assert data["n_changes"] == 4 + 1 + 2 + 3  # saturated presses do not count
    assert data["input_modality"] == "keyboard"
    assert data["stimulus"] == "/img/stim.png"
    assert data["rt_ms"] > 0
    assert 0 < data["first_rt_ms"] <= data["rt_ms"]
    assert data["requested_frames"] is None
    assert data["presented_ms"] == data["rt_ms"]  # until_response: onset -> submit


def test_rating_digit_keys_match_by_physical_key_on_any_layout_and_numpad(page: Page) -> None:
    start(page, [rating()])
    wait_phase(page, "rating", "stimulus")
    # The unshifted top-row "1" key of a French (AZERTY) keyboard sends key "&", code "Digit1".
    page.evaluate(
        """() => window.harnessJsPsych.getDisplayContainerElement().dispatchEvent(
             new KeyboardEvent('keydown', {key: '&', code: 'Digit1', bubbles: true}))"""
    )
    page.keyboard.press("Numpad1")
    page.keyboard.press("Numpad2")
    page.keyboard.press("Enter")
    (data,) = finish(page)
    assert data["ratings"] == {"one": 0.5, "two": 0.25, "ay": 0.0}


def test_rating_held_key_autorepeat_and_ctrl_combinations_do_not_step(page: Page) -> None:
    start(page, [rating()])
    wait_phase(page, "rating", "stimulus")
    page.keyboard.down("2")
    page.evaluate(
        """() => window.harnessJsPsych.getDisplayContainerElement().dispatchEvent(
             new KeyboardEvent('keydown', {key: '2', code: 'Digit2', repeat: true, bubbles: true}))"""
    )
    page.keyboard.up("2")
    page.keyboard.press("Control+1")
    page.keyboard.press("Enter")
    (data,) = finish(page)
    assert data["ratings"] == {"one": 0.0, "two": 0.25, "ay": 0.0}
    assert data["n_changes"] == 1


def test_rating_submits_all_zeros_by_default(page: Page) -> None:
    start(page, [rating()])
    wait_phase(page, "rating", "stimulus")
    page.keyboard.press("Enter")
    (data,) = finish(page)
    assert data["ratings"] == {"one": 0.0, "two": 0.0, "ay": 0.0}
    assert data["n_changes"] == 0
    assert data["first_rt_ms"] is None
    assert data["rt_ms"] > 0


def test_rating_require_change_blocks_submit_until_a_level_changes(page: Page) -> None:
    start(page, [rating(require_change=True)])
    wait_phase(page, "rating", "stimulus")
    page.keyboard.press("Enter")
    page.wait_for_selector(".hl-message:has-text('Please rate')")
    assert page.evaluate("() => window.harnessResult") is None
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    (data,) = finish(page)
    assert data["ratings"]["two"] == 0.25
    assert data["n_changes"] == 1


# ---- rating: mouse ------------------------------------------------------------------------


def test_rating_mouse_clicks_select_levels_and_submit_button_submits(page: Page) -> None:
    start(page, [rating(levels=[0, 25, 50, 75, 100])])
    wait_phase(page, "rating", "stimulus")
    page.click(".hl-rating-row[data-row='0'] .hl-level[data-index='4']")
    page.click(".hl-rating-row[data-row='2'] .hl-level[data-index='1']")
    page.click(".hl-rating-row[data-row='2'] .hl-level[data-index='3']")
    page.click(".hl-rating-row[data-row='1'] .hl-level[data-index='0']")  # already 0: no change
    assert (
        page.get_attribute(".hl-rating-row[data-row='2'] .hl-level[data-index='3']", "aria-checked")
        == "true"
    )
    assert (
        page.get_attribute(".hl-rating-row[data-row='2'] .hl-level[data-index='1']", "aria-checked")
        == "false"
    )
    page.click(".hl-submit")
    (data,) = finish(page)
    assert data["ratings"] == {"one": 1.0, "two": 0.0, "ay": 0.75}
    assert data["n_changes"] == 3
    assert data["input_modality"] == "mouse"
    assert 0 < data["first_rt_ms"] <= data["rt_ms"]


def test_rating_mixed_input_reports_both_and_each_trial_starts_at_zero(page: Page) -> None:
    start(page, [rating(), rating()])
    wait_phase(page, "rating", "stimulus")
    page.click(".hl-rating-row[data-row='1'] .hl-level[data-index='2']")  # focus stays on it
    page.keyboard.press("2")
    page.keyboard.press("Enter")  # submits although a level button has the focus
    wait_phase(page, "rating", "stimulus")
    page.keyboard.press("Enter")
    first, second = finish(page)
    assert first["ratings"] == {"one": 0.0, "two": 0.75, "ay": 0.0}
    assert first["input_modality"] == "both"
    assert second["ratings"] == {"one": 0.0, "two": 0.0, "ay": 0.0}  # rows reset per trial


# ---- presentation timing -------------------------------------------------------------------


def test_frames_for_rounds_a_duration_to_whole_frames_and_at_least_one(page: Page) -> None:
    cases = [[5, 1000 / 60], [100, 1000 / 60], [108.4, 1000 / 60], [50, 1000 / 120], [2000, 10]]
    got = page.evaluate(
        "cases => cases.map(([d, f]) => HumanlikeFrameClock.framesFor(d, f))", cases
    )
    assert got == [1, 6, 7, 6, 200]
    message = page.evaluate(
        "() => { try { HumanlikeFrameClock.framesFor(0, 16); } catch (e) { return e.message; } }"
    )
    assert "duration_ms" in message


def test_measure_refresh_reports_a_median_frame_and_its_rate(page: Page) -> None:
    result = page.evaluate("() => HumanlikeFrameClock.measureRefresh(30)")
    assert result["n_intervals"] == 30
    assert 4 < result["frame_ms"] < 50
    assert result["refresh_hz"] == pytest.approx(1000 / result["frame_ms"], rel=1e-3)


def test_rating_duration_mode_swaps_to_mask_after_whole_frames(page: Page) -> None:
    frame_ms = measured_frame_ms(page)
    duration_ms = 100
    start(
        page,
        [
            rating(
                presentation="duration",
                duration_ms=duration_ms,
                mask="/img/mask.png",
                frame_ms=frame_ms,
            )
        ],
    )
    wait_phase(page, "rating", "mask")
    assert visibility(page, ".hl-rating .hl-stimulus") == "hidden"
    assert visibility(page, ".hl-rating .hl-mask") == "visible"
    page.keyboard.press("1")  # responses still count while the mask is up
    page.keyboard.press("Enter")
    (data,) = finish(page)
    requested = max(1, round(duration_ms / frame_ms))
    assert data["requested_frames"] == requested
    assert abs(data["frames"] - requested) <= 1
    assert abs(data["presented_ms"] - data["frames"] * frame_ms) <= frame_ms
    # show and hide both happened in rAF callbacks, so the measured time is whole refreshes
    in_frames = data["presented_ms"] / frame_ms
    assert abs(in_frames - round(in_frames)) < 0.2
    assert data["rt_ms"] > data["presented_ms"]
    assert data["ratings"]["one"] == 0.25


def test_rating_duration_mode_without_mask_leaves_the_frame_blank(page: Page) -> None:
    start(page, [rating(presentation="duration", duration_ms=20)])
    wait_phase(page, "rating", "blank")
    assert visibility(page, ".hl-rating .hl-stimulus") == "hidden"
    assert page.query_selector(".hl-rating .hl-mask") is None
    page.keyboard.press("Enter")
    (data,) = finish(page)
    assert data["frames"] >= 1
    assert data["requested_frames"] == max(1, round(20 / (1000 / 60)))


def test_rating_until_response_keeps_the_image_up_and_counts_frames_until_submit(
    page: Page,
) -> None:
    frame_ms = measured_frame_ms(page)
    start(page, [rating(frame_ms=frame_ms)])
    wait_phase(page, "rating", "stimulus")
    page.wait_for_timeout(250)
    assert visibility(page, ".hl-rating .hl-stimulus") == "visible"
    page.keyboard.press("Enter")
    (data,) = finish(page)
    assert data["presented_ms"] >= 250
    # the refresh in which the response fell counts: (frames - 1) * frame <= presented <= frames * frame
    frames_up = data["presented_ms"] / frame_ms
    assert data["frames"] - 1 - 1e-3 <= frames_up <= data["frames"] + 1e-3


def test_frame_clock_keeps_the_duration_when_a_busy_main_thread_skips_callbacks(page) -> None:
    frame_ms = measured_frame_ms(page)
    # an independent recorder sees every refresh the page gets (rAF callbacks of one refresh share
    # its timestamp), so the test knows when the browser offered the clock a chance to hide
    timing = page.evaluate(
        """frame_ms => new Promise(resolve => {
             const stamps = [];
             let recording = true;
             const record = t => { stamps.push(t); if (recording) requestAnimationFrame(record); };
             requestAnimationFrame(record);
             const el = document.createElement('div');
             el.textContent = 'x';
             document.body.appendChild(el);
             const handle = HumanlikeFrameClock.present({
               target: el, duration_ms: 200, frame_ms: frame_ms,
               onShow: () => { const t = performance.now(); while (performance.now() - t < 90) {} },
               // one refresh more, so the recorder has surely logged the hide's own refresh
               onHide: r => requestAnimationFrame(() => { recording = false;
                 resolve({...r, onset: handle.onset(), stamps: stamps.slice()}); }),
             });
           })""",
        frame_ms,
    )
    requested = max(1, round(200 / frame_ms))
    assert timing["requested_frames"] == requested
    assert timing["callbacks"] <= requested - 3  # ~5 refreshes passed without a callback
    onset = timing["onset"]
    threshold = onset + (requested - 0.5) * frame_ms
    offered = [t for t in timing["stamps"] if t > onset]
    first_past = min(t for t in offered if t >= threshold)
    # hidden in the first refresh at or past requested - 0.5 frames, not one callback-count later
    assert timing["presented_ms"] == pytest.approx(first_past - onset, abs=0.06)
    assert timing["frames"] == round((first_past - onset) / frame_ms)
    if first_past - threshold < frame_ms:  # the browser offered the refresh that was due
        assert abs(timing["frames"] - requested) <= 1
        assert abs(timing["presented_ms"] - requested * frame_ms) <= frame_ms


# ---- preload -------------------------------------------------------------------------------


def test_auto_preload_finds_every_image_parameter_of_both_plugins(page: Page) -> None:
    timeline = [rating(mask="/img/mask.png", presentation="duration", duration_ms=50), triad()]
    found = page.evaluate("tl => window.harnessPreloadList(tl).images", timeline)
    assert sorted(found) == sorted(
        ["/img/stim.png", "/img/mask.png", "/img/ref.png", "/img/left.png", "/img/right.png"]
    )
    start(page, [{"type": "preload", "auto_preload": True}, *timeline])
    wait_phase(page, "rating", "mask")
    page.keyboard.press("Enter")
    wait_phase(page, "triad", "stimulus")
    page.keyboard.press("f")
    preload, rated, chosen = finish(page)
    assert preload["success"] is True and preload["failed_images"] == []
    assert rated["trial_type"] == "rating" and chosen["trial_type"] == "triad"


# ---- triad ---------------------------------------------------------------------------------


def test_triad_keys_f_j_and_arrows_choose_left_and_right(page: Page) -> None:
    presses = ["f", "j", "ArrowLeft", "ArrowRight", "Shift+KeyF"]
    start(page, [triad() for _ in presses])
    for key in presses:
        wait_phase(page, "triad", "stimulus")
        page.keyboard.press(key)
    data = finish(page)
    assert [d["choice"] for d in data] == ["left", "right", "left", "right", "left"]
    assert [d["chosen_level"] for d in data] == [2, 7, 2, 7, 2]
    for d in data:
        assert d["input_modality"] == "keyboard"
        assert d["rt_ms"] > 0
        assert (d["sequence"], d["s_left"], d["s_ref"], d["s_right"]) == ("seq-a", 2, 4, 7)
        assert d["presented_ms"] == d["rt_ms"]


def test_triad_other_keys_and_clicks_on_the_reference_are_ignored_then_a_click_chooses(
    page,
) -> None:
    start(page, [triad(s_left=6, s_ref=3, s_right=1)])
    wait_phase(page, "triad", "stimulus")
    page.keyboard.press("k")
    page.click(".hl-triad-reference")
    assert page.evaluate("() => window.harnessResult") is None
    page.click(".hl-triad-right")
    (data,) = finish(page)
    assert data["choice"] == "right"
    assert data["chosen_level"] == 1
    assert data["input_modality"] == "mouse"
    assert (data["reference"], data["left"], data["right"]) == (
        "/img/ref.png",
        "/img/left.png",
        "/img/right.png",
    )


def test_triad_duration_mode_masks_all_three_positions_after_whole_frames(page: Page) -> None:
    frame_ms = measured_frame_ms(page)
    start(
        page,
        [triad(presentation="duration", duration_ms=150, mask="/img/mask.png", frame_ms=frame_ms)],
    )
    wait_phase(page, "triad", "mask")
    hidden = page.eval_on_selector_all(
        ".hl-triad .hl-stimulus", "els => els.map(e => getComputedStyle(e).visibility)"
    )
    masks = page.eval_on_selector_all(
        ".hl-triad .hl-mask", "els => els.map(e => getComputedStyle(e).visibility)"
    )
    assert hidden == ["hidden"] * 3 and masks == ["visible"] * 3
    page.click(".hl-triad-left")  # the mask in a comparison position is clickable too
    (data,) = finish(page)
    requested = max(1, round(150 / frame_ms))
    assert data["choice"] == "left"
    assert data["requested_frames"] == requested
    assert abs(data["frames"] - requested) <= 1
    assert abs(data["presented_ms"] - data["frames"] * frame_ms) <= frame_ms
    in_frames = data["presented_ms"] / frame_ms
    assert abs(in_frames - round(in_frames)) < 0.2


# ---- simulation (jsPsych.simulate) -----------------------------------------------------------


def simulate(page: Page, timeline: list[dict], mode: str) -> list[dict]:
    """Run the timeline through jsPsych.simulate(timeline, mode) and return its trial data."""
    return page.evaluate("([tl, mode]) => window.simulateHarness(tl, mode)", [timeline, mode])


def test_simulate_data_only_gives_every_declared_field_without_showing_a_trial(page: Page) -> None:
    data = simulate(page, [rating(), triad()], "data-only")
    declared = page.evaluate(
        "() => [Object.keys(jsPsychRating.info.data), Object.keys(jsPsychTriad.info.data)]"
    )
    for trial, fields in zip(data, declared, strict=True):
        missing = [f for f in fields if f not in trial]
        assert missing == [], missing
    assert [d["trial_type"] for d in data] == ["rating", "triad"]
    assert page.query_selector(".hl-trial") is None


def test_simulate_visual_drives_the_real_trials_with_synthetic_keys_and_clicks(page: Page) -> None:
    wanted = {"one": 0.5, "two": 0.0, "ay": 1.0}
    timeline = [
        rating(simulation_options={"data": {"ratings": wanted, "rt_ms": 300}}),
        rating(simulation_options={"data": {"ratings": wanted, "rt_ms": 300, "input_modality": "mouse"}}),
        triad(simulation_options={"data": {"choice": "right", "rt_ms": 150}}),
        triad(simulation_options={"data": {"choice": "left", "rt_ms": 150, "input_modality": "mouse"}}),
    ]
    by_keys, by_mouse, right, left = simulate(page, timeline, "visual")
    for rated, modality in ((by_keys, "keyboard"), (by_mouse, "mouse")):
        assert rated["ratings"] == wanted
        assert rated["input_modality"] == modality
        assert rated["n_changes"] == (2 if modality == "mouse" else 6)  # clicks jump, keys step
        assert rated["presented_ms"] == rated["rt_ms"] > 0
    assert (right["choice"], right["chosen_level"], right["input_modality"]) == ("right", 7, "keyboard")
    assert (left["choice"], left["chosen_level"], left["input_modality"]) == ("left", 2, "mouse")
    assert left["rt_ms"] > 0 and left["frames"] >= 1
