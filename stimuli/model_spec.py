"""A researcher's own model, declared in a small TOML file and loaded without unpickling code.

A model file (``resnet50.toml``; relative paths are relative to its folder)::

    name = "resnet50"                       # default: the file's stem

    [model]
    entry_point = "torchvision.models:resnet50"   # package.module:factory returning an nn.Module
    kwargs = { num_classes = 1000 }               # optional keyword arguments of the factory
    weights = "resnet50.safetensors"              # optional: safetensors, or a state dict (.pt)
    python_path = ["src"]                         # optional folders to import the entry point from
    # or instead of entry_point:  torchscript = "resnet50.ts"

    [input]
    size = 224                  # or [height, width]
    channels = 3
    mean = [0.485, 0.456, 0.406]  # the network sees (x - mean) / std, x in [0, 1]
    std = [0.229, 0.224, 0.225]

    [classes]
    mapping = "imagenet16"      # ImageNet's 1,000 classes -> model-vs-human's 16 categories
    aggregation = "mean"        # model-vs-human's; or "sum" (probability sum)
    # or: names = ["cat", "dog", ...]  (the network's own outputs, in order)
    # or: [classes.groups] cat = [281, 282], dog = [151, 152]  (with aggregation)

Weights are read with ``safetensors`` or ``torch.load(weights_only=True)``; TorchScript archives
with ``torch.jit.load``. A pickled model (``torch.save(model)``) is refused with a message: loading
it would run arbitrary code. With grouped classes the model's logit for a category is the log of
its mean (or summed) softmax probability over its member classes; with ``names`` the network's own
logits. The calibration (Golan et al. 2020's shared affine logit z' = s z + t) is fitted on the
researcher's held-out natural images by ``fit_spec_calibration`` and stored beside the TOML as
``<stem>.calibration.json``, with a fingerprint of the TOML and the weights so a stale one is
refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import math
import pickle
import sys
import tomllib
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from humanlike.stimuli.imagenet16 import (
    AGGREGATIONS,
    IMAGENET16_CATEGORIES,
    IMAGENET16_INDICES,
    membership,
)
from humanlike.stimuli.models import CandidateModel, LogitCalibration

CALIBRATION_FORMAT = 1
BUILTIN_MAPPINGS = {"imagenet16": (IMAGENET16_CATEGORIES, IMAGENET16_INDICES)}


@dataclass(frozen=True)
class InputSpec:
    """What the network expects: (channels, height, width) images in [0, 1], then (x - mean) / std."""

    channels: int
    height: int
    width: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.channels, self.height, self.width)


@dataclass(frozen=True)
class ClassMapping:
    """Output categories: the network's own (``groups`` None) or groups of its outputs, aggregated."""

    names: tuple[str, ...]
    groups: dict[str, tuple[int, ...]] | None = None
    aggregation: str = "mean"


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model TOML (paths resolved)."""

    name: str
    path: Path
    input: InputSpec
    classes: ClassMapping
    entry_point: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    weights: Path | None = None
    weights_key: str | None = None
    torchscript: Path | None = None
    python_path: tuple[Path, ...] = ()

    @property
    def calibration_path(self) -> Path:
        """``<stem>.calibration.json`` beside the TOML."""
        return self.path.with_name(f"{self.path.stem}.calibration.json")


def _fail(path: Path, field_name: str, message: str) -> ValueError:
    return ValueError(f"{path}: [{field_name}] {message}")


def _floats(path: Path, name: str, value: Any, n: int) -> tuple[float, ...]:
    if isinstance(value, int | float):
        value = [value] * n
    if not isinstance(value, list) or len(value) != n or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        raise _fail(path, name, f"must be a number or a list of {n} numbers (one per channel)")
    return tuple(float(v) for v in value)


def read_model_spec(path: str | Path) -> ModelSpec:
    """Parse and check a model TOML; every error names the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"model file {path} does not exist")
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid TOML ({error})") from error
    root = path.parent
    unknown = set(doc) - {"name", "model", "input", "classes"}
    if unknown:
        raise ValueError(f"{path}: unknown top-level field(s) {sorted(unknown)}")
    name = str(doc.get("name", path.stem))
    model = doc.get("model")
    if not isinstance(model, dict):
        raise _fail(path, "model", "missing: give entry_point or torchscript")
    entry_point, torchscript = model.get("entry_point"), model.get("torchscript")
    if (entry_point is None) == (torchscript is None):
        raise _fail(path, "model", "give exactly one of entry_point and torchscript")
    if entry_point is not None and (
        not isinstance(entry_point, str) or entry_point.count(":") != 1
    ):
        raise _fail(path, "model.entry_point", f"{entry_point!r} is not 'package.module:factory'")
    kwargs = model.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise _fail(path, "model.kwargs", "must be a table of keyword arguments")
    weights = model.get("weights")
    if weights is not None and torchscript is not None:
        raise _fail(path, "model.weights", "goes with entry_point (TorchScript holds its weights)")
    python_path = model.get("python_path", [])
    if isinstance(python_path, str):
        python_path = [python_path]

    inp = doc.get("input")
    if not isinstance(inp, dict):
        raise _fail(path, "input", "missing: give size and channels (and mean, std)")
    size = inp.get("size")
    if isinstance(size, int) and not isinstance(size, bool):
        height = width = size
    elif isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) for v in size):
        height, width = size
    else:
        raise _fail(path, "input.size", f"{size!r} must be an integer or [height, width]")
    channels = inp.get("channels", 3)
    if not isinstance(channels, int) or channels < 1 or height < 1 or width < 1:
        raise _fail(path, "input", "channels, height and width must be positive integers")
    mean = _floats(path, "input.mean", inp.get("mean", 0.0), channels)
    std = _floats(path, "input.std", inp.get("std", 1.0), channels)
    if min(std) <= 0:
        raise _fail(path, "input.std", "must be positive")

    classes = doc.get("classes")
    if not isinstance(classes, dict):
        raise _fail(path, "classes", "missing: give names, mapping or groups")
    aggregation = classes.get("aggregation", "mean")
    if aggregation not in AGGREGATIONS:
        raise _fail(path, "classes.aggregation", f"{aggregation!r} must be one of {AGGREGATIONS}")
    given = [k for k in ("names", "mapping", "groups") if k in classes]
    if len(given) != 1:
        raise _fail(path, "classes", f"give exactly one of names, mapping, groups (got {given})")
    if "names" in classes:
        names = classes["names"]
        if not isinstance(names, list) or len(names) < 2:
            raise _fail(path, "classes.names", "must list at least two class names")
        mapping = ClassMapping(tuple(str(n) for n in names))
    elif "mapping" in classes:
        if classes["mapping"] not in BUILTIN_MAPPINGS:
            raise _fail(
                path, "classes.mapping", f"{classes['mapping']!r}: known {list(BUILTIN_MAPPINGS)}"
            )
        names, groups = BUILTIN_MAPPINGS[classes["mapping"]]
        mapping = ClassMapping(tuple(names), dict(groups), aggregation)
    else:
        groups = classes["groups"]
        if not isinstance(groups, dict) or len(groups) < 2 or not all(
            isinstance(v, list) and v and all(isinstance(i, int) for i in v)
            for v in groups.values()
        ):
            raise _fail(path, "classes.groups", "must map two or more names to lists of indices")
        mapping = ClassMapping(
            tuple(groups), {k: tuple(v) for k, v in groups.items()}, aggregation
        )
    return ModelSpec(
        name=name,
        path=path,
        input=InputSpec(channels, height, width, mean, std),
        classes=mapping,
        entry_point=entry_point,
        kwargs=dict(kwargs),
        weights=None if weights is None else (root / weights),
        weights_key=model.get("state_dict_key"),
        torchscript=None if torchscript is None else (root / torchscript),
        python_path=tuple(root / p for p in python_path),
    )


