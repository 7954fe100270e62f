"""The trial-type registry feeds payloads, specs, the codebook and the export; the spec accepts only
types the browser can show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from humanlike.server.export.codebook import codebook
from humanlike.server.participants.payloads import TrialIn
from humanlike.server.study.spec import Block, SpecError, load_spec
from humanlike.server.trial_types.base import TrialType
from humanlike.server.trial_types.rating import rating_frame
from humanlike.server.trial_types.registry import (
    TRIAL_TYPES,
    block_trial_types,
    browser_trial_types,
)

REPO = Path(__file__).resolve().parents[2]


def test_a_classification_block_is_refused_naming_the_file_the_field_and_the_choices(
    small_experiment, monkeypatch
):
    # classification now has a browser trial: a type without one (here classification with its
    # browser flag off) is still refused this way
    from dataclasses import replace

    monkeypatch.setitem(TRIAL_TYPES, "classification",
                        replace(TRIAL_TYPES["classification"], browser=False))
    bad = small_experiment.parent / "classification.toml"
    bad.write_text(small_experiment.read_text().replace('trial_type = "rating"',
                                                        'trial_type = "classification"'))
    try:
        with pytest.raises(SpecError) as info:
            load_spec(bad)
    finally:
        bad.unlink()
    message = str(info.value)
    assert str(bad) in message and "blocks.0 (ratings).trial_type" in message, message
    assert "trial type 'classification' has no browser trial yet; available: rating, triad" in message


def test_an_internal_or_unknown_type_is_not_a_block_type():
    for name in ("debrief", "ratings"):
        with pytest.raises(ValidationError, match=f"unknown trial type '{name}'; available: rating, triad"):
            Block(name="b", trial_type=name, kinds=["natural"])


def test_the_browser_names_are_rating_triad_and_debrief():
    assert browser_trial_types() == ["rating", "triad", "classification", "odd_one_out", "debrief"]
    assert block_trial_types() == ["rating", "triad", "classification", "odd_one_out"]
    assert TRIAL_TYPES["classification"].browser


def test_the_browser_names_match_the_trial_builders_the_task_page_registers():
    # each trial type's browser file registers its builder: HumanlikeTrialTypes.register("<name>", ...)
    page = (REPO / "templates" / "task.html").read_text()
    scripts = re.findall(r"filename='(js/[^']+\.js)'", page)
    assert "js/trial_types.js" in scripts and "js/runner.js" in scripts, scripts
    names = [name for script in scripts
             for name in re.findall(r"HumanlikeTrialTypes\.register\(\s*\"(\w+)\"",
                                    (REPO / "static" / script).read_text())]
    assert sorted(names) == sorted(browser_trial_types())


def test_a_trial_of_an_unregistered_type_is_refused():
    body = '{"trial_index": 0, "trial_type": "slider", "response": {}}'
    with pytest.raises(ValidationError, match="unknown trial type 'slider'"):
        TrialIn.model_validate_json(body)


def test_every_type_has_its_table_and_columns_in_the_codebook():
    book = codebook()
    assert book["trials"]["trial_type"] == "rating | triad | classification | odd_one_out | debrief"
    assert [name for name in book if name in {t.table for t in TRIAL_TYPES.values()}] == [
        "ratings", "triads", "classifications", "odd_one_out", "debrief"]
    for t in TRIAL_TYPES.values():
        assert set(t.columns) <= set(book[t.table]), t.name
        assert ("experiment" in book[t.table]) == (not t.internal), t.name


def test_adding_a_type_is_one_entry(monkeypatch):
    slider = TrialType(
        name="slider", validate=lambda response, labels: None, table="sliders",
        columns={"position": "slider position, 0-1"}, frame=rating_frame, browser=True,
    )
    monkeypatch.setitem(TRIAL_TYPES, "slider", slider)
    trial = TrialIn.model_validate_json('{"trial_index": 0, "trial_type": "slider", "response": {}}')
    assert trial.trial_type == "slider"
    assert Block(name="b", trial_type="slider", kinds=["natural"]).trial_type == "slider"
    assert codebook()["sliders"]["position"] == "slider position, 0-1"
    assert "slider" in browser_trial_types() and "slider" in codebook()["trials"]["trial_type"]
