"""The agents of ``humanlike simulate --agent`` (server/demo/agents.py), through the real HTTP API:
the model answers with its own probabilities and argmax, the lazy agent with a fixed key, the
replay agent with a recorded human's responses and RTs in their order (issue 39)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.server import database
from tests.server.conftest import write_small_experiment

MVH = shared_data_dir() / "model-vs-human" / "raw-data"
EDGE_01 = MVH / "edge" / "edge_subject-01_session_1.csv"
LABELS = [str(d) for d in range(10)]
SPEEDED = """
[[blocks]]
name = "speeded"
trial_type = "classification"
kinds = ["natural"]
practice = 0
catch_trials = 1

[blocks.classification]
duration_ms = 200

[[conditions]]
"""
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # agents, not backends


@pytest.fixture(scope="module")
def mixed_experiment(tmp_path_factory) -> Path:
    """The small rating experiment plus a classification block, and model 'alpha''s responses
    (random probabilities) to every stimulus, catch images too, in models/."""
    spec = write_small_experiment(tmp_path_factory.mktemp("mixed"))
    spec.write_text(spec.read_text().replace("\n[[conditions]]\n", SPEEDED, 1))
    manifest = pd.read_csv(spec.parent / "stimuli" / "manifest.csv")
    rng = np.random.default_rng(39)
    p = rng.dirichlet(np.ones(10), len(manifest))
    rows = [{"model": "alpha", "stimulus": s, "category": c, "probability": p[i, int(c)]}
            for i, s in enumerate(manifest["file"].astype(str)) for c in LABELS]
    (spec.parent / "models").mkdir()
    pd.DataFrame(rows).to_csv(spec.parent / "models" / "alpha.csv", index=False)
    return spec


def _run(database_url: str, spec: Path, tmp_path: Path, *args: str) -> tuple[str, pd.DataFrame]:
    """``humanlike simulate`` in-process; its output and the stored trials in timeline order."""
    from humanlike.cli import main
    from humanlike.cli.app_context import make_app
    from humanlike.server.extensions import db
    from humanlike.server.tables.core import Participant, Stimulus, Trial

    out = CliRunner().invoke(main, ["simulate", str(spec), "--truth", str(tmp_path / "truth"),
                                    "--database-url", database_url, *args])
    assert out.exit_code == 0, out.output
    app = make_app([str(spec)], database_url)
    with app.app_context():
        rows = db.session.execute(
            sa.select(Participant.platform_id, Trial.trial_index, Trial.trial_type, Stimulus.key,
                      Stimulus.kind, Trial.response, Trial.rt_ms)
            .join(Participant, Trial.participant_id == Participant.id)
            .outerjoin(Stimulus, Trial.stimulus_id == Stimulus.id)
            .where(Trial.trial_type != "debrief")
            .order_by(Participant.platform_id, Trial.trial_index)).all()
        db.session.remove()
    database.dispose(app)
    trials = pd.DataFrame(rows, columns=["participant", "trial_index", "trial_type", "stimulus",
                                         "kind", "response", "rt_ms"])
    return out.output, trials


def _probabilities(spec: Path) -> pd.DataFrame:
    models = pd.read_csv(spec.parent / "models" / "alpha.csv", dtype={"category": str})
    return models.pivot_table(index="stimulus", columns="category", values="probability")[LABELS]


def _labels(trials: pd.DataFrame) -> list[str]:
    """Each trial's answer as one label: a classification's choice, a one-hot rating's 1."""
    out = []
    for kind, response in zip(trials["trial_type"], trials["response"], strict=True):
        if kind == "classification":
            out.append(response["choice"])
        else:
            assert sorted(response["ratings"].values()) == [0.0] * 9 + [1.0], response
            out.append(next(k for k, v in response["ratings"].items() if v == 1.0))
    return out


@SQLITE
def test_the_model_agent_classifies_with_its_argmax_and_rates_with_its_probabilities(
        database_url, mixed_experiment, tmp_path):
    output, trials = _run(database_url, mixed_experiment, tmp_path, "--agent", "model",
                          "--participants", "1")
    assert "observer: model 'alpha' (10 of 10" in output and "agent: model" in output
    p = _probabilities(mixed_experiment)
    chosen = trials[trials["trial_type"] == "classification"]
    assert len(chosen) >= 10
    assert [r["choice"] for r in chosen["response"]] == [
        LABELS[int(np.argmax(p.loc[s]))] for s in chosen["stimulus"]]
    rated = trials[trials["trial_type"] == "rating"]
    assert len(rated) >= 10 and set(rated["kind"]) == {"natural", "catch"}
    for stimulus, response in zip(rated["stimulus"], rated["response"], strict=True):
        # no noise: the nearest quarter of the model's probability, catch images too
        assert response["ratings"] == {c: np.round(p.loc[stimulus, c] * 4) / 4 for c in LABELS}
    assert trials["rt_ms"].nunique() > 10  # human-like (log-normal) RTs
    truth = pd.read_csv(tmp_path / "truth" / "truth_participants.csv")
    assert truth["agent"].tolist() == ["model"] and not truth["fails_catch"].any()


