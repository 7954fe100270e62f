"""Input provenance per participant (``provenance.input_signals``) against counts taken by hand."""

import numpy as np
import pandas as pd

from humanlike.analysis.authenticity.provenance import input_signals


def _input(trusted=0, untrusted=0, clicks=0, clicks_without_move=0, pastes=0, webdriver=False):
    return {"trusted": trusted, "untrusted": untrusted, "pointer_moves": 3 * trusted,
            "clicks": clicks, "clicks_without_move": clicks_without_move, "pastes": pastes,
            "webdriver": webdriver}


EVENTS = pd.DataFrame([
    # a person: two flushes, a paste into the debrief, two focus losses, one hidden page
    ("a", "environment", {"refresh_hz": 60, "webdriver": False}),
    ("a", "input", _input(trusted=10, clicks=4, clicks_without_move=1)),
    ("a", "blur", None),
    ("a", "visibility", {"value": "hidden"}),  # as the server stores a bare value
    ("a", "visibility", {"value": "visible"}),
    ("a", "focus", None),
    ("a", "input", _input(trusted=5, pastes=1)),
    ("a", "blur", None),
    # a script: synthetic clicks, automation reported by the input events
    ("b", "input", _input(untrusted=6, clicks=3, clicks_without_move=3, webdriver=True)),
    # an old page (or an API client): no input event, so no provenance, not suspicious
    ("c", "environment", {"refresh_hz": 60}),
    ("c", "blur", None),
    ("c", "visibility", "hidden"),
    ("c", "resume", {"next_index": 3}),
    # only the first (all-zero) flush, and automation reported by the environment event alone
    ("d", "environment", {"refresh_hz": 120, "webdriver": True}),
    ("d", "input", _input()),
], columns=["participant", "type", "value"])


def test_input_signals_sum_each_participants_flushes_and_leave_unrecorded_provenance_nan():
    expected = pd.DataFrame({
        "trusted_inputs": [15.0, 0.0, np.nan, 0.0],
        "untrusted_inputs": [0.0, 6.0, np.nan, 0.0],
        "clicks": [4.0, 3.0, np.nan, 0.0],
        "clicks_without_move_share": [0.25, 1.0, np.nan, np.nan],
        "pastes": [1.0, 0.0, np.nan, 0.0],
        "webdriver": [False, True, False, True],
        "focus_losses": [2, 0, 1, 0],
        "hidden": [1, 0, 1, 0],
        "input_recorded": [True, True, False, True],
    }, index=pd.Index(["a", "b", "c", "d"], name="participant"))
    pd.testing.assert_frame_equal(input_signals(EVENTS), expected)


def test_input_signals_of_no_events_is_an_empty_table_with_every_column():
    out = input_signals(EVENTS.iloc[:0])
    assert out.empty and list(out.columns) == [
        "trusted_inputs", "untrusted_inputs", "clicks", "clicks_without_move_share", "pastes",
        "webdriver", "focus_losses", "hidden", "input_recorded"]
