"""Candidate models: frozen torch classifiers with a multi-label sigmoid readout and affine calibration.

A candidate model maps a batch of images ``(N, C, H, W)`` with values in [0, 1] to K logits; the
probability that class k is present is ``sigmoid(slope * logit_k + intercept)``, with one slope and one
intercept shared across classes, fitted to minimise the multi-label cross-entropy on held-out natural
images (Golan, Raju & Kriegeskorte 2020, Methods "calibration").
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import optimize, special
from torch import nn

FORMAT_VERSION = 1


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch intra-op threads, restoring the previous number afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def multilabel_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Mean over images of sum_k BCE(sigmoid(logit_k), [label == k]) (one-hot targets, sigmoid readout)."""
    logits = np.asarray(logits, dtype=float)
    targets = _one_hot(labels, logits.shape[1])
    # BCE with logits: softplus(z) - y z, computed stably.
    return float(np.mean(np.sum(np.logaddexp(0.0, logits) - targets * logits, axis=1)))


def _one_hot(labels: np.ndarray, n_classes: int) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError("labels must be a 1-d integer array of class indices")
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"labels must lie in [0, {n_classes - 1}] (the logits' class axis)")
    return np.eye(n_classes)[labels]


@dataclass(frozen=True)
class CalibrationResult:
    """Affine logit calibration z' = slope * z + intercept and its cross-entropy before and after."""

    slope: float
    intercept: float
    loss_before: float
    loss_after: float
    n_images: int


class LogitCalibration:
    """Fit one slope and one intercept for all classes minimising multi-label cross-entropy (L-BFGS-B).

    The slope is bounded below by ``min_slope`` > 0 so the calibrated logits keep every model's
    class ranking (and hence its argmax accuracy).
    """

    def __init__(self, min_slope: float = 1e-6):
        self.min_slope = min_slope

    def fit(self, logits: np.ndarray, labels: np.ndarray) -> LogitCalibration:
        """Minimise mean_n sum_k softplus(s z_nk + t) - y_nk (s z_nk + t) over (s, t), s >= min_slope."""
        logits = np.asarray(logits, dtype=float)
        if logits.ndim != 2:
            raise ValueError("logits must be a 2-d array (images x classes)")
        if not np.all(np.isfinite(logits)):
            raise ValueError("logits contain non-finite values")
        targets = _one_hot(labels, logits.shape[1])
        if targets.shape[0] != logits.shape[0]:
            raise ValueError("labels and logits must have the same number of images")
        # Standardise the logits so the optimiser sees a well-scaled problem (KDE log-likelihoods
        # are in the thousands), then map the solution back.
        centre = float(logits.mean())
        scale = float(logits.std()) or 1.0
        u = (logits - centre) / scale
        n = logits.shape[0]

        def loss_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
            z = theta[0] * u + theta[1]
            loss = np.sum(np.logaddexp(0.0, z) - targets * z) / n
            residual = special.expit(z) - targets
            return loss, np.array([np.sum(residual * u) / n, np.sum(residual) / n])

        start = np.array([scale, -centre])  # the identity map in standardised coordinates
        fit = optimize.minimize(
            loss_and_grad,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(self.min_slope * scale, None), (None, None)],
        )
        s, t = fit.x
        self.slope_ = float(s / scale)
        self.intercept_ = float(t - s * centre / scale)
        self.loss_ = float(fit.fun)
        self.loss_before_ = multilabel_cross_entropy(logits, labels)
        self.n_images_ = n
        self.converged_ = bool(fit.success)
        return self

    def transform(self, logits: np.ndarray) -> np.ndarray:
        """Calibrated logits slope_ * z + intercept_."""
        return self.slope_ * np.asarray(logits, dtype=float) + self.intercept_

    @property
    def result_(self) -> CalibrationResult:
        return CalibrationResult(
            self.slope_, self.intercept_, self.loss_before_, self.loss_, self.n_images_
        )


