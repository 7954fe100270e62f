"""A restarted block in a real browser: the participant leaves with an answer still queued in the
browser (the network refused it), comes back through the study link under ``restart_block``, and
the page hands the old answer to the server, which keeps it aside (a ``stale_trial`` event); the
block is asked again from its first trial and every index stores the new attempt's answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Participant, Trial
from tests.e2e.conftest import serving
from tests.e2e.participant_driver import Played
from tests.e2e.test_participant_experience import experience_spec, prolific_page, run_study, shoot

pytestmark = pytest.mark.browser

LINK = "/start/demo?PROLIFIC_PID=RESTART1&STUDY_ID=s&SESSION_ID=x1"
PENDING_JS = "() => Object.keys(JSON.parse(localStorage.getItem('humanlike:' + location.pathname.split('/').pop() + ':pending') || '{}')).map(Number)"


@pytest.fixture(scope="module")
def restart_spec(tmp_path_factory) -> Path:
    spec = experience_spec(tmp_path_factory.mktemp("restart") / "demo")
    spec.write_text(spec.read_text() + '\n[resume]\npolicy = "restart_block"\nmax_age_minutes = 60\n')
    return spec


def stored(app):
    with app.app_context():
        p = db.session.execute(sa.select(Participant).where(
            Participant.platform_id == "RESTART1")).scalar_one_or_none()
        if p is None:
            return None, {}, []
        rows = db.session.execute(sa.select(Trial).where(Trial.participant_id == p.id)).scalars()
        trials = {t.trial_index: (t.block, t.response) for t in rows}
        events = [(e.type, e.value) for e in db.session.execute(
            sa.select(Event).where(Event.participant_id == p.id).order_by(Event.id)).scalars()]
        db.session.expunge_all()
        return p, trials, events


def answer_two(server, page, played) -> None:
    """Open the study link and answer two trials, both acknowledged by the server."""
    page.goto(server.url + LINK)
    run_study(page, played, until="https://app.prolific.com", stop_after=2)
    for _ in range(100):
        if len(stored(server.app)[1]) == 2:
            break
        page.wait_for_timeout(100)
    assert sorted(stored(server.app)[1]) == [0, 1]


def test_an_answer_queued_before_a_restart_is_kept_aside_and_the_block_asked_again(
        database_url, restart_spec, chromium, tmp_path):
    with serving(database_url, restart_spec) as server:
        context, page = prolific_page(chromium)
        try:
            played = Played()
            answer_two(server, page, played)
            page.route("**/trials", lambda route: route.abort())  # the network drops the third
            run_study(page, played, until="https://app.prolific.com", stop_after=1)
            page.wait_for_function(f"() => ({PENDING_JS})().includes(2)")
            queued_answer = played.ratings[2]
            page.close()  # the tab is closed; its local storage stays with the browser

            again = context.new_page()
            again.set_default_timeout(30000)
            again.goto(server.url + LINK)  # back through the study link: a return
            again.wait_for_selector("[data-screen=resume]")
            shoot(again, tmp_path, "restart_welcome_back")
            for _ in range(100):  # the old answer is handed over at once and dropped locally
                if any(kind == "stale_trial" for kind, _ in stored(server.app)[2]):
                    break
                again.wait_for_timeout(100)
            assert again.evaluate(PENDING_JS) == []
            p, trials, events = stored(server.app)
            assert trials == {}, [(k, v) for k, v in events if k != "environment"]  # the block's two stored answers moved into the decision event
            [decision] = [v for kind, v in events if kind == "resume_policy"]
            assert decision["action"] == "restart_block" and decision["attempt"] == 1
            assert [r["trial_index"] for r in decision["restarted"]] == [0, 1]
            [stale] = [v for kind, v in events if kind == "stale_trial"]
            assert (stale["trial_index"], stale["attempt"], stale["current_attempt"]) == (2, 0, 1)
            assert stale["response"]["ratings"] == queued_answer
            welcome = again.inner_text("[data-screen=resume]")
            assert "starts again from its beginning: trial 1 of" in welcome  # the block's start

            run_study(again, played, until="https://app.prolific.com")
            p, trials, events = stored(server.app)
            assert p.status == "completed"
            assert sorted(trials) == list(range(p.n_trials)), "every index once"
            # the second attempt's answers, in the order they were given (three before it, one catch)
            second = played.ratings[3:]
            rated = [trials[i][1]["ratings"] for i in sorted(trials) if "ratings" in trials[i][1]]
            assert rated[:3] == second[:3]
            assert sum(kind == "stale_trial" for kind, _ in events) == 1
        finally:
            context.close()


def test_a_window_left_open_says_it_is_out_of_date_once_the_block_restarted_elsewhere(
        database_url, restart_spec, chromium, tmp_path):
    """The participant comes back in a second tab of the same browser while the first is still
    open; the block restarts there. The next answer given in the first tab is kept aside by the
    server, and that tab stops and says where the study goes on (it does not complete)."""
    with serving(database_url, restart_spec) as server:
        context, first = prolific_page(chromium)
        try:
            played = Played()
            answer_two(server, first, played)
            second = context.new_page()
            second.set_default_timeout(30000)
            second.goto(server.url + LINK)  # a return in another tab: the block restarts
            second.wait_for_selector("[data-screen=resume]")
            run_study(first, played, until="https://app.prolific.com", stop_after=1)
            first.wait_for_selector("#outdated")
            assert "goes on there" in first.inner_text("#outdated")
            shoot(first, tmp_path, "restart_window_out_of_date")
            p, trials, events = stored(server.app)
            assert trials == {} and p.status != "completed"
            [stale] = [v for kind, v in events if kind == "stale_trial"]
            assert (stale["trial_index"], stale["attempt"], stale["current_attempt"]) == (2, 0, 1)
            first.wait_for_timeout(1500)  # nothing else happens in the old tab
            assert first.query_selector("#outdated") is not None
            assert stored(server.app)[0].status != "completed"
        finally:
            context.close()
