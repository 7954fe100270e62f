"""``humanlike stimuli controversial --objective`` reaches ``SynthesisSettings.objective`` (the
synthesis itself is replaced: only the option parsing is under test)."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

import humanlike.cli.stimuli_controversial as cli


@pytest.fixture
def seen(monkeypatch):
    """The settings the command hands to the synthesis, which stops right there."""
    import humanlike.stimuli.controversial_manifest as manifest

    captured = []

    def stop(models, pairs, out_dir, *, per_pair, seed, settings):
        captured.append(settings)
        raise ValueError("synthesis skipped")

    monkeypatch.setattr(cli, "load_models", lambda *args: (torch.device("cpu"), {"a": 1, "b": 2}))
    monkeypatch.setattr(manifest, "build_controversial_set", stop)
    return captured


@pytest.mark.parametrize(("args", "objective"), [([], "logsigmoid"),
                                                 (["--objective", "golan2020"], "golan2020"),
                                                 (["--objective", "logsigmoid"], "logsigmoid")])
def test_the_objective_option_sets_the_synthesis_objective(seen, tmp_path, args, objective):
    out = CliRunner().invoke(cli.command, ["--out", str(tmp_path), *args])
    assert "synthesis skipped" in out.output and out.exit_code == 2
    assert f"objective: {objective}" in out.output
    assert [s.objective for s in seen] == [objective]


def test_an_unknown_objective_is_refused_before_any_model_loads(seen, tmp_path):
    out = CliRunner().invoke(cli.command, ["--out", str(tmp_path), "--objective", "eq4"])
    assert out.exit_code == 2 and "'eq4' is not one of 'logsigmoid', 'golan2020'" in out.output
    assert seen == []


def test_the_options_choices_are_the_synthesis_objectives():
    from humanlike.stimuli.controversial import OBJECTIVES

    [option] = [p for p in cli.command.params if p.name == "objective"]
    assert sorted(option.type.choices) == sorted(OBJECTIVES)
