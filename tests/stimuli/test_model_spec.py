"""Researchers' models from a TOML: an entry point (a torchvision-style ResNet with random weights),
a safetensors or state-dict checkpoint, a TorchScript file; nothing is unpickled and a pickled
model is refused with a message; the calibration is stored beside the TOML and tied to its weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from humanlike.stimuli.imagenet16 import IMAGENET16_CATEGORIES, aggregate_log_probabilities
from humanlike.stimuli.model_registry import resolve_models
from humanlike.stimuli.model_spec import (
    fit_spec_calibration,
    load_candidate,
    load_state_dict,
    read_model_spec,
)
from humanlike.stimuli.models import LogitCalibration

from .torchvision_like import resnet18, tiny_cnn

HERE = Path(__file__).parent
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def write_toml(path: Path, model: str, *, size: int = 32, classes: str | None = None) -> Path:
    classes = classes or 'mapping = "imagenet16"'
    path.write_text(
        f'name = "{path.stem}"\n[model]\n{model}\n'
        f"[input]\nsize = {size}\nchannels = 3\nmean = {MEAN}\nstd = {STD}\n"
        f"[classes]\n{classes}\n"
    )
    return path


def entry(factory: str, kwargs: str = "{}", weights: str | None = None) -> str:
    lines = [f'entry_point = "{factory}"', f"kwargs = {kwargs}", f'python_path = ["{HERE}"]']
    if weights:
        lines.append(f'weights = "{weights}"')
    return "\n".join(lines)


def images(n: int, size: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 3, size, size), dtype=np.float32)


def normalised(x: np.ndarray) -> torch.Tensor:
    mean = torch.tensor(MEAN).reshape(1, 3, 1, 1)
    std = torch.tensor(STD).reshape(1, 3, 1, 1)
    return (torch.from_numpy(x) - mean) / std


def test_a_torchvision_style_resnet18_loads_from_an_entry_point_with_random_weights(tmp_path):
    toml = write_toml(tmp_path / "resnet.toml", entry("torchvision_like:resnet18", "{ width = 8 }"))
    with torch.random.fork_rng():
        torch.manual_seed(5)
        model = load_candidate(toml)
        torch.manual_seed(5)
        reference = resnet18(width=8).eval()
    assert model.classes == IMAGENET16_CATEGORIES and model.input_shape == (3, 32, 32)
    assert {"layer4.1.bn2.running_var", "fc.weight"} <= set(model.net.net.state_dict())
    x = images(3)
    with torch.no_grad():
        raw = reference(normalised(x)).double().numpy()
    # The model's logit per category: log mean softmax probability (model-vs-human's aggregation).
    np.testing.assert_allclose(
        model.predict_logits(x, raw=True), aggregate_log_probabilities(raw), rtol=1e-4, atol=1e-5
    )


def test_safetensors_and_state_dict_checkpoints_load_the_saved_weights(tmp_path):
    with torch.random.fork_rng():
        torch.manual_seed(1)
        net = resnet18(num_classes=4, width=8).eval()
    save_file(net.state_dict(), str(tmp_path / "w.safetensors"))
    torch.save(net.state_dict(), tmp_path / "w.pt")
    x = images(2)
    with torch.no_grad():
        expected = net(normalised(x)).double().numpy()
    names = 'names = ["a", "b", "c", "d"]'
    for weights in ("w.safetensors", "w.pt"):
        kwargs = "{ num_classes = 4, width = 8 }"
        toml = write_toml(
            tmp_path / f"m_{weights.replace('.', '_')}.toml",
            entry("torchvision_like:resnet18", kwargs, weights),
            classes=names,
        )
        model = load_candidate(toml)
        np.testing.assert_allclose(model.predict_logits(x, raw=True), expected, rtol=1e-5, atol=1e-6)


def test_a_torchscript_file_loads(tmp_path):
    with torch.random.fork_rng():
        torch.manual_seed(2)
        net = tiny_cnn().eval()
    torch.jit.script(net).save(str(tmp_path / "net.ts"))
    toml = write_toml(tmp_path / "ts.toml", 'torchscript = "net.ts"', classes='names = ["a", "b", "c", "d"]')
    model = load_candidate(toml)
    x = images(4)
    with torch.no_grad():
        expected = net(normalised(x)).double().numpy()
    np.testing.assert_allclose(model.predict_logits(x, raw=True), expected, rtol=1e-5, atol=1e-6)


class Trap:
    """Unpickling this creates a file: proof that a loader did unpickle."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickled_model_is_refused_without_being_unpickled(tmp_path):
    marker = tmp_path / "unpickled.txt"
    torch.save({"conv.weight": torch.zeros(1), "trap": Trap(marker)}, tmp_path / "trap.pt")
    with torch.random.fork_rng():
        torch.save(tiny_cnn(), tmp_path / "whole_model.pt")  # the usual way to pickle a model
    as_weights = write_toml(
        tmp_path / "w.toml",
        entry("torchvision_like:tiny_cnn", weights="trap.pt"),
        classes='names = ["a", "b", "c", "d"]',
    )
    with pytest.raises(ValueError, match="refuses to unpickle"):
        load_candidate(as_weights)
    assert not marker.exists()
    with pytest.raises(ValueError, match="refuses to unpickle"):
        load_state_dict(tmp_path / "whole_model.pt")
    for name in ("trap.pt", "whole_model.pt"):
        as_script = write_toml(
            tmp_path / "s.toml", f'torchscript = "{name}"', classes='names = ["a", "b", "c", "d"]'
        )
        with pytest.raises(ValueError, match="not a TorchScript archive.*refuses to unpickle"):
            load_candidate(as_script)
    assert not marker.exists()
    with pytest.raises(ValueError, match="pickled model file; humanlike refuses"):
        resolve_models([f"mine={tmp_path / 'whole_model.pt'}"], device=torch.device("cpu"))


