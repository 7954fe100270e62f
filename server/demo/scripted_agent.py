"""A scripted browser agent: the hardest participant for the authenticity screen (issue 39).

Headless Chromium, driven by Playwright, takes part through the real task page with its automation
flag hidden (``navigator.webdriver`` false) and a desktop user agent, as an attacker would. It
answers with a candidate model (:class:`~humanlike.server.demo.simulate.SimulatedStudy`) at a
human pace:

* it knows each trial's stimulus from the image's ``src``, mapped back to the stimulus key through
  the timeline the page fetched (``stimulus_base`` + key, as ``session.js`` builds the URL);
* classification: the model's most probable label among the buttons shown, clicked after moving
  the mouse along a curved path with small jitter (Fitts-like duration, minimum-jerk speed);
* rating: each category's key pressed until its level is the one nearest the model's probability
  (``static/js/plugins/rating.js``: a key steps a row up one level, Enter submits);
* triads: "f" or "j" at random;
* odd-one-out triplets: the model's odd one out (the image outside the pair whose label
  probabilities have the largest dot product, ``trial_types.odd_one_out``), clicked;
* consent, instructions, breaks and the debrief's Finish button: clicked the same way, after
  skimming the screen's words; the debrief's text boxes typed a key at a time;
* before each answer it waits a log-normal time (median ``RT_MEDIAN_MS``, log-sd ``RT_LOG_SD``).

All randomness comes from ``numpy.random.default_rng([seed, participant number])``. Requests that
leave the server (the platform's completion URL) are answered by a stub page: the agent never
reaches the platform. With the study's rehearsal key (``server.participants.rehearsal``) each
arrival is recorded as simulated, as ``humanlike simulate``'s are.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode, urlsplit

import numpy as np

from humanlike.server.participants.rehearsal import REHEARSAL_HEADER, SIMULATED_HEADER
from humanlike.server.trial_types.odd_one_out import odd_one_out_probabilities

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ElementHandle, Page, Response

    from humanlike.server.demo.simulate import SimulatedStudy

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-blink-features=AutomationControlled")
RT_MEDIAN_MS = 900.0
RT_LOG_SD = 0.35
READ_MS_PER_WORD = 120.0
"""Skimming a text screen (consent, instructions, a break): about 500 words a minute."""
KEY_GAP_MEDIAN_MS = 140.0
"""Between two key presses of one answer (a rating's steps, a typed word)."""
SCREENS = ((1366, 768), (1440, 900), (1536, 864), (1680, 1050), (1920, 1080))
"""Common desktop screens; the window fills one's width, its height less the browser's bars."""
DEBRIEF_TEXTS = ("I went with my first impression.", "I looked at the overall shape.",
                 "Mostly by the outline.", "Nothing went wrong.", "It all worked fine.")
STUB_PAGE = "<!doctype html><title>Done</title><h1>Study complete</h1>"

STATE_JS = """() => {
  if (document.querySelector('[data-screen="unsuitable"]')) return 'end:unsuitable';
  for (const id of ['start-error', 'complete-error', 'outdated']) {
    if (document.getElementById(id)) return 'end:' + id;
  }
  if (document.querySelector('.hl-calibration')) return 'calibration';
  const agree = document.querySelector('#consent-agree');
  if (agree) return agree.disabled ? 'busy' : 'consent';
  const r = document.querySelector('.hl-rating');
  if (r) return r.dataset.phase === 'loading' || r.dataset.phase === 'done' ? 'busy' : 'rating';
  const t = document.querySelector('.hl-triad');
  if (t) return t.dataset.phase === 'loading' || t.dataset.phase === 'done' ? 'busy' : 'triad';
  const o = document.querySelector('.hl-odd');
  if (o) return o.dataset.phase === 'loading' || o.dataset.phase === 'done' ? 'busy' : 'odd_one_out';
  const c = document.querySelector('.hl-classification');
  if (c) return c.dataset.phase === 'response' ? 'classification' : 'busy';
  if (document.querySelector('#jspsych-survey-html-form')) return 'debrief';
  if (document.querySelector('#jspsych-html-button-response-btngroup button')) return 'button';
  return 'busy';
}"""
"""Which screen the task page shows now; ``busy`` while nothing can be answered."""

TASK_PATH = r"/(task|run)/[^/]+/?$"
"""The task page's path (``server/web/participant.py``: cookie-bound and cookie-free)."""
# a function, not an expression string: the task page's CSP forbids eval
READY_JS = (f"() => (() => {{ const s = ({STATE_JS})(); return s !== 'busy'; }})()"
            f" || !/{TASK_PATH.replace('/', chr(92) + '/')}/.test(location.pathname)")

BOX_JS = """([selector, label]) => {
  const all = [...document.querySelectorAll(selector)];
  const el = label === null ? all[0] : all.find(e => e.dataset.label === label);
  if (!el) return null;
  const r = el.getBoundingClientRect();
  return {x: r.x, y: r.y, width: r.width, height: r.height};
}"""

RATING_ROWS_JS = """() => ({
  labels: [...document.querySelectorAll('.hl-rating .hl-rating-row')].map(
    row => row.querySelector('.hl-rating-label').textContent),
  levels: [...document.querySelectorAll(".hl-rating .hl-rating-row[data-row='0'] .hl-level")].map(
    b => parseFloat(b.textContent)),
})"""

T = TypeVar("T")


def think_ms(rng: np.random.Generator, median_ms: float = RT_MEDIAN_MS,
             log_sd: float = RT_LOG_SD) -> float:
    """A log-normal wait: ``median_ms * exp(N(0, log_sd))``."""
    return float(median_ms * np.exp(rng.normal(0.0, log_sd)))


def movement_ms(distance: float, width: float, rng: np.random.Generator) -> float:
    """How long a pointing movement takes: Fitts' law, 150 + 120 log2(1 + D / W) ms (Fitts 1954,
    in MacKenzie's 1992 form), times a log-normal factor (log-sd 0.15)."""
    index = math.log2(1.0 + distance / max(width, 1.0))
    return float((150.0 + 120.0 * index) * np.exp(rng.normal(0.0, 0.15)))


def mouse_path(start: tuple[float, float], end: tuple[float, float],
               rng: np.random.Generator, jitter_px: float = 1.0) -> list[tuple[float, float]]:
    """Points from ``start`` (left out) to exactly ``end``: a quadratic Bezier curve bowed to one
    side by up to a fifth of the distance, walked with the minimum-jerk profile
    10 s^3 - 15 s^4 + 6 s^5 (Flash & Hogan 1985: slow, fast, slow), Gaussian jitter on the inner
    points; 6 to 40 points, more for longer paths."""
    p0, p2 = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    delta = p2 - p0
    distance = float(np.hypot(*delta))
    n = int(np.clip(distance / 20.0, 6, 40))
    normal = np.array([-delta[1], delta[0]]) / distance if distance > 0 else np.zeros(2)
    p1 = p0 + delta * rng.uniform(0.3, 0.7) + normal * distance * rng.uniform(-0.2, 0.2)
    s = np.linspace(0.0, 1.0, n + 1)[1:]
    u = (10 * s**3 - 15 * s**4 + 6 * s**5)[:, None]
    points = (1 - u) ** 2 * p0 + 2 * (1 - u) * u * p1 + u**2 * p2
    points[:-1] += rng.normal(0.0, jitter_px, size=(n - 1, 2))
    points[-1] = p2
    return [(float(x), float(y)) for x, y in points]


def nearest_level(p: float, levels: list[float]) -> int:
    """The index of the rating level (in percent) nearest the probability ``p``."""
    return int(np.argmin([abs(level / 100.0 - p) for level in levels]))


def participant_ids(seed: int, number: int) -> tuple[str, str, str]:
    """(PROLIFIC_PID, STUDY_ID, SESSION_ID) of the agent's participant ``number``."""
    platform_id = f"agent{seed}-{number:04d}"
    return platform_id, "agent-study", f"{platform_id}-session"


@dataclass
class ScriptedParticipant:
    """One participant's page, its pointer and its answers so far."""

    page: Page
    rng: np.random.Generator
    answers: SimulatedStudy
    pointer: tuple[float, float] = (0.0, 0.0)
    timelines: list[Response] = field(default_factory=list)
    """The page's timeline responses, newest last (``page.on("response")``)."""
    stimulus_of: dict[str, str] | None = None
    keys: dict[str, str] = field(default_factory=dict)
    """Category label -> its key, from the timeline."""
    answered: int = 0

    # -- what the page shows --------------------------------------------------------------
    def learn_timeline(self) -> None:
        """Read the stimulus URL -> key map and the category keys from the fetched timeline."""
        if not self.timelines:
            raise RuntimeError("the task page showed a trial before its timeline was seen")
        timeline = self.timelines[-1].json()
        base = str(timeline["stimulus_base"])
        self.stimulus_of = {}
        for entry in timeline["trials"]:
            for key in [entry.get("stimulus"), *(entry.get("stimuli") or [])]:
                if key:
                    self.stimulus_of[base + str(key)] = str(key)
        self.keys = {str(c["label"]): str(c["key"]) for c in timeline["categories"]}

    def stimulus(self, root: str) -> str:
        """The stimulus key of the image in ``root`` (its ``src``, mapped through the timeline)."""
        if self.stimulus_of is None:
            self.learn_timeline()
        assert self.stimulus_of is not None
        src = self.page.eval_on_selector(f"{root} img.hl-stimulus", "img => img.getAttribute('src')")
        path = urlsplit(src).path if "://" in src else src
        key = self.stimulus_of.get(src) or self.stimulus_of.get(path)
        if key is None:
            raise RuntimeError(f"image {src!r} is none of the timeline's stimuli")
        return key

    def box(self, selector: str, label: str | None = None) -> dict[str, float]:
        """The element's box in the viewport, scrolled into view with the mouse wheel."""
        for _ in range(30):
            box = self.page.evaluate(BOX_JS, [selector, label])
            if box is None:
                raise RuntimeError(f"nothing to click at {selector} {label or ''}".strip())
            height = self.page.viewport_size["height"] if self.page.viewport_size else 800
            below = box["y"] + box["height"] - (height - 40)
            above = 40 - box["y"]
            if below <= 0 and above <= 0:
                return box
            self.page.mouse.wheel(0, min(below, 250.0) if below > 0 else -min(above, 250.0))
            self.wait(think_ms(self.rng, 90.0, 0.3))
        raise RuntimeError(f"{selector} did not scroll into view")

    # -- doing things -----------------------------------------------------------------------
    def wait(self, ms: float) -> None:
        self.page.wait_for_timeout(max(ms, 1.0))

    def think(self) -> None:
        self.wait(think_ms(self.rng))

    def read(self) -> None:
        """Skim the text shown now: a log-normal wait plus ``READ_MS_PER_WORD`` per word."""
        words = len(self.page.evaluate("() => document.body.innerText").split())
        self.wait(think_ms(self.rng) + think_ms(self.rng, READ_MS_PER_WORD * words, 0.3))

    def click(self, selector: str, label: str | None = None) -> None:
        """Move the mouse along a curved path to a point near the element's middle, and click."""
        box = self.box(selector, label)
        target = (box["x"] + box["width"] * float(np.clip(self.rng.normal(0.5, 0.12), 0.2, 0.8)),
                  box["y"] + box["height"] * float(np.clip(self.rng.normal(0.5, 0.12), 0.2, 0.8)))
        path = mouse_path(self.pointer, target, self.rng)
        distance = math.dist(self.pointer, target)
        step_ms = movement_ms(distance, min(box["width"], box["height"]), self.rng) / len(path)
        for x, y in path:
            self.page.mouse.move(x, y)
            self.wait(step_ms)
        self.pointer = target
        self.wait(think_ms(self.rng, 80.0, 0.3))  # settle on the target
        self.page.mouse.down()
        self.wait(think_ms(self.rng, 90.0, 0.25))
        self.page.mouse.up()

    def press(self, key: str) -> None:
        """One key press, held for a log-normal time (median 90 ms)."""
        self.page.keyboard.press(key, delay=think_ms(self.rng, 90.0, 0.25))

    def type_text(self, text: str) -> None:
        for ch in text:
            self.page.keyboard.type(ch)
            self.wait(think_ms(self.rng, KEY_GAP_MEDIAN_MS, 0.4))

    def screen(self, selector: str) -> ElementHandle:
        """The element answered now, taken before answering: wait on it (``hidden``, which
        includes detached) afterwards, since its successor may match the same selector at once."""
        handle = self.page.query_selector(selector)
        if handle is None:
            raise RuntimeError(f"{selector} is not on the page")
        return handle

    # -- the screens ------------------------------------------------------------------------
    def consent(self) -> None:
        agree = self.screen("#consent-agree")
        self.read()
        self.click("#consent-agree")
        agree.wait_for_element_state("hidden")

    def button_screen(self) -> None:
        group = self.screen("#jspsych-html-button-response-btngroup")
        self.read()
        self.click("#jspsych-html-button-response-btngroup button")
        group.wait_for_element_state("hidden")

    def classification(self) -> None:
        trial = self.screen(".hl-classification")
        key = self.stimulus(".hl-classification")
        shown = self.page.eval_on_selector_all(".hl-classification .hl-category",
                                               "els => els.map(e => e.dataset.label)")
        p = dict(zip(self.answers.labels, self.answers.model_p(key).tolist(), strict=True))
        choice = max(shown, key=lambda label: p.get(label, 0.0))
        self.think()
        self.click(".hl-classification .hl-category", choice)
        trial.wait_for_element_state("hidden")
        self.answered += 1

    def rating(self) -> None:
        trial = self.screen(".hl-rating")
        key = self.stimulus(".hl-rating")
        rows = self.page.evaluate(RATING_ROWS_JS)
        p = dict(zip(self.answers.labels, self.answers.model_p(key).tolist(), strict=True))
        steps = {label: nearest_level(p.get(label, 0.0), rows["levels"]) for label in rows["labels"]}
        if not any(steps.values()):  # rate something: the model's most probable category
            steps[max(rows["labels"], key=lambda label: p.get(label, 0.0))] = 1
        self.think()
        for label in self.rng.permutation([lab for lab in rows["labels"] if steps[lab]]).tolist():
            for _ in range(steps[label]):
                self.press(self.keys[label].lower())
                self.wait(think_ms(self.rng, KEY_GAP_MEDIAN_MS, 0.4))
        self.wait(think_ms(self.rng, 300.0, 0.35))
        self.press("Enter")
        trial.wait_for_element_state("hidden")
        self.answered += 1

    def triad(self) -> None:
        trial = self.screen(".hl-triad")
        self.think()
        self.press("f" if self.rng.random() < 0.5 else "j")
        trial.wait_for_element_state("hidden")
        self.answered += 1

    def odd_one_out(self) -> None:
        trial = self.screen(".hl-odd")
        self.think()
        sides = ("left", "middle", "right")
        x = np.stack([self.answers.model_p(self.stimulus(f".hl-odd-{side}")) for side in sides])
        self.click(f".hl-odd-{sides[int(odd_one_out_probabilities(x).argmax())]}")
        trial.wait_for_element_state("hidden")
        self.answered += 1

    def debrief(self) -> None:
        form = "#jspsych-survey-html-form"
        trial = self.screen(form)
        self.think()
        names = self.page.eval_on_selector_all(f"{form} textarea", "els => els.map(e => e.name)")
        for name in names:
            self.click(f"{form} textarea[name='{name}']")
            self.type_text(str(self.rng.choice(DEBRIEF_TEXTS)))
            self.wait(think_ms(self.rng, 400.0, 0.4))
        groups = self.page.eval_on_selector_all(
            f"{form} fieldset.debrief-options", "els => els.map(e => e.querySelectorAll('input').length)")
        for group, n in enumerate(groups):
            pick = int(self.rng.integers(n))
            self.click(f"{form} fieldset.debrief-options:nth-of-type({group + 1}) "
                       f"label.debrief-choice:nth-of-type({pick + 1})")
            self.wait(think_ms(self.rng, 300.0, 0.4))
        self.click("#jspsych-survey-html-form-next")
        trial.wait_for_element_state("hidden")
        self.answered += 1

    def play(self, timeout_ms: float) -> None:
        """Answer every screen until the page leaves the task page (the completion URL or the
        end page)."""
        screens: dict[str, Callable[[], None]] = {
            "consent": self.consent, "button": self.button_screen,
            "classification": self.classification, "rating": self.rating,
            "triad": self.triad, "odd_one_out": self.odd_one_out, "debrief": self.debrief}
        while True:
            self.page.wait_for_function(READY_JS, timeout=timeout_ms)
            if not on_task_page(self.page.url):
                return
            state = self.page.evaluate(STATE_JS)
            if state.startswith("end:"):
                text = self.page.inner_text("#task") if self.page.query_selector("#task") else ""
                raise RuntimeError(f"the task page ended the study ({state[4:]}): {text[:300]}")
            if state == "calibration":
                raise RuntimeError("the study calibrates the display ([display] calibration); "
                                   "the scripted agent does not answer those screens")
            screens[state]()


def on_task_page(url: str) -> bool:
    """Whether ``url`` is the task page (not the end page, the platform or a refusal)."""
    return re.search(TASK_PATH, urlsplit(url).path) is not None


def _arrival(response: Response | None) -> Response | None:
    """The reply to the study link itself: the first response of ``goto``'s redirect chain."""
    if response is None:
        return None
    request = response.request
    while request.redirected_from is not None:
        request = request.redirected_from
    return request.response()


def run_participant(browser: Browser, base_url: str, slug: str, number: int, seed: int,
                    rehearsal_key: str | None, answers: SimulatedStudy,
                    timeout_ms: float = 60_000) -> dict[str, Any]:
    """One participant in a new browser context, from the study link to the completion URL."""
    rng = np.random.default_rng([seed, number])
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(base_url))
    width, screen_height = SCREENS[int(rng.integers(len(SCREENS)))]
    height = screen_height - int(rng.integers(110, 141))  # tabs, address bar, task bar
    major = browser.version.split(".")[0]
    context = browser.new_context(
        viewport={"width": width, "height": height},
        screen={"width": width, "height": screen_height}, locale="en-GB",
        user_agent=(f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                    f"Chrome/{major}.0.0.0 Safari/537.36"),
        extra_http_headers={REHEARSAL_HEADER: rehearsal_key} if rehearsal_key else None)
    try:
        # the platform's completion page (anything off the server) is a stub: never reached
        context.route(lambda url: not url.startswith(origin + "/"), lambda route: (
            route.fulfill(status=200, body=STUB_PAGE, content_type="text/html")
            if route.request.resource_type == "document" else route.abort()))
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        agent = ScriptedParticipant(page, rng, answers)
        page.on("response", lambda r: agent.timelines.append(r) if r.request.method == "GET"
                and urlsplit(r.url).path.endswith("/timeline") and r.ok else None)
        platform_id, study_id, session_id = participant_ids(seed, number)
        query = urlencode({"PROLIFIC_PID": platform_id, "STUDY_ID": study_id,
                           "SESSION_ID": session_id})
        arrival = _arrival(page.goto(f"{base_url.rstrip('/')}/start/{slug}?{query}"))
        if not on_task_page(page.url):
            raise RuntimeError(f"{platform_id}: the study link did not open the task page "
                               f"(at {page.url}: {page.inner_text('body')[:200]!r})")
        if rehearsal_key and (arrival is None or arrival.header_value(SIMULATED_HEADER) != "1"):
            raise RuntimeError(
                f"the server did not recognise the rehearsal key: {platform_id} arrived as a real "
                "participant (status allocated, never consented; not analysed)")
        pid = urlsplit(page.url).path.rstrip("/").split("/")[-1]
        agent.pointer = (float(rng.uniform(0.2, 0.8) * width), float(rng.uniform(0.2, 0.8) * height))
        page.mouse.move(*agent.pointer)
        agent.play(timeout_ms)
        return {"participant": pid, "platform_id": platform_id, "agent": "scripted",
                "n_trials": agent.answered}
    finally:
        context.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _in_own_thread(work: Callable[[], T]) -> T:
    """``work()`` in a new thread: Playwright's sync API refuses a thread whose asyncio loop runs
    (a test session whose own Playwright is open, a notebook)."""
    out: list[T] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=target, name="scripted-agent")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out[0]


