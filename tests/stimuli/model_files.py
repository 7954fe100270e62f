"""Helpers writing a demo model as a researcher would keep it: a TOML plus safetensors weights."""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import save_file

from humanlike.stimuli.models import CandidateModel


def cnn_as_toml(model: CandidateModel, folder: Path, name: str = "cnn") -> Path:
    """The demo ``SmallCNN`` as ``<name>.toml`` + ``<name>.safetensors`` (raw network, uncalibrated)."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file(model.net.state_dict(), str(folder / f"{name}.safetensors"))
    path = folder / f"{name}.toml"
    classes = ", ".join(f'"{c}"' for c in model.classes)
    path.write_text(
        f'name = "{name}"\n'
        "[model]\n"
        'entry_point = "humanlike.stimuli.demo_models:SmallCNN"\n'
        f'weights = "{name}.safetensors"\n'
        "[input]\nsize = 28\nchannels = 1\nmean = 0.0\nstd = 1.0\n"
        f"[classes]\nnames = [{classes}]\n"
    )
    return path