@contextlib.contextmanager
def _import_path(folders: Sequence[Path]) -> Iterator[None]:
    added = [str(p) for p in folders if str(p) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for p in added:
            sys.path.remove(p)


def build_from_entry_point(entry_point: str, kwargs: dict[str, Any] | None = None) -> nn.Module:
    """Import ``package.module:factory`` (the factory may be dotted) and call it with ``kwargs``."""
    module_name, _, attr = entry_point.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"cannot import entry point {entry_point!r}: {error}") from error
    net = obj if isinstance(obj, nn.Module) else obj(**(kwargs or {}))
    if not isinstance(net, nn.Module):
        raise ValueError(
            f"entry point {entry_point!r} returned {type(net).__name__}, not a torch.nn.Module"
        )
    return net


def _zip_names(path: Path) -> list[str]:
    if not zipfile.is_zipfile(path):
        return []
    with zipfile.ZipFile(path) as archive:
        return archive.namelist()


def load_torchscript(path: Path) -> nn.Module:
    """A TorchScript archive via ``torch.jit.load``; a pickled ``torch.save`` file is refused."""
    if not path.is_file():
        raise ValueError(f"TorchScript file {path} does not exist")
    names = _zip_names(path)
    if not any("/code/" in n for n in names):
        raise ValueError(
            f"{path} is not a TorchScript archive (no code/ inside): it looks like a pickled "
            "torch.save file, which humanlike refuses to unpickle (it can run arbitrary code). "
            "Export the model with torch.jit.script(model).save(path), or declare an entry_point "
            "and a weights file (safetensors or a state dict)."
        )
    return torch.jit.load(str(path), map_location="cpu")


