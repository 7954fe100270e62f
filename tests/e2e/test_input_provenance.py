"""Input provenance in a real browser (issue 39): a participant driven by Playwright's mouse and
keyboard (input the browser marks trusted) and one whose answers page script produces
(``element.click()``: untrusted) store "input" events that say so, and ``input_signals`` on the
stored events tells them apart."""

from __future__ import annotations

import time

import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.analysis.authenticity.provenance import input_signals
from humanlike.analysis.authenticity.verdict import verdicts
from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Participant
from tests.e2e.conftest import serving
from tests.e2e.participant_driver import STATE_JS, Played, play
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser

TRIALS = 3


@pytest.fixture
def server(database_url, tmp_path):
    with serving(database_url, write_small_experiment(tmp_path / "small")) as live:
        yield live


def open_task(chromium, server, who: str):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{server.url}/start/small?PROLIFIC_PID={who}&STUDY_ID=s1&SESSION_ID=x{who}")
    page.wait_for_selector("#consent-agree:not([disabled])")
    return context, page


def answer_by_script(page, n: int) -> None:
    """Answer `n` ratings with `element.click()` run in the page, never with Playwright's input."""
    answered = 0
    while answered < n:
        page.wait_for_function(f"() => !['busy', 'saving'].includes(({STATE_JS})())")
        state = page.evaluate(STATE_JS)
        if state == "consent":
            page.evaluate("() => document.querySelector('#consent-agree').click()")
            page.wait_for_selector("#consent-agree", state="detached")
        elif state == "instructions":
            page.evaluate("""() => {
              const group = document.querySelector('#jspsych-html-button-response-btngroup');
              group.dataset.answered = '1';
              group.querySelector('button').click();
            }""")
            page.wait_for_selector("#jspsych-html-button-response-btngroup[data-answered]", state="detached")
        elif state == "rating":
            page.evaluate("""() => {
              const root = document.querySelector('.hl-rating');
              root.dataset.answered = '1';
              root.querySelector('.hl-level[data-row="0"][data-index="2"]').click();
              root.querySelector('.hl-submit').click();
            }""")
            page.wait_for_selector(".hl-rating[data-answered]", state="detached")
            answered += 1
        else:
            raise AssertionError(f"unexpected screen {state}")


def stored_events(server, who: str, n_inputs: int) -> pd.DataFrame:
    """The participant's events once `n_inputs` input events are stored (the page sends them
    in the background)."""
    query = (sa.select(Participant.platform_id.label("participant"), Event.type, Event.value)
             .join(Participant, Event.participant_id == Participant.id)
             .where(Participant.platform_id == who).order_by(Event.id))
    deadline = time.monotonic() + 10
    while True:
        with server.app.app_context():
            events = pd.DataFrame(db.session.execute(query).mappings().all(),
                                  columns=["participant", "type", "value"])
        if (events["type"] == "input").sum() >= n_inputs or time.monotonic() > deadline:
            return events
        time.sleep(0.1)


def input_sums(events: pd.DataFrame) -> dict:
    values = events.loc[events["type"] == "input", "value"].tolist()
    return {key: sum(v[key] for v in values) for key in ("trusted", "untrusted", "pointer_moves")}


def test_trusted_and_scripted_input_are_told_apart(chromium, server):
    context, page = open_task(chromium, server, "person")
    try:
        page.click("#consent-agree")  # Playwright's mouse: a move, then a press
        play(page, Played(), max_trials=TRIALS)  # Playwright's keyboard
        automated = page.evaluate("navigator.webdriver === true")
        person = stored_events(server, "person", TRIALS)
    finally:
        context.close()
    context, page = open_task(chromium, server, "script")
    try:
        answer_by_script(page, TRIALS)
        script = stored_events(server, "script", TRIALS)
    finally:
        context.close()

    inputs = person[person["type"] == "input"]["value"].tolist()
    assert len(inputs) == TRIALS and {v["webdriver"] for v in inputs} == {automated}
    sums = input_sums(person)
    assert sums["trusted"] > 0 and sums["untrusted"] == 0 and sums["pointer_moves"] > 0
    [environment] = person.loc[person["type"] == "environment", "value"]
    assert environment["webdriver"] is automated
    sums = input_sums(script)
    assert sums["untrusted"] >= 2 * TRIALS and sums["trusted"] == 0  # a level and Submit a trial

    signals = input_signals(pd.concat([person, script], ignore_index=True))
    assert signals.loc["person", "trusted_inputs"] > 0 and signals.loc["person", "untrusted_inputs"] == 0
    assert signals.loc["person", "clicks_without_move_share"] < 1  # the consent click followed a move
    assert signals.loc["script", "untrusted_inputs"] > 0 and signals.loc["script", "trusted_inputs"] == 0
    assert signals["webdriver"].tolist() == [automated, automated]
    assert signals["input_recorded"].all() and (signals["pastes"] == 0).all()
    # the verdict: synthetic input is decisive; the person's own input is not; automation is
    # decisive for both where this browser reports it (Playwright's Chromium does)
    words = verdicts(signals)
    assert "synthetic input events (isTrusted false)" in words.loc["script", "authenticity_reasons"]
    assert "synthetic" not in words.loc["person", "authenticity_reasons"]
    assert ("navigator.webdriver" in words.loc["person", "authenticity_reasons"]) is automated
    assert words.loc["script", "authenticity"] == "flagged"
    assert words.loc["person", "authenticity"] == ("flagged" if automated else "pass")