@SQLITE
def test_the_lazy_agent_answers_the_first_label_at_a_nearly_constant_pace(
        database_url, mixed_experiment, tmp_path):
    from humanlike.server.demo.agents import LAZY_JITTER_MS, LAZY_RT_MS

    _, trials = _run(database_url, mixed_experiment, tmp_path, "--agent", "lazy",
                     "--participants", "2")
    assert trials["participant"].nunique() == 2 and len(trials) >= 2 * 20
    assert set(_labels(trials)) == {"0"}
    rt = trials["rt_ms"]
    assert rt.between(LAZY_RT_MS - LAZY_JITTER_MS, LAZY_RT_MS + LAZY_JITTER_MS).all()
    assert rt.nunique() > 1  # jittered
    truth = pd.read_csv(tmp_path / "truth" / "truth_participants.csv")
    assert truth["agent"].tolist() == ["lazy", "lazy"]


@SQLITE
def test_the_replay_agent_gives_a_model_vs_human_subjects_responses_and_rts_in_order(
        database_url, mixed_experiment, tmp_path):
    output, trials = _run(database_url, mixed_experiment, tmp_path, "--agent", "replay",
                          "--replay-source", str(EDGE_01), "--participants", "1")
    assert f"agent: replay (replaying {EDGE_01})" in output
    labels = _labels(trials)
    source = pd.read_csv(EDGE_01)
    # the 16 categories sorted: airplane bear bicycle bird boat bottle car cat chair clock dog
    # elephant keyboard knife oven truck; each replayed as the digit of its rank % 10
    rank = {name: i for i, name in enumerate(sorted(set(source["object_response"])))}
    n = len(trials)
    assert 20 < n < len(source) and set(trials["trial_type"]) == {"rating", "classification"}
    assert labels == [str(rank[r] % 10) for r in source["object_response"][:n]]
    assert trials["rt_ms"].tolist() == (source["rt"][:n] * 1000).round(1).tolist()
    # by hand, from the file: knife 0.868942 s, knife 0.895147 s, elephant 0.909301 s, elephant
    assert labels[:4] == ["3", "3", "1", "1"]
    assert trials["rt_ms"].tolist()[:3] == [868.9, 895.1, 909.3]
    truth = pd.read_csv(tmp_path / "truth" / "truth_participants.csv")
    assert truth["agent"].tolist() == ["replay"]


@SQLITE
def test_the_replay_agent_without_a_source_replays_a_hidden_humans_answers_shuffled(
        database_url, mixed_experiment, tmp_path):
    _, trials = _run(database_url, mixed_experiment, tmp_path, "--agent", "replay",
                     "--participants", "1", "--seed", "7")
    labels = np.array(_labels(trials))  # one-hot ratings and choices, every trial answered
    assert set(labels) <= set(LABELS) and trials["rt_ms"].nunique() == len(trials)
    p = _probabilities(mixed_experiment)
    top = np.array([LABELS[int(np.argmax(p.loc[s]))] for s in trials["stimulus"]])
    classified = (trials["trial_type"] == "classification").to_numpy()
    # a noisy human chooses the model's top class (lapse 5 %); the hidden one's choices, shuffled,
    # land on other images and agree with it only by chance
    assert (labels == top)[classified].mean() < 0.5
    _, human = _run(database_url, mixed_experiment, tmp_path, "--participants", "1", "--seed", "8")
    human = human[(human["participant"] == "sim8-0000") & (human["trial_type"] == "classification")]
    chose = [r["choice"] for r in human["response"]]
    assert np.mean([c == LABELS[int(np.argmax(p.loc[s]))]
                    for c, s in zip(chose, human["stimulus"], strict=True)]) > 0.8


