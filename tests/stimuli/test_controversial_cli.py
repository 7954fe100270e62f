"""``humanlike stimuli controversial``: writes PNGs, manifest.csv and model_responses.csv, loads
models declared in a TOML, refuses pickled model files, and rejects malformed pairs and devices."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from humanlike.cli.stimuli_controversial import command
from humanlike.stimuli.demo_models import demo_models

from .model_files import cnn_as_toml


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "demo-models"
    demo_models(cache_dir=path)
    return path


def test_cli_writes_manifest_and_responses_for_a_toml_and_a_demo_model(cache, tmp_path):
    toml = cnn_as_toml(demo_models(["cnn"], cache_dir=cache)["cnn"], tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        command,
        [
            "--models", f"logreg,mine={toml}",
            "--pairs", "mine:logreg",
            "--out", str(out),
            "--cache-dir", str(cache),
            "--max-steps", "60",
            "--max-attempts", "1",
            "--device", "cpu",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "device: cpu" in result.output
    assert "mine vs logreg:" in result.output and "class pairs reached c >= 0.85" in result.output
    manifest = pd.read_csv(out / "manifest.csv")
    assert len(manifest) == 20
    assert set(manifest.targeted_model_1) == {"mine"}
    assert all((out / f).is_file() for f in manifest.file)
    responses = pd.read_csv(out / "model_responses.csv")
    assert set(responses.model) == {"mine", "logreg"} and len(responses) == 2 * 20 * 10


def test_cli_refuses_a_pickled_model_file(cache, tmp_path):
    saved = demo_models(["cnn"], cache_dir=cache)["cnn"].save(tmp_path / "my_cnn.pt")
    result = CliRunner().invoke(
        command, ["--models", f"logreg,mine={saved}", "--out", str(tmp_path / "o"),
                  "--cache-dir", str(cache)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "refuses to unpickle" in result.output and "TOML" in result.output
    assert not (tmp_path / "o").exists()


def test_cli_names_an_absent_gpu(cache, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = CliRunner().invoke(
        command, ["--models", "cnn,kde", "--device", "cuda:0", "--out", str(tmp_path / "o"),
                  "--cache-dir", str(cache)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "torch sees no CUDA GPU" in result.output


def test_cli_rejects_a_pair_that_is_not_a_colon_b(cache, tmp_path):
    result = CliRunner().invoke(
        command,
        [
            "--models",
            "cnn,kde",
            "--pairs",
            "cnn-kde",
            "--out",
            str(tmp_path),
            "--cache-dir",
            str(cache),
        ],
    )
    assert result.exit_code == 2
    assert "is not A:B" in result.output


def test_cli_rejects_an_unknown_model_name(cache, tmp_path):
    result = CliRunner().invoke(
        command, ["--models", "cnn,resnet", "--out", str(tmp_path), "--cache-dir", str(cache)]
    )
    assert result.exit_code == 2
    assert "resnet" in result.output