def load_state_dict(path: Path, key: str | None = None) -> dict[str, torch.Tensor]:
    """Tensors from a ``.safetensors`` file or a ``torch.save``'d state dict (``weights_only``)."""
    if not path.is_file():
        raise ValueError(f"weights file {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(path), device="cpu")
        except SafetensorError as error:
            raise ValueError(f"{path}: not a readable safetensors file ({error})") from error
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(
            f"{path} holds pickled Python objects, not just tensors (a whole pickled model?); "
            "humanlike refuses to unpickle it (it can run arbitrary code). Save the weights with "
            "safetensors.torch.save_file(model.state_dict(), ...) or torch.save(model.state_dict())."
        ) from error
    except RuntimeError as error:
        raise ValueError(f"{path}: not a torch weights file ({error})") from error
    if key is not None:
        if not isinstance(blob, dict) or key not in blob:
            raise ValueError(f"{path}: no entry {key!r} (state_dict_key) in the checkpoint")
        blob = blob[key]
    if not isinstance(blob, dict) or not all(isinstance(v, torch.Tensor) for v in blob.values()):
        raise ValueError(
            f"{path} is not a state dict of tensors; if it is a checkpoint holding one, name its "
            "entry with state_dict_key in [model]"
        )
    return blob


def load_network(spec: ModelSpec) -> nn.Module:
    """The declared network in evaluation mode, weights loaded, nothing unpickled."""
    if spec.torchscript is not None:
        return load_torchscript(spec.torchscript).eval()
    assert spec.entry_point is not None
    with _import_path(spec.python_path):
        net = build_from_entry_point(spec.entry_point, spec.kwargs)
    if spec.weights is not None:
        state = load_state_dict(spec.weights, spec.weights_key)
        try:
            net.load_state_dict(state)
        except RuntimeError as error:
            raise ValueError(
                f"{spec.weights} does not fit {spec.entry_point}: "
                f"{' '.join(str(error).split())[:400]}"
            ) from error
    return net.eval()


class PreparedNetwork(nn.Module):
    """Images in [0, 1] -> the network on (x - mean) / std -> its logits, or per group of outputs the
    log of the mean (or summed) softmax probability of the group's members."""

    mean: torch.Tensor
    std: torch.Tensor
    log_members: torch.Tensor
    log_sizes: torch.Tensor

    def __init__(self, net: nn.Module, spec: ModelSpec):
        super().__init__()
        self.net = net
        c = spec.input.channels
        self.register_buffer("mean", torch.tensor(spec.input.mean).reshape(1, c, 1, 1))
        self.register_buffer("std", torch.tensor(spec.input.std).reshape(1, c, 1, 1))
        self.grouped = spec.classes.groups is not None
        if spec.classes.groups is not None:
            members = membership(
                spec.classes.groups, 1 + max(max(v) for v in spec.classes.groups.values())
            )
            self.register_buffer(
                "log_members", torch.log(torch.from_numpy(members).float())
            )
            sizes = members.sum(axis=1) if spec.classes.aggregation == "mean" else np.ones(
                len(members)
            )
            self.register_buffer("log_sizes", torch.log(torch.from_numpy(sizes).float()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net((x - self.mean) / self.std)
        if not self.grouped:
            return out
        n_members = self.log_members.shape[1]
        if out.shape[1] < n_members:
            raise ValueError(
                f"the network returned {out.shape[1]} outputs; the class groups use index "
                f"{n_members - 1}"
            )
        log_p = F.log_softmax(out.float(), dim=1)[:, :n_members]
        return torch.logsumexp(log_p[:, None, :] + self.log_members, dim=-1) - self.log_sizes


def fingerprint(spec: ModelSpec) -> str:
    """sha256 of the TOML and the weights or TorchScript file (calibrations are tied to both)."""
    digest = hashlib.sha256(spec.path.read_bytes())
    for extra in (spec.weights, spec.torchscript):
        if extra is not None and extra.is_file():
            with extra.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def read_calibration(spec: ModelSpec) -> dict[str, Any] | None:
    """The stored calibration beside the TOML, or None; a stale one (other weights) is refused."""
    path = spec.calibration_path
    if not path.is_file():
        return None
    try:
        stored = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error
    if stored.get("format") != CALIBRATION_FORMAT:
        raise ValueError(f"{path}: not a humanlike calibration (format {CALIBRATION_FORMAT})")
    if stored.get("fingerprint") != fingerprint(spec):
        raise ValueError(
            f"{path} was fitted for another version of {spec.path.name} or its weights; refit it "
            "with `humanlike stimuli calibrate`"
        )
    for key in ("slope", "intercept"):
        if not isinstance(stored.get(key), int | float) or not math.isfinite(stored[key]):
            raise ValueError(f"{path}: field {key!r} must be a finite number")
    if stored["slope"] <= 0:
        raise ValueError(f"{path}: field 'slope' must be positive")
    return stored


def load_candidate(
    spec: ModelSpec | str | Path,
    *,
    device: torch.device | str = "cpu",
    require_calibration: bool = False,
) -> CandidateModel:
    """The declared model as a ``CandidateModel`` on ``device``, with its stored calibration."""
    if not isinstance(spec, ModelSpec):
        spec = read_model_spec(spec)
    calibration = read_calibration(spec)
    if calibration is None and require_calibration:
        raise ValueError(
            f"{spec.path}: no calibration at {spec.calibration_path}; fit one on held-out natural "
            "images with `humanlike stimuli calibrate`"
        )
    net = PreparedNetwork(load_network(spec), spec)
    metadata: dict[str, Any] = {"spec": str(spec.path)}
    if calibration is not None:
        metadata["calibration"] = calibration
    model = CandidateModel(
        net,
        spec.classes.names,
        name=spec.name,
        input_shape=spec.input.shape,
        slope=calibration["slope"] if calibration else 1.0,
        intercept=calibration["intercept"] if calibration else 0.0,
        metadata=metadata,
    )
    return model.to(torch.device(device) if isinstance(device, str) else device)


def fit_spec_calibration(
    spec: ModelSpec | str | Path,
    images: np.ndarray,
    labels: Sequence[str],
    *,
    device: torch.device | str = "cpu",
    batch_size: int | None = None,
) -> dict[str, Any]:
    """Fit the shared affine logit calibration on natural images with category ``labels``; write
    ``<stem>.calibration.json`` beside the TOML and return what was written."""
    if not isinstance(spec, ModelSpec):
        spec = read_model_spec(spec)
    classes = spec.classes.names
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted({str(label) for label in labels} - set(index))
    if unknown:
        raise ValueError(
            f"labels {unknown[:5]} are not categories of {spec.name} ({', '.join(classes)})"
        )
    y = np.array([index[str(label)] for label in labels], dtype=np.int64)
    model = CandidateModel(
        PreparedNetwork(load_network(spec), spec),
        classes,
        name=spec.name,
        input_shape=spec.input.shape,
    ).to(torch.device(device) if isinstance(device, str) else device)
    raw = model.predict_logits(images, raw=True, batch_size=batch_size)
    fit = LogitCalibration().fit(raw, y)
    written = {
        "format": CALIBRATION_FORMAT,
        "model": spec.name,
        "slope": fit.slope_,
        "intercept": fit.intercept_,
        "loss_before": fit.loss_before_,
        "loss_after": fit.loss_,
        "n_images": len(y),
        "accuracy": float(np.mean(raw.argmax(axis=1) == y)),
        "fingerprint": fingerprint(spec),
    }
    spec.calibration_path.write_text(json.dumps(written, indent=2) + "\n")
    return written
