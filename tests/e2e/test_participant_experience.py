"""The participant's side in a real browser: the MTurk flow inside a cross-site frame, resume after
the browser closed, and the screens a study shows around its trials (screenshots kept)."""

from __future__ import annotations

import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.study import experiments
from humanlike.server.tables.core import Event, Participant, Trial
from tests.e2e.conftest import LiveServer
from tests.e2e.participant_driver import STATE_JS, Played, play

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/shots/p11")
SANDBOX_SUBMIT = "https://workersandbox.mturk.com/mturk/externalSubmit"

SCREEN_JS = """() => {
  const s = document.querySelector('[data-screen]');
  if (document.querySelector('#practice-label') && document.querySelector('.hl-rating, .hl-triad')) return 'practice';
  return s ? s.dataset.screen : null;
}"""


def experience_spec(dest: Path) -> Path:
    """The demo's stimuli with a short timeline and every experience setting switched on."""
    from humanlike.server.demo.build import build_demo

    spec = build_demo(dest, controversial=False, classification=False)  # rating + triad screens
    text = spec.read_text()
    text = text.replace('allow_mobile = false', 'allow_mobile = false\nbreak_every = 4')
    text = text.replace('mode = "until_response"', 'mode = "duration"\nduration_ms = 50\n'
                        'fixation_ms = 500\niti_ms = 200')
    text = text.replace('catch_trials = 3\nrepeats = 4\n', 'catch_trials = 1\nrepeats = 1\n'
                        'max_trials = 3\npractice_feedback = true\n'
                        'intro = "Rate how much each image looks like each digit."\n')
    text = text.replace('kinds = ["mlds"]\nrepeats = 4\n', 'kinds = ["mlds"]\nrepeats = 1\n'
                        'max_trials = 3\nintro = "Compare the two outer images with the middle one."\n')
    text += ('\n[[debrief]]\nname = "vision"\ntext = "Do you wear glasses?"\n'
             'options = ["yes", "no", "prefer not to say"]\n')
    spec.write_text(text)
    return spec


@pytest.fixture(scope="module")
def exp_spec(tmp_path_factory) -> Path:
    return experience_spec(tmp_path_factory.mktemp("experience") / "demo")


@pytest.fixture(scope="module")
def mturk_spec(exp_spec, tmp_path_factory) -> Path:
    """The same study declaring MTurk-format links (the demo declares Prolific, which takes no
    other source's links)."""
    dest = tmp_path_factory.mktemp("experience_mturk") / "demo"
    shutil.copytree(exp_spec.parent, dest)
    spec = dest / exp_spec.name
    spec.write_text(spec.read_text().replace('platform = "prolific"', 'platform = "mturk"'))
    return spec


@pytest.fixture
def server(database_url, exp_spec):
    yield from _serve(database_url, exp_spec)


@pytest.fixture
def mturk_server(database_url, mturk_spec):
    yield from _serve(database_url, mturk_spec)


def _serve(database_url, spec: Path):
    mturk = "https://www.mturk.com https://workersandbox.mturk.com"
    app = create_app({"SECRET_KEY": "e2e", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(spec)],
                      # the fake MTurk below frames the study from http://localhost:<port>
                      "FRAME_ANCESTORS": f"{mturk} http://localhost:*",
                      "FORM_ACTION": f"{mturk} http://localhost:*"})
    database.upgrade(app)
    experiments.sync_all(app)
    live = LiveServer(app)
    yield live
    live.stop()
    database.dispose(app)