def test_an_exports_participant_is_replayed_in_trial_order_with_its_timeouts(tmp_path):
    from humanlike.server.demo.agents import load_recording, mapped_labels

    path = tmp_path / "classifications.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["participant", "platform_id", "trial_index", "rt_ms", "response"])
        writer.writerows([["p1", "A", 2, "", "na"], ["p1", "A", 0, "512.5", "cat"],
                          ["p2", "B", 0, "700", "dog"], ["p1", "A", 1, "610", "7"]])
    with pytest.raises(ValueError, match="2 participants in column 'participant'"):
        load_recording(path)
    recording = load_recording(path, "A")  # a platform id chooses too
    assert recording.responses.tolist() == ["cat", "7", "na"]
    assert np.array_equal(recording.rt_ms, [512.5, 610.0, np.nan], equal_nan=True)
    # sorted as text: "7" < "cat" < "na"; "7" is a label, the others rank 1 and 2
    assert mapped_labels(recording.responses, LABELS).tolist() == ["1", "7", "2"]
    long = tmp_path / "ratings.csv"
    pd.DataFrame({"participant": "p1", "trial_index": [0, 0, 0, 1, 1, 1],
                  "rt_ms": 900, "category": ["0", "1", "2"] * 2,
                  "rating": [0.25, 0.75, 0.75, 1.0, 0, 0]}).to_csv(long, index=False)
    assert load_recording(long).responses.tolist() == ["1", "0"]  # the top rating; ties: first


@SQLITE
def test_replay_source_errors_name_the_file_and_field_and_send_nothing(
        database_url, mixed_experiment, tmp_path, monkeypatch):
    from humanlike.cli import main
    from humanlike.server.demo import simulate

    def sent(*args, **kwargs):
        raise AssertionError("participants were sent")

    monkeypatch.setattr(simulate, "simulate_participants", sent)
    monkeypatch.setattr(simulate, "api_client", sent)
    no_rt = tmp_path / "no_rt.csv"
    pd.read_csv(EDGE_01).drop(columns="rt").to_csv(no_rt, index=False)
    both = tmp_path / "two.csv"
    pd.concat([pd.read_csv(EDGE_01), pd.read_csv(MVH / "edge" / "edge_subject-02_session_1.csv")]
              ).to_csv(both, index=False)
    model = MVH / "edge" / "edge_resnet50_session-1.csv"
    base = ["simulate", str(mixed_experiment), "--rehearsal-key", "k", "--truth",
            str(tmp_path / "truth"), "--database-url", database_url]
    cases = {
        ("--agent", "replay", "--replay-source", str(tmp_path / "none.csv")):
            f"{tmp_path / 'none.csv'}: no such replay source file",
        ("--agent", "replay", "--replay-source", str(tmp_path)): f"{tmp_path}: no such",
        ("--agent", "replay", "--replay-source", str(no_rt)): f"{no_rt}: no column 'rt'",
        ("--agent", "replay", "--replay-source", str(model)):
            f"{model}: column 'rt': 'NaN' is not a reaction time",
        ("--agent", "replay", "--replay-source", str(both)):
            f"{both}: 2 participants in column 'subj'",
        ("--agent", "replay", "--replay-source", str(both), "--replay-participant", "subject-09"):
            f"{both}: no participant 'subject-09' in column 'subj'",
        ("--agent", "robot"): "Invalid value for '--agent'",
        ("--replay-source", str(EDGE_01)): "--replay-source and --replay-participant are for",
        ("--agent", "scripted"): "--agent scripted drives a browser against a running server",
        ("--agent", "lazy", "--fail-catch", "1"): "the lazy agent answers catch trials its own way",
    }
    runner = CliRunner()
    for args, message in cases.items():
        out = runner.invoke(main, [*base, *args])
        assert out.exit_code != 0 and message in " ".join(out.output.split()), (args, out.output)
    both_ok = runner.invoke(main, [*base, "--agent", "replay", "--replay-source", str(both),
                                   "--replay-participant", "subject-02", "--url", "http://x"])
    assert "participants were sent" in str(both_ok.exception)  # valid: it gets as far as sending


def test_the_scripted_agent_is_imported_lazily_with_a_clear_error(monkeypatch):
    import sys

    import click

    from humanlike.cli.simulate import scripted_runner

    monkeypatch.setitem(sys.modules, "humanlike.server.demo.scripted_agent", None)
    with pytest.raises(click.ClickException, match="scripted_agent.run_scripted_participants"):
        scripted_runner()


def test_the_human_agent_is_the_default_and_an_unknown_agent_is_refused():
    from humanlike.server.demo.simulate import SimulationSettings

    assert SimulationSettings().agent == "human"
    with pytest.raises(ValueError, match="unknown agent 'robot'; the agents are human, model"):
        SimulationSettings(agent="robot")
    assert SimulationSettings(n_participants=6, agent="model").fail_catch == 0

