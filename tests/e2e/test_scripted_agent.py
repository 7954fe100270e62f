"""The scripted browser agent (issue 39) takes part through the real task page: one participant of
a small study (a rating, a catch rating, two classifications, a debrief) on a live server,
answering with a model whose most probable class is never the true one, so its answers can only
have come from the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Participant, Trial
from tests.e2e.conftest import serving
from tests.server.conftest import write_small_experiment

pytestmark = pytest.mark.browser

CLASSIFICATION = """
[[blocks]]
name = "classify"
trial_type = "classification"
kinds = ["natural"]
max_trials = 2

[blocks.classification]
fixation_ms = 200
duration_ms = 100
mask_ms = 100
"""


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory) -> Path:
    path = write_small_experiment(tmp_path_factory.mktemp("agent"))
    text = path.read_text().replace("practice = 1\ncatch_trials = 2\nrepeats = 2",
                                    "practice = 0\ncatch_trials = 1\nrepeats = 0\nmax_trials = 1")
    path.write_text(text + CLASSIFICATION)
    # the model: the class three further on (60 %), the true class (30 %), the rest 1.25 % each;
    # natural images only, so catch images are answered with their true class
    manifest = pd.read_csv(path.parent / "stimuli" / "manifest.csv")
    rows = []
    for file, true_class in manifest.loc[manifest["kind"] == "natural", ["file", "true_class"]].values:
        for c in range(10):
            p = 0.6 if c == (int(true_class) + 3) % 10 else 0.3 if c == int(true_class) else 0.0125
            rows.append({"model": "candidate", "stimulus": file, "category": str(c), "probability": p})
    pd.DataFrame(rows).to_csv(path.parent / "stimuli" / "model_responses.csv", index=False)
    return path


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the agent, not the backend
def test_a_scripted_participant_finishes_with_the_models_answers_at_a_human_pace(
        database_url, spec_path, monkeypatch):
    from humanlike.server.demo import scripted_agent
    from humanlike.server.demo.simulate import (
        SimulatedStudy,
        SimulationSettings,
        find_model_responses,
        load_responses,
    )
    from humanlike.server.participants.rehearsal import rehearsal_key

    paths, _ = find_model_responses(spec_path)
    answers = SimulatedStudy(spec_path, SimulationSettings(n_participants=1), load_responses(paths))
    assert answers.observer == "candidate"
    # text screens skimmed four times faster than by default: the test's wall time (trials and
    # their waits as the agent has them)
    monkeypatch.setattr(scripted_agent, "READ_MS_PER_WORD", scripted_agent.READ_MS_PER_WORD / 4)
    with serving(database_url, spec_path) as live:
        records = scripted_agent.run_scripted_participants(
            live.url, "small", 1, 7, rehearsal_key("e2e", "small"), answers)
        with live.app.app_context():
            p = db.session.execute(sa.select(Participant)).scalar_one()
            trials = db.session.execute(sa.select(Trial).where(Trial.participant_id == p.id)
                                        .order_by(Trial.trial_index)).scalars().all()
            events = db.session.execute(sa.select(Event).where(Event.participant_id == p.id)
                                        ).scalars().all()
            db.session.expunge_all()

    assert records == [{"participant": p.public_id, "platform_id": "agent7-0000",
                        "agent": "scripted", "n_trials": p.n_trials}]
    assert p.status == "completed" and p.simulated
    assert [t.trial_index for t in trials] == list(range(p.n_trials))

    classified = [t for t in trials if t.trial_type == "classification"]
    assert len(classified) == 2
    for t in classified:
        argmax = answers.labels[int(np.argmax(answers.model_p(t.design["stimulus"])))]
        assert t.response["choice"] == argmax
        assert t.response["input_modality"] == "mouse"
    rated = [t for t in trials if t.trial_type == "rating"]
    assert rated
    for t in rated:  # each category at the level nearest the model's probability
        p_model = answers.model_p(t.design["stimulus"])
        levels = np.array([0, 0.25, 0.5, 0.75, 1.0])
        expected = {label: float(levels[np.argmin(abs(levels - q))])
                    for label, q in zip(answers.labels, p_model, strict=True)}
        assert t.response["ratings"] == expected

    # human-like timing: log-normal waits, never the same twice, never inhumanly fast
    rts = [t.rt_ms for t in classified + rated]
    assert len(set(rts)) == len(rts) and np.std(rts) > 20
    assert all(300 < rt < 10_000 for rt in rts)

    # what the page records of the browser, where it records it (before and after the page
    # reports the automation flag and its input counts)
    [environment] = [e.value for e in events if e.type == "environment"]
    if "webdriver" in environment:
        assert environment["webdriver"] is False
    inputs = [e.value for e in events if e.type == "input"]
    if inputs:
        assert all(v["untrusted"] == 0 for v in inputs)
        assert sum(v["pointer_moves"] for v in inputs) > 0
        assert all(v.get("webdriver") in (False, None) for v in inputs)
