"""The participant pages in the language the spec sets (issue 41 item 4): the demo from consent to
completion in German, and a right-to-left sample (Arabic). Every screen is checked for English
left over: no msgid of the catalogue whose German differs may appear in the page's visible text,
and the strings the page shows are the catalogue's (server/study/languages.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from humanlike.server.demo.build import build_demo
from humanlike.server.study import languages
from tests.e2e.conftest import serving
from tests.e2e.participant_driver import Played, play, press_button_screen

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots/i18n")
PROLIFIC = "PROLIFIC_PID=p1&STUDY_ID=s1&SESSION_ID=x1"  # the demo recruits on Prolific


def _visible(message: str) -> str:
    """A msgid as the page shows it: tags and entities gone, placeholders cut out (the longest
    literal piece is what must not appear)."""
    text = re.sub(r"<[^>]+>", "", message).replace("&hellip;", "…").replace("&larr;", "←")
    text = text.replace("&rarr;", "→").replace("&darr;", "↓")
    return max(re.split(r"%\(\w+\)s", text), key=len).strip()


def english_left_over(page, language: str) -> list[str]:
    """The English msgids (20 characters or more of literal text, translated differently) that
    the page's visible text still shows."""
    table = languages.translations(language)
    text = page.inner_text("body")
    out = []
    for message in languages.template():
        if not isinstance(message.id, str) or not message.id or table.gettext(message.id) == message.id:
            continue
        shown = _visible(message.id)
        if len(shown) >= 20 and shown in text:
            out.append(shown)
    return out


def _spec_in(tmp_path: Path, language: str) -> Path:
    spec = build_demo(tmp_path / "demo", controversial=False, mlds=False, classification=False)
    spec.write_text(f'language = "{language}"\n' + spec.read_text())  # a top-level key: first
    return spec


def test_the_demo_runs_from_consent_to_completion_in_german(database_url, chromium, tmp_path):
    de = languages.translations("de")
    shots = SHOTS / "de"
    shots.mkdir(parents=True, exist_ok=True)
    with serving(database_url, _spec_in(tmp_path, "de")) as server:
        context = chromium.new_context()
        context.route("https://app.prolific.com/**", lambda route: route.fulfill(
            body="<h1>Prolific (test double)</h1>", content_type="text/html"))
        page = context.new_page()
        page.set_default_timeout(30000)
        page.goto(f"{server.url}/start/demo?{PROLIFIC}")
        page.wait_for_selector("#consent-agree")
        assert page.get_attribute("html", "lang") == "de"
        assert page.get_attribute("html", "dir") == "ltr"
        assert page.inner_text("#consent-agree") == de.gettext("I agree") == "Ich stimme zu"
        assert page.inner_text("#consent-decline") == de.gettext("I do not agree")
        assert page.inner_text("#withdraw-link") == de.gettext("Withdraw and delete my data")
        assert english_left_over(page, "de") == []
        page.screenshot(path=str(shots / "consent.png"))
        page.keyboard.press("Enter")
        page.wait_for_selector("#consent-agree", state="detached")
        seen: dict[str, list[str]] = {}
        screens = 0  # the button screens before the first trial: instructions, block introduction
        while True:
            page.wait_for_selector(".hl-rating, #jspsych-html-button-response-btngroup button")
            if page.query_selector(".hl-rating") is not None:
                break
            assert page.inner_text("#jspsych-html-button-response-btngroup button") in (
                de.gettext("Start"), de.gettext("Continue"))
            seen[f"screen {screens}"] = english_left_over(page, "de")
            page.screenshot(path=str(shots / f"screen-{screens}.png"))
            press_button_screen(page)
            screens += 1
        assert screens >= 2
        page.wait_for_function("() => document.querySelector('.hl-rating').dataset.phase !== 'loading'")
        assert page.inner_text("#practice-label") == "Übungsdurchgang"
        assert page.inner_text(".hl-rating .hl-submit") == "Abschicken"
        seen["first trial"] = english_left_over(page, "de")
        page.screenshot(path=str(shots / "trial.png"))
        played = Played()
        pid = page.url.split("/run/", 1)[1].split("#")[0].split("?")[0]
        play(page, played, until="https://app.prolific.com/")
        assert page.url.startswith("https://app.prolific.com/submissions/complete?cc=")
        page.goto(f"{server.url}/done/{pid}")  # the end page, as a participant who comes back sees it
        page.wait_for_selector("#completion-code")
        assert page.get_attribute("html", "lang") == "de"
        assert page.inner_text("h1") == "Vielen Dank!"
        seen["done"] = english_left_over(page, "de")
        page.screenshot(path=str(shots / "done.png"))
        assert len(played.ratings) > 10  # the whole demo was answered
        page.click("#withdraw-link")
        page.wait_for_selector("#withdraw-confirm")
        assert page.inner_text("#withdraw-confirm") == de.gettext("Yes, withdraw and delete my data")
        seen["withdraw"] = english_left_over(page, "de")
        page.screenshot(path=str(shots / "withdraw.png"))
        assert seen == {name: [] for name in seen}
        context.close()


def test_a_right_to_left_language_sets_dir_rtl_on_the_page(database_url, chromium, tmp_path):
    shots = SHOTS / "ar"
    shots.mkdir(parents=True, exist_ok=True)
    with serving(database_url, _spec_in(tmp_path, "ar")) as server:
        context = chromium.new_context()
        context.route("https://app.prolific.com/**", lambda route: route.fulfill(
            body="<h1>Prolific (test double)</h1>", content_type="text/html"))
        page = context.new_page()
        page.set_default_timeout(30000)
        page.goto(f"{server.url}/start/demo?{PROLIFIC}")
        page.wait_for_selector("#consent-agree")
        assert page.get_attribute("html", "lang") == "ar"
        assert page.get_attribute("html", "dir") == "rtl"
        assert page.evaluate("getComputedStyle(document.body).direction") == "rtl"
        assert page.inner_text("#consent-agree") == "أوافق"
        # the buttons run right to left: "I agree" (first in the DOM) sits right of "I do not agree"
        agree = page.locator("#consent-agree").bounding_box()
        decline = page.locator("#consent-decline").bounding_box()
        assert agree is not None and decline is not None and agree["x"] > decline["x"]
        page.screenshot(path=str(shots / "consent.png"))
        context.close()
