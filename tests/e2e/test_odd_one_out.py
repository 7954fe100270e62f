"""The odd-one-out trial in Chromium on the real task page: keys 1-3 and clicks answer it, the
server stores what was shown and chosen, and the export's ``odd_one_out`` table names the image
the participant saw at the chosen position (screenshots of the first two trials are kept); the
trial announces its state in its status region and has no serious axe-core violation."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from humanlike.server.export.writer import write_export
from tests.e2e.conftest import serving
from tests.e2e.participant_driver import STATE_JS, Played, play, press_button_screen
from tests.e2e.test_accessibility import AUDIT_JS, AXE, _live_region
from tests.e2e.test_demo_experiment import PROLIFIC_DONE, new_page, stored
from tests.server.test_odd_one_out import write_odd_experiment

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "odd_one_out"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the trial, not the backend
def test_an_odd_one_out_block_is_answered_in_the_browser_stored_and_exported(
        chromium, database_url, tmp_path):
    spec = write_odd_experiment(tmp_path / "odd", triplets=5)
    with serving(database_url, spec) as live:
        context, page = new_page(chromium)
        page.goto(f"{live.url}/start/odd?PROLIFIC_PID=odd1&STUDY_ID=s1&SESSION_ID=x1")
        played = play(page, Played(screenshot_dir=ARTIFACTS), max_trials=1)  # the practice
        while True:  # past the "practice over" screen to the first main trial
            page.wait_for_function(f"() => !['busy', 'saving'].includes(({STATE_JS})())")
            if page.evaluate(STATE_JS) == "odd_one_out":
                break
            press_button_screen(page)
        announced = _live_region(page, ".hl-odd")
        page.evaluate(AXE.read_text())
        violations = page.evaluate(AUDIT_JS)
        played = play(page, played, until=PROLIFIC_DONE)
        context.close()
        p, trials = stored(live.app, "odd1")
        with live.app.app_context():
            write_export("odd", tmp_path / "export")
    assert p.status == "completed"
    assert announced.startswith("Which image is the odd one out? Press 1")
    assert violations == []
    odd = [t for t in trials if t.trial_type == "odd_one_out"]
    assert len(odd) == len(played.odd_one_out) == 5 + 1 + 2  # triplets, practice, repeats
    assert [t.response["choice"] for t in odd] == [choice for _, choice in played.odd_one_out]
    assert {t.response["input_modality"] for t in odd} == {"keyboard", "mouse"}
    for t, (srcs, _) in zip(odd, played.odd_one_out, strict=True):
        # the images shown left to right are the stored design's, in its order
        assert [src.rsplit("/", 1)[-1] for src in srcs] == [k.rsplit("/", 1)[-1] for k in t.design["stimuli"]]
        assert t.rt_ms is not None and t.rt_ms > 0 and t.frames >= 1
    table = pd.read_csv(tmp_path / "export" / "odd_one_out.csv").sort_values("trial_index")
    at = {"left": 0, "middle": 1, "right": 2}
    shown = [[src.rsplit("/", 1)[-1] for src in srcs] for srcs, _ in played.odd_one_out]
    chosen = [s[at[c]] for s, (_, c) in zip(shown, played.odd_one_out, strict=True)]
    assert [k.rsplit("/", 1)[-1] for k in table["odd_one_out"]] == chosen
    assert table["practice"].sum() == 1 and table["is_repeat"].sum() == 2
    assert all((ARTIFACTS / f"odd-one-out-response-{k}.png").is_file() for k in (0, 1))
