"""Images listed in a stimulus manifest, and feature vectors of them from any torch model.

``load_manifest_images`` reads the manifest CSV (column ``file``, relative to the manifest's
folder) into one float32 array (N, C, H, W) in [0, 1]. ``extract_features`` runs a torch module on
such an array and returns one flattened feature vector per image, either the model's output or
the output of a named submodule (the network truncated there: a forward hook captures the
activation and stops the forward pass). torch is imported only inside ``extract_features``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from PIL import Image

if TYPE_CHECKING:
    import torch


def load_manifest_images(
    manifest_csv: str | Path, size: int | tuple[int, int] | None = None
) -> tuple[list[str], np.ndarray]:
    """(ids, images): the manifest's ``file`` values and an (N, C, H, W) float32 array in [0, 1].

    C is 1 when every image is greyscale, else 3 (RGB; alpha is dropped). ``size`` resizes every
    image to (size, size) or (height, width) (bilinear); without it all images must share a size.
    """
    manifest_csv = Path(manifest_csv)
    if not manifest_csv.is_file():
        raise ValueError(f"manifest not found: {manifest_csv}")
    manifest = pd.read_csv(manifest_csv)
    if "file" not in manifest.columns:
        raise ValueError(f"manifest {manifest_csv} has no 'file' column; got "
                         f"{list(manifest.columns)}")
    if manifest.empty:
        raise ValueError(f"manifest {manifest_csv} lists no images")
    ids = manifest["file"].astype(str).tolist()
    root = manifest_csv.parent
    target = None if size is None else (size, size) if isinstance(size, int) else tuple(size)
    pictures = []
    for rel in ids:
        path = root / rel
        if not path.is_file():
            raise ValueError(f"manifest {manifest_csv}: file {rel!r} not found at {path}")
        with Image.open(path) as opened:
            im = opened.convert("L") if opened.mode in ("L", "1", "I", "I;16", "F", "LA") else (
                opened.convert("RGB"))
            if target is not None:
                im = im.resize((target[1], target[0]), Image.Resampling.BILINEAR)
            pictures.append(np.asarray(im))
    shapes = {p.shape[:2] for p in pictures}
    if len(shapes) > 1:
        first = pictures[0].shape[:2]
        odd = next(i for i, p in enumerate(pictures) if p.shape[:2] != first)
        raise ValueError(f"images differ in size ({ids[0]!r} is {first}, {ids[odd]!r} is "
                         f"{pictures[odd].shape[:2]}); pass size= to resize them")
    colour = any(p.ndim == 3 for p in pictures)
    stack = np.stack([
        (np.repeat(p[..., None], 3, axis=2) if p.ndim == 2 else p) if colour else p[..., None]
        for p in pictures
    ])
    return ids, (stack.transpose(0, 3, 1, 2).astype(np.float32) / 255.0)


class _Truncate(Exception):
    """Raised by the forward hook to stop the pass once the named layer has run."""


def extract_features(
    model: torch.nn.Module,
    images: np.ndarray | torch.Tensor,
    *,
    layer: str | None = None,
    batch_size: int = 64,
    device: str | torch.device | None = None,
) -> np.ndarray:
    """(N, D) float32 features: ``model(images)`` or the output of submodule ``layer`` (a name
    from ``model.named_modules()``), flattened per image; run in eval mode without gradients,
    in batches of ``batch_size`` on ``device`` (``auto``, ``cpu``, ``cuda[:N]``; the model is
    moved there) or, without it, on the model's device."""
    import torch

    if device is not None:
        from humanlike.stimuli.device import resolve_device

        model.to(resolve_device(device))
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    x = torch.as_tensor(np.asarray(images) if not isinstance(images, torch.Tensor) else images)
    if x.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(x.shape)}")
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    captured: list = []
    handle = None
    if layer is not None:
        modules = dict(model.named_modules())
        if layer not in modules or layer == "":
            names = [n for n in modules if n]
            raise ValueError(f"layer {layer!r} not found in the model; available: {names}")

        def hook(_module, _inputs, output):
            captured.append(output[0] if isinstance(output, (tuple, list)) else output)
            raise _Truncate

        handle = modules[layer].register_forward_hook(hook)
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.inference_mode():
            for start in range(0, x.shape[0], batch_size):
                batch = x[start:start + batch_size].to(device=device, dtype=torch.float32)
                try:
                    result = model(batch)
                except _Truncate:
                    result = captured.pop()
                if isinstance(result, (tuple, list)):
                    result = result[0]
                out.append(result.reshape(batch.shape[0], -1).float().cpu().numpy())
    finally:
        if handle is not None:
            handle.remove()
        model.train(was_training)
    return np.concatenate(out, axis=0)
