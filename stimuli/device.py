"""Where torch work runs and at which precision: ``--device auto|cpu|cuda[:N]`` and mixed precision.

``resolve_device("auto")`` picks the first CUDA GPU when torch sees one, else the CPU.
``batch_size_for`` sizes batches to the device (all at once on the CPU, where batching only adds
overhead; a share of the free GPU memory on a GPU). ``autocast`` wraps forward passes in
``torch.autocast`` for ``bfloat16`` / ``float16``; ``float32`` runs them as they are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
PRECISIONS = ("float32", "bfloat16", "float16")


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """``auto`` (a GPU when present, else the CPU), ``cpu``, ``cuda`` or ``cuda:N`` as a torch device.

    Raises ``ValueError`` naming the problem when the spec is malformed or the GPU is absent.
    """
    if isinstance(spec, torch.device):
        return spec
    text = (spec or "auto").strip().lower()
    if text == "auto":
        return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    if text == "cuda" or text.startswith("cuda:"):
        index = 0
        if text.startswith("cuda:"):
            tail = text.split(":", 1)[1]
            if not tail.isdigit():
                raise ValueError(f"device {spec!r}: expected {DEVICE_CHOICES}")
            index = int(tail)
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {spec!r}: torch sees no CUDA GPU on this machine (torch "
                f"{torch.__version__}); use --device cpu or auto"
            )
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"device {spec!r}: only {torch.cuda.device_count()} CUDA device(s) are visible"
            )
        return torch.device("cuda", index)
    raise ValueError(f"device {spec!r}: expected {DEVICE_CHOICES}")


def check_precision(precision: str, device: torch.device) -> str:
    """The precision name if it is one of ``PRECISIONS`` and the device can run it."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if precision == "float16" and device.type == "cpu":
        raise ValueError("precision 'float16' needs a GPU; on the CPU use bfloat16 or float32")
    return precision


@contextlib.contextmanager
def autocast(device: torch.device, precision: str = "float32") -> Iterator[None]:
    """``torch.autocast`` at ``precision`` on ``device``; a no-op for float32."""
    if precision == "float32":
        yield
        return
    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float16
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


def batch_size_for(
    device: torch.device,
    image_shape: tuple[int, ...],
    n_items: int,
    *,
    gradients: bool = False,
    requested: int | None = None,
) -> int:
    """Images per batch: ``requested`` if given; on the CPU all ``n_items`` for synthesis (gradients)
    and up to 2**25 input values for forward passes; on a GPU as many as
    fit in a quarter of the free memory at a budget of 400 (gradients: 2,000) bytes per input value.

    The per-value budget is a rough bound on the activations a ResNet-50 keeps per input value
    (about 100 MB per 224 x 224 image for a forward and backward pass).
    """
    if requested is not None:
        if requested < 1:
            raise ValueError(f"batch size must be at least 1, got {requested}")
        return int(requested)
    n_items = max(1, int(n_items))
    values = 1
    for v in image_shape:
        values *= int(v)
    if device.type != "cuda":
        # One batch for synthesis (as Golan et al.); forward passes in batches of at most
        # 2**25 input values (128 MB of float32 input: 222 images of 224 x 224 x 3).
        return n_items if gradients else int(max(1, min(n_items, 2**25 // values)))
    free, _total = torch.cuda.mem_get_info(device)
    per_image = values * (2000 if gradients else 400)
    return int(max(1, min(n_items, (free // 4) // max(1, per_image))))