def run_scripted_participants(base_url: str, slug: str, n_participants: int, seed: int,
                              rehearsal_key: str | None, answers: SimulatedStudy, *,
                              chromium: str = CHROMIUM, headless: bool = True,
                              progress: Callable[[int], object] | None = None) -> list[dict]:
    """``n_participants`` scripted browser participants of study ``slug`` at the running server
    ``base_url``, answering with ``answers``' model; one record per participant
    (``participant``: its public id, ``platform_id``, ``agent``, ``n_trials`` answered)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise RuntimeError("the scripted agent needs Playwright, one of humanlike's test "
                           "dependencies: install humanlike[test]") from exc
    if n_participants < 1:
        raise ValueError("participants must be at least 1")
    if not Path(chromium).exists():
        raise RuntimeError(f"the scripted agent drives Chromium at {chromium}, which is missing "
                           "(Debian: apt-get install chromium)")

    def work() -> list[dict]:
        records = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=headless,
                                         args=list(CHROMIUM_ARGS))
            try:
                for number in range(n_participants):
                    records.append(run_participant(browser, base_url, slug, number, seed,
                                                   rehearsal_key, answers))
                    if progress is not None:
                        progress(1)
            finally:
                browser.close()
        return records

    return _in_own_thread(work) if _loop_running() else work()