def test_weights_of_another_architecture_are_named_in_the_error(tmp_path):
    save_file(tiny_cnn().state_dict(), str(tmp_path / "tiny.safetensors"))
    toml = write_toml(
        tmp_path / "bad.toml",
        entry("torchvision_like:resnet18", "{ width = 8 }", "tiny.safetensors"),
    )
    with pytest.raises(ValueError, match=r"tiny.safetensors does not fit torchvision_like:resnet18"):
        load_candidate(toml)


@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        ('entry_point = "a.b:c"\ntorchscript = "x.ts"', "", r"\[model\] give exactly one"),
        ('entry_point = "no_colon"', "", r"\[model.entry_point\] 'no_colon' is not"),
        ('entry_point = "torchvision_like:nothing_here"', "", "cannot import entry point"),
    ],
)
def test_malformed_model_tables_are_named(tmp_path, model, extra, message):
    toml = write_toml(tmp_path / "m.toml", model + f'\npython_path = ["{HERE}"]' + extra)
    with pytest.raises(ValueError, match=message):
        load_candidate(toml)


def test_input_and_classes_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[model]\nentry_point = "a:b"\n[input]\nsize = "big"\n[classes]\nnames = ["a", "b"]\n')
    with pytest.raises(ValueError, match=r"m.toml: \[input.size\] 'big'"):
        read_model_spec(path)
    path.write_text('[model]\nentry_point = "a:b"\n[input]\nsize = 8\nmean = [0.5]\nchannels = 3\n'
                    '[classes]\nnames = ["a", "b"]\n')  # fmt: skip
    with pytest.raises(ValueError, match=r"\[input.mean\] must be a number or a list of 3"):
        read_model_spec(path)
    path.write_text('[model]\nentry_point = "a:b"\n[input]\nsize = 8\n[classes]\nmapping = "coco"\n')
    with pytest.raises(ValueError, match=r"\[classes.mapping\] 'coco'"):
        read_model_spec(path)


def test_calibration_is_fitted_stored_beside_the_toml_and_refused_once_weights_change(tmp_path):
    with torch.random.fork_rng():
        torch.manual_seed(3)
        net = tiny_cnn().eval()
    save_file(net.state_dict(), str(tmp_path / "tiny.safetensors"))
    toml = write_toml(
        tmp_path / "tiny.toml",
        entry("torchvision_like:tiny_cnn", weights="tiny.safetensors"),
        classes='names = ["a", "b", "c", "d"]',
    )
    x = images(40, seed=4)
    with torch.no_grad():
        raw = net(normalised(x)).double().numpy()
    labels = np.random.default_rng(4).integers(0, 4, 40)
    labels[:4] = raw[:4].argmax(1)
    written = fit_spec_calibration(toml, x, ["abcd"[i] for i in labels])
    stored = json.loads((tmp_path / "tiny.calibration.json").read_text())
    reference = LogitCalibration().fit(raw, labels)
    assert stored["slope"] == pytest.approx(reference.slope_, rel=1e-4)
    assert stored["intercept"] == pytest.approx(reference.intercept_, rel=1e-4, abs=1e-6)
    assert written["n_images"] == 40 and stored["accuracy"] == pytest.approx(np.mean(raw.argmax(1) == labels))
    model = load_candidate(toml)
    np.testing.assert_allclose(
        model.predict_logits(x), reference.slope_ * raw + reference.intercept_, rtol=1e-3, atol=1e-4
    )
    with pytest.raises(ValueError, match="not categories of tiny"):
        fit_spec_calibration(toml, x[:2], ["a", "zebra"])
    save_file({k: v + 0.01 for k, v in net.state_dict().items()}, str(tmp_path / "tiny.safetensors"))
    with pytest.raises(ValueError, match="fitted for another version"):
        load_candidate(toml)
