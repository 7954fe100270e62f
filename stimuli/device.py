"""Where torch work runs and at which precision: ``--device auto|cpu|cuda[:N]`` and mixed precision.

``resolve_device("auto")`` picks the first CUDA GPU when torch sees one, else the CPU.
``batch_size_for`` sizes batches to the device (all at once on the CPU, where batching only adds
overhead; a share of the free GPU memory on a GPU). ``autocast`` wraps forward passes in
``torch.autocast`` for ``bfloat16`` / ``float16``; ``float32`` runs them as they are.
``GraphedForward`` runs a model's forward pass (and then its backward pass) on a GPU by replaying
CUDA graphs, one per batch size, so the host launches a few graphs per step instead of hundreds of
kernels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn

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
def autocast(
    device: torch.device, precision: str = "float32", *, cache: bool = True
) -> Iterator[None]:
    """``torch.autocast`` at ``precision`` on ``device``; a no-op for float32. ``cache`` False
    recasts the weights on every call (what CUDA graph capture needs)."""
    if precision == "float32":
        yield
        return
    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float16
    with torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache):
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
    and up to 2**25 input values for forward passes; on a GPU as many as fit in a quarter (synthesis:
    half) of the free memory at a budget of 400 (gradients: 2,000) bytes per input value.

    The per-value budget is a rough bound on the activations a ResNet-50 pair keeps per input value
    (synthesis holds both models' graphs at once: 14.9 GiB peak for 90 images of 224 x 224 in
    float32 on an H100, about 1,200 bytes per input value).
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
    share = free // 2 if gradients else free // 4
    return int(max(1, min(n_items, share // max(1, per_image))))


class GraphedForward:
    """``model(x)`` under ``autocast``; on a GPU replayed from CUDA graphs of the forward and the
    backward pass (to ``x``), captured once per batch size by ``torch.cuda.make_graphed_callables``.

    An eager step of a ResNet-50 pair spends about 32 ms on the host launching its kernels (H100
    machine, 90 images), whatever the batch, so small batches wait on the host; a replay takes 3 ms.
    Where capture fails (a network that synchronises with the host, say) it falls back to eager
    calls. On the CPU it is the plain call.
    """

    def __init__(self, model: nn.Module, device: torch.device, precision: str = "float32"):
        self.model = model
        self.device = device
        self.precision = precision
        self.use_graphs = device.type == "cuda"
        self.graphs: dict[int, Callable[[torch.Tensor], torch.Tensor]] = {}

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.use_graphs:
            with autocast(self.device, self.precision):
                return self.model(x)
        graphed = self.graphs.get(len(x))
        if graphed is None:
            sample = torch.rand_like(x).requires_grad_(x.requires_grad)
            try:
                with autocast(self.device, self.precision, cache=False):
                    graphed = torch.cuda.make_graphed_callables(  # type: ignore[assignment]
                        lambda t: self.model(t), (sample,)
                    )
            except RuntimeError:
                self.use_graphs = False
                return self(x)
            self.graphs[len(x)] = graphed  # type: ignore[assignment]
        with autocast(self.device, self.precision, cache=False):
            return graphed(x)  # type: ignore[misc]
