"""axe-core (from npm, static/vendor/axe/axe.js) on every participant page type in one browser
session (issue 41 item 5): consent, instructions, a block introduction, the rating, triad and
classification trials, a break, "welcome back" after a reload, the debrief, the end page; in a
second study the calibration, the refusal on return and the withdrawal page; in a third the
"display not suitable" screen. No serious or critical violation may remain. The trials are
answered with the keyboard alone, and each trial type announces its state in an aria-live region
(checked on the rating, triad and classification pages). Screenshots of each page are kept in
/tmp/shots/a11y."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import serving
from tests.e2e.participant_driver import STATE_JS, Played, play

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "static" / "vendor" / "axe" / "axe.js"
SHOTS = Path("/tmp/shots/a11y")
SCREEN_JS = "() => { const s = document.querySelector('[data-screen]'); return s ? s.dataset.screen : null; }"
AUDIT_JS = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}"""


def _studies(root: Path) -> tuple[Path, Path, Path]:
    """The demo (rating, triad, classification) with a short timeline and a break; the same study
    with calibration and a refusing resume policy; and one whose display rule no screen meets."""
    from humanlike.server.demo.build import build_demo

    spec = build_demo(root / "demo", controversial=False)
    text = spec.read_text().replace('platform = "prolific"\n', "")
    text = text.replace("allow_mobile = false", "allow_mobile = false\nbreak_every = 3")
    text = text.replace("catch_trials = 3\nrepeats = 4\n", "catch_trials = 1\nrepeats = 0\n"
                        "max_trials = 2\n")
    text = text.replace('kinds = ["mlds"]\nrepeats = 4\n', 'kinds = ["mlds"]\nrepeats = 0\n'
                        "max_trials = 2\n")
    text = text.replace('trial_type = "classification"\nkinds = ["natural"]\npractice = 2\n',
                        'trial_type = "classification"\nkinds = ["natural"]\npractice = 0\n'
                        "max_trials = 2\n")
    spec.write_text(text)
    calibrated = spec.parent / "calibrated.toml"
    calibrated.write_text(text.replace('slug = "demo"', 'slug = "demo-calibrated"')
                          + '\n[display]\ncalibration = true\n\n[resume]\npolicy = "refuse"\n')
    refused = spec.parent / "refused.toml"
    refused.write_text(text.replace('slug = "demo"', 'slug = "demo-display"')
                       + "\n[display]\nrefresh_hz = [500]\n")
    return spec, calibrated, refused


def _audit(page, name: str, found: dict[str, list]) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    if page.evaluate("() => typeof axe === 'undefined'"):
        page.evaluate(AXE.read_text())  # through the DevTools protocol: the page's CSP allows it
    found[name] = page.evaluate(AUDIT_JS)


def _live_region(page, selector: str) -> str:
    """The text of the trial's status region (``role=status``, aria-live polite), which screen
    readers announce, once the trial has set it."""
    page.wait_for_function("s => { const el = document.querySelector(s + ' .hl-live'); "
                           "return el && el.textContent.trim() !== ''; }", arg=selector)
    return page.eval_on_selector(f"{selector} .hl-live", "el => el.textContent.trim()")


def test_participant_pages_have_no_serious_axe_violations_and_trials_work_by_keyboard(
        database_url, chromium, tmp_path):
    assert AXE.is_file(), f"{AXE} is missing: run `make setup` (it copies axe-core from npm)"
    main, calibrated, refused = _studies(tmp_path)
    found: dict[str, list] = {}
    announced: dict[str, str] = {}
    with serving(database_url, main, calibrated, refused) as server:
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.set_default_timeout(30000)
        page.goto(f"{server.url}/start/demo")
        played = Played()
        reloaded = False
        while not page.url.startswith(f"{server.url}/done/"):
            page.wait_for_function(
                f"() => (() => {{ const s = ({STATE_JS})(); return s !== 'busy' && s !== 'saving'; }})()"
                f" || location.pathname.startsWith('/done/')")
            if page.url.startswith(f"{server.url}/done/"):
                break
            state, screen = page.evaluate(STATE_JS), page.evaluate(SCREEN_JS)
            name = screen if state == "instructions" and screen else state
            if name not in found:
                _audit(page, name, found)
            if state in ("rating", "triad", "classification"):
                selector = {"rating": ".hl-rating", "triad": ".hl-triad",
                            "classification": ".hl-classification"}[state]
                announced.setdefault(state, _live_region(page, selector))
                if state == "rating" and "rating-change" not in announced:
                    page.keyboard.press("3")  # one step up: the change is announced
                    page.wait_for_function("() => document.querySelector('.hl-rating .hl-live')"
                                           ".textContent === '3: 25%'")
                    announced["rating-change"] = "3: 25%"
                play(page, played, max_trials=1)
                if state == "triad" and not reloaded:  # a resume: "welcome back"
                    reloaded = True
                    page.reload()
            elif state == "debrief":
                page.keyboard.type("I looked at the shapes.")
                page.keyboard.press("Tab")
                page.keyboard.type("Nothing went wrong.")
                page.keyboard.press("Tab")
                page.keyboard.press("Enter")
                page.wait_for_selector("#jspsych-survey-html-form", state="detached")
            else:  # consent or a "continue" screen: its button has the focus, Enter presses it
                button = ("#consent-agree" if state == "consent"
                          else "#jspsych-html-button-response-btngroup button")
                page.eval_on_selector(button, "b => { b.dataset.pressed = '1'; }")
                page.keyboard.press("Enter")
                page.wait_for_selector(button + "[data-pressed]", state="detached")
        page.wait_for_load_state()
        _audit(page, "done", found)

        # calibration, then the refusal on return (policy "refuse") and the withdrawal page
        page.goto(f"{server.url}/start/demo-calibrated")
        page.click("#consent-agree")
        page.wait_for_selector(".hl-calibration")
        _audit(page, "calibration", found)
        code = page.get_attribute("#resume-code", "data-code")  # any language's page
        assert page.inner_text("#resume-code") == f"Resume code: {code}"
        page.goto(f"{server.url}/start/demo-calibrated?resume={code}")
        page.wait_for_selector("h1:has-text('cannot be continued'), .message")
        assert page.locator("#withdraw-link").count() == 1
        _audit(page, "refusal", found)
        page.click("#withdraw-link")
        page.wait_for_selector("#withdraw-confirm")
        _audit(page, "withdrawal", found)

        # the display rule no screen meets: the polite "not suitable" screen
        page.goto(f"{server.url}/start/demo-display")
        page.click("#consent-agree")
        page.wait_for_selector("[data-screen='unsuitable']")
        _audit(page, "unsuitable", found)
        context.close()

    (SHOTS / "violations.json").write_text(json.dumps(found, indent=1))
    expected = {"consent", "instructions", "intro", "rating", "triad", "classification", "break",
                "resume", "debrief", "done", "calibration", "refusal", "withdrawal", "unsuitable"}
    assert expected <= set(found), sorted(found)
    assert {k: v for k, v in found.items() if v} == {}
    assert all(announced.get(t) for t in ("rating", "triad", "classification")), announced