class CandidateModel(nn.Module):
    """A frozen classifier: images (N, C, H, W) in [0, 1] -> K calibrated logits, sigmoid readout.

    ``forward`` returns the calibrated logits ``slope * net(x) + intercept``; ``probabilities`` their
    sigmoid (multi-label: classes need not sum to one). Parameters of ``net`` are frozen.
    """

    # Buffers registered in __init__ (declared here for type checkers; nn.Module's __getattr__
    # would otherwise type them as Tensor | Module).
    slope: torch.Tensor
    intercept: torch.Tensor

    def __init__(
        self,
        net: nn.Module,
        classes: Sequence[str],
        *,
        name: str,
        input_shape: tuple[int, int, int] = (1, 28, 28),
        slope: float = 1.0,
        intercept: float = 0.0,
        metadata: dict[str, Any] | None = None,
    ):
        super().__init__()
        if len(classes) < 2:
            raise ValueError("classes must name at least two categories")
        if len(set(map(str, classes))) != len(classes):
            raise ValueError("classes must be unique")
        if slope <= 0:
            raise ValueError("slope must be positive (a calibration must keep the class ranking)")
        self.net = net.eval().requires_grad_(False)
        self.classes = tuple(str(c) for c in classes)
        self.name = str(name)
        self.input_shape = tuple(int(v) for v in input_shape)
        self.register_buffer("slope", torch.tensor(float(slope)))
        self.register_buffer("intercept", torch.tensor(float(intercept)))
        self.metadata = dict(metadata or {})
        self.eval()

    def train(self, mode: bool = True) -> CandidateModel:
        """Candidate models stay in evaluation mode (they are frozen)."""
        return super().train(False)

    def raw_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The wrapped network's logits, before calibration."""
        if x.ndim != 4 or tuple(x.shape[1:]) != self.input_shape:
            raise ValueError(
                f"model {self.name!r} expects images of shape (N, {', '.join(map(str, self.input_shape))}),"
                f" got {tuple(x.shape)}"
            )
        out = self.net(x)
        if out.ndim != 2 or out.shape[1] != len(self.classes):
            raise ValueError(
                f"model {self.name!r} returned shape {tuple(out.shape)}, expected (N, {len(self.classes)})"
            )
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Calibrated logits slope * net(x) + intercept."""
        return self.slope * self.raw_logits(x) + self.intercept

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """Per-class probabilities sigmoid(calibrated logits) (multi-label readout)."""
        return torch.sigmoid(self(x))

    @property
    def device(self) -> torch.device:
        """Where the model's tensors live (the calibration buffers move with the network)."""
        return self.slope.device

    @torch.no_grad()
    def predict_logits(
        self,
        images: np.ndarray,
        *,
        raw: bool = False,
        batch_size: int | None = None,
        precision: str = "float32",
    ) -> np.ndarray:
        """Calibrated (or raw) logits of a float image array (N, C, H, W) in [0, 1], as float64
        numpy; run on the model's device in batches (default: sized to the device)."""
        from humanlike.stimuli.device import autocast, batch_size_for

        images = np.asarray(images, dtype=np.float32)
        device = self.device
        size = batch_size_for(device, self.input_shape, len(images), requested=batch_size)
        fn = self.raw_logits if raw else self.forward
        chunks = []
        for i in range(0, len(images), size):
            with autocast(device, precision):
                out = fn(torch.from_numpy(images[i : i + size]).to(device))
            chunks.append(out.double().cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, len(self.classes)))

    def predict_proba(self, images: np.ndarray, *, batch_size: int | None = None) -> np.ndarray:
        """Calibrated sigmoid probabilities (N, K) of a float image array in [0, 1]."""
        return special.expit(self.predict_logits(images, batch_size=batch_size))

    def calibrate(self, images: np.ndarray, labels: np.ndarray) -> CalibrationResult:
        """Fit slope and intercept on held-out natural images (class indices ``labels``); sets them."""
        calibration = LogitCalibration().fit(self.predict_logits(images, raw=True), labels)
        self.slope.fill_(calibration.slope_)
        self.intercept.fill_(calibration.intercept_)
        self.metadata["calibration"] = {
            "slope": calibration.slope_,
            "intercept": calibration.intercept_,
            "loss_before": calibration.loss_before_,
            "loss_after": calibration.loss_,
            "n_images": calibration.n_images_,
        }
        return calibration.result_

    def save(self, path: str | Path) -> Path:
        """Write weights, calibration, classes and the pickled network to one ``.pt`` file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        pickled = io.BytesIO()
        torch.save(self.net, pickled)
        torch.save(
            {
                "format": FORMAT_VERSION,
                "name": self.name,
                "classes": list(self.classes),
                "input_shape": list(self.input_shape),
                "slope": float(self.slope),
                "intercept": float(self.intercept),
                "state_dict": self.net.state_dict(),
                "metadata": _plain(self.metadata),
                "net_pickle": pickled.getvalue(),
            },
            path,
        )
        return path

    @classmethod
    def load(cls, path: str | Path, net: nn.Module | None = None) -> CandidateModel:
        """Read a file written by ``save``.

        With ``net`` (an untrained module of the same architecture) only tensors are read
        (``weights_only``); without it the pickled network is unpickled, so load only trusted files.
        """
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"model file {path} does not exist")
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(blob, dict) or blob.get("format") != FORMAT_VERSION:
            raise ValueError(
                f"model file {path} is not a humanlike candidate model (format {FORMAT_VERSION})"
            )
        if net is None:
            net = torch.load(io.BytesIO(blob["net_pickle"]), map_location="cpu", weights_only=False)
        net.load_state_dict(blob["state_dict"])
        return cls(
            net,
            blob["classes"],
            name=blob["name"],
            input_shape=tuple(blob["input_shape"]),
            slope=blob["slope"],
            intercept=blob["intercept"],
            metadata=blob["metadata"],
        )


def _plain(value: Any) -> Any:
    """Metadata restricted to types that ``torch.load(weights_only=True)`` accepts."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ValueError(f"metadata value {value!r} is not a plain number, string, list or dict")