class FakeMTurk:
    """MTurk on `localhost`: a HIT page framing the study on 127.0.0.1, and externalSubmit."""

    def __init__(self, study_url: str):
        submissions: list[dict[str, list[str]]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = (f"<!doctype html><h1>HIT (test double)</h1><iframe id='hit' "
                        f"src='{study_url}' style='width:1280px;height:720px;border:0'></iframe>")
                self._reply(body)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                submissions.append(parse_qs(raw))
                self._reply("<h1>Submitted to MTurk (test double)</h1>")

            def _reply(self, body: str):
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.submissions = submissions
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://localhost:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


class InFrame:
    """The participant driver's view of a page, pointed at a frame (keyboard from the page)."""

    def __init__(self, page, frame):
        self._page, self._frame = page, frame
        self.keyboard = page.keyboard

    def __getattr__(self, name):
        return getattr(self._frame, name)


def shoot(page, tmp_path: Path, name: str) -> None:
    """Save a screenshot as a test artifact and copy it to /tmp/shots/p11/."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path))
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SHOTS / path.name)


def run_study(view, played: Played, *, until: str, shots: dict[str, int] | None = None,
              shooter=None, stop_after: int | None = None) -> list[str]:
    """Answer every screen and trial until the page leaves for `until` (or `stop_after` trials);
    returns the screens seen in order. ``shooter(screen)`` runs the first time each screen
    appears; when it returns True it has moved the page on itself."""
    seen: list[str] = []
    answered = 0
    while True:
        if view.url.startswith(until) or (stop_after is not None and answered >= stop_after):
            return seen
        view.wait_for_function(  # a function, not an expression string: the CSP forbids eval
            f"() => (() => {{ const s = ({STATE_JS})(); return s !== 'busy' && s !== 'saving'; }})()"
            f" || location.href.startsWith({until!r})", timeout=30000)
        if view.url.startswith(until):
            return seen
        screen = view.evaluate(SCREEN_JS)
        state = view.evaluate(STATE_JS)
        if screen:
            seen.append(screen)
            if shooter is not None and shots is not None and screen not in shots:
                shots[screen] = 1
                if shooter(screen):
                    continue
        if state == "debrief":
            view.check("input[name=vision][value=no]")
            view.fill("#debrief-strategy", "I looked at the shapes.")
            view.fill("#debrief-problems", "Nothing went wrong.")
            view.click("#jspsych-survey-html-form-next")
            view.wait_for_selector("#jspsych-survey-html-form", state="detached")
        elif state in ("rating", "triad"):
            play(view, played, max_trials=1)
            answered += 1
        else:  # consent or a "continue" screen: its button has the focus, Enter presses it
            button = ("#consent-agree" if state == "consent"
                      else "#jspsych-html-button-response-btngroup button")
            view.eval_on_selector(button, "b => { b.dataset.pressed = '1'; }")
            view.keyboard.press("Enter")
            view.wait_for_selector(button + "[data-pressed]", state="detached")


def participant(app, platform_id: str):
    with app.app_context():
        p = db.session.execute(sa.select(Participant).where(Participant.platform_id == platform_id)
                               ).scalar_one()
        trials = db.session.execute(sa.select(Trial).where(Trial.participant_id == p.id)
                                    .order_by(Trial.trial_index)).scalars().all()
        events = db.session.execute(sa.select(Event.type).where(Event.participant_id == p.id)
                                    ).scalars().all()
        db.session.expunge_all()
        return p, trials, events


def test_mturk_flow_completes_inside_a_cross_site_frame(mturk_server, chromium, tmp_path):
    server = mturk_server
    study = f"{server.url}/start/demo"
    fake = FakeMTurk(f"{study}?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    context = chromium.new_context(viewport={"width": 1300, "height": 800})
    context.route(SANDBOX_SUBMIT, lambda route: route.fulfill(
        response=route.fetch(url=fake.url + "/mturk/externalSubmit")))
    page = context.new_page()
    page.set_default_timeout(30000)
    try:
        page.goto(fake.url + "/")
        frame = page.frame_locator("#hit")
        frame.locator("text=This is a preview").wait_for()
        shoot(page, tmp_path, "mturk_preview")
        accept = (f"{study}?assignmentId=A1&hitId=H1&workerId=W1"
                  f"&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com")
        page.evaluate("url => { document.getElementById('hit').src = url; }", accept)
        frame.locator("#consent-agree").wait_for()
        inner = page.frame(url=lambda u: u.startswith(server.url + "/run/"))
        assert inner is not None and "#token" not in inner.url, "the token left the address bar"
        shoot(page, tmp_path, "mturk_consent_in_frame")
        assert context.cookies(server.url) == [], "the cross-site frame keeps no cookie"
        inner.click("#consent-agree")
        played = Played()
        run_study(InFrame(page, inner), played, until="https://workersandbox.mturk.com")
        for _ in range(100):
            if fake.submissions:
                break
            page.wait_for_timeout(100)
        assert fake.submissions == [{"assignmentId": ["A1"], "completion": ["done"]}]
        p, trials, _ = participant(server.app, "W1")
        assert p.status == "completed" and p.assignment_id == "A1"
        assert [t.trial_index for t in trials] == list(range(p.n_trials))
        assert len(played.ratings) + len(played.triads) == p.n_trials - 1
    finally:
        context.close()
        fake.stop()


def prolific_page(chromium, size=(1280, 720)):
    context = chromium.new_context(viewport={"width": size[0], "height": size[1]})
    context.route("https://app.prolific.com/**", lambda route: route.fulfill(
        status=200, body="<h1>Prolific (test double)</h1>", content_type="text/html"))
    page = context.new_page()
    page.set_default_timeout(30000)
    return context, page


def test_a_closed_browser_resumes_at_the_right_trial_with_the_same_session_id(server, chromium,
                                                                              tmp_path):
    link = f"{server.url}/start/demo?PROLIFIC_PID=R1&STUDY_ID=s&SESSION_ID=x1"
    context, page = prolific_page(chromium)
    played = Played()
    page.goto(link)
    run_study(page, played, until="https://app.prolific.com", stop_after=5)
    for _ in range(100):  # the five answers are acknowledged before the browser "crashes"
        if len(participant(server.app, "R1")[1]) == 5:
            break
        page.wait_for_timeout(100)
    context.close()  # cookies and storage gone

    context, page = prolific_page(chromium)
    try:
        page.goto(link)
        page.wait_for_selector("[data-screen=resume]")
        assert "trial 6 of" in page.inner_text("[data-screen=resume]")
        assert page.inner_text("#progress-text").startswith("5 / ")
        shoot(page, tmp_path, "resume_welcome_back")
        run_study(page, played, until="https://app.prolific.com")
        p, trials, events = participant(server.app, "R1")
        assert p.status == "completed"
        assert [t.trial_index for t in trials] == list(range(p.n_trials)), "exact, no duplicates"
        assert events.count("resume") >= 1
        refused = context.new_page()
        refused.goto(f"{server.url}/start/demo?PROLIFIC_PID=R1&STUDY_ID=s&SESSION_ID=x2")
        assert "already taken part" in refused.inner_text("body")
    finally:
        context.close()


def test_screens_appear_where_the_spec_puts_them(server, chromium, tmp_path):
    context, page = prolific_page(chromium, size=(1280, 600))
    shots: dict[str, int] = {}
    try:
        page.goto(f"{server.url}/start/demo?PROLIFIC_PID=E1&STUDY_ID=s&SESSION_ID=x1")
        page.wait_for_selector("#duration-estimate")
        assert "minutes" in page.inner_text("#duration-estimate")
        shoot(page, tmp_path, "consent_with_estimate")

        def shooter(screen: str) -> None:
            shoot(page, tmp_path, f"screen_{screen}")
            if screen == "practice" and page.locator(".hl-submit").count():
                box = page.locator(".hl-submit").bounding_box()
                assert box is not None and box["y"] + box["height"] <= 600, "submit needs no scroll"
            if screen == "intro" and "fixation" not in shots:
                page.keyboard.press("Enter")
                page.wait_for_function(
                    "() => { const m = document.querySelector('.hl-fixation[data-screen=fixation] "
                    ".hl-fixation-mark'); return m && m.style.visibility === 'visible'; }",
                    polling="raf")
                shots["fixation"] = 1
                shoot(page, tmp_path, "screen_fixation")
                return True
            return False

        seen = run_study(page, Played(), until="https://app.prolific.com", shots=shots,
                         shooter=shooter)
        page.wait_for_url("https://app.prolific.com/**")
        assert seen[:3] == ["instructions", "intro", "practice"] or seen[0] == "intro", seen
        assert "practice_feedback" in seen and "practice_over" in seen and "break" in seen
        assert seen.index("practice_over") > seen.index("practice")
        p, trials, _ = participant(server.app, "E1")
        assert p.status == "completed"
        timed = [t for t in trials if t.trial_type in ("rating", "triad")]
        frame_ms = 1000 / p.refresh_hz
        requested = max(1, round(50 / frame_ms))
        for t in timed:  # duration mode: whole frames
            assert isinstance(t.frames, int) and t.frames >= 1
            assert t.response["requested_frames"] == requested
        full = [t for t in timed if t.rt_ms - t.presented_ms > 1]  # hidden by the clock first
        assert full, "some images stayed their whole duration"
        for t in full:  # at least the frames requested (more only if the browser dropped frames),
            assert t.frames >= requested  # and the measured time is that many whole frames
            assert abs(t.presented_ms - t.frames * frame_ms) <= frame_ms / 2 + 0.1
        debrief = next(t for t in trials if t.trial_type == "debrief")
        assert debrief.response["answers"]["vision"] == "no"
    finally:
        context.close()
    for name in ("screen_intro", "screen_practice", "screen_fixation", "screen_break",
                 "screen_practice_over"):
        assert (tmp_path / f"{name}.png").is_file(), name
