"""A 32 x 32 RGB demo pair: two small CNNs trained on the CPU on coloured digits.

The colour counterpart of the digit demo (a stand-in for CIFAR-10, which is not bundled): each of
scikit-learn's 1,797 digits is bilinearly upsampled to 32 x 32 and painted with a random
foreground colour (each channel uniform in [0.6, 1]) on a random darker background colour (each
channel uniform in [0, 0.4]), so a model must read the shape, not the colour.
Two architectures with different inductive biases, trained with Adam on the softmax cross-entropy
and calibrated on a held-out split (60/20/20 as the digit demo):

- ``rgb_cnn``: two strided convolutions (16, 32 channels) and a linear readout of the 8 x 8 map;
- ``rgb_mlp``: a multi-layer perceptron on the 3,072 pixel values (128 hidden units): no
  convolution, no weight sharing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from humanlike.stimuli.demo_models import (
    DigitSplits,
    cached_models,
    digit_images,
    digit_splits,
)
from humanlike.stimuli.models import CandidateModel

COLOUR_SIZE = 32
COLOUR_MODEL_NAMES = ("rgb_cnn", "rgb_mlp")
FOREGROUND = (0.6, 1.0)  # each channel of a digit's colour, uniform in this range
BACKGROUND = (0.0, 0.4)  # each channel of the background colour


def coloured_digits(size: int = COLOUR_SIZE, random_state: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 3, size, size) float32 in [0, 1], labels): digits painted fg on bg."""
    shapes, labels = digit_images(size)
    rng = np.random.default_rng(random_state)
    n = len(labels)
    fg = rng.uniform(FOREGROUND[0], FOREGROUND[1], (n, 3))
    bg = rng.uniform(BACKGROUND[0], BACKGROUND[1], (n, 3))
    d = shapes  # (n, 1, size, size) digit intensity in [0, 1]
    images = bg[:, :, None, None] * (1 - d) + fg[:, :, None, None] * d
    return images.astype(np.float32), labels


def coloured_splits(random_state: int = 0) -> DigitSplits:
    """The digit demo's stratified 60/20/20 split, applied to the coloured digits."""
    index = digit_splits(random_state)
    images, labels = coloured_digits(random_state=random_state)
    return DigitSplits(
        images[index.train_index], labels[index.train_index], index.train_index,
        images[index.calibration_index], labels[index.calibration_index], index.calibration_index,
        images[index.test_index], labels[index.test_index], index.test_index,
    )  # fmt: skip


class StridedCNN(nn.Module):
    """Conv 5x5/2 (16) - ReLU - conv 3x3/2 (32) - ReLU - linear readout of the 8 x 8 map."""

    def __init__(self, n_classes: int = 10, size: int = COLOUR_SIZE):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.readout = nn.Linear(32 * (size // 4) ** 2, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(self.features(x))


class PixelMLP(nn.Module):
    """A multi-layer perceptron on the flattened pixels: 3072 -> 128 -> ReLU -> K."""

    def __init__(self, n_classes: int = 10, size: int = COLOUR_SIZE, hidden: int = 128):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(), nn.Linear(3 * size * size, hidden), nn.ReLU(), nn.Linear(hidden, n_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def train_softmax(
    net: nn.Module,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    random_state: int = 0,
    epochs: int = 20,
    batch_size: int = 64,
    lr: float = 3e-3,
) -> nn.Module:
    """Adam on the softmax cross-entropy with a cosine learning-rate schedule."""
    generator = torch.Generator().manual_seed(random_state)
    x, y = torch.from_numpy(images), torch.from_numpy(labels)
    optimiser = torch.optim.Adam(net.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, epochs)
    net.train()
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x), batch_size):
            idx = order[start : start + batch_size]
            loss = F.cross_entropy(net(x[idx]), y[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        schedule.step()
    return net.eval()


_ARCHITECTURES: dict[str, tuple[Callable[[], nn.Module], int, str]] = {
    "rgb_cnn": (StridedCNN, 12, "CNN, two strided conv layers (16, 32 channels), 32x32 RGB"),
    "rgb_mlp": (PixelMLP, 20, "multi-layer perceptron on the pixels (128 hidden units)"),
}


def colour_demo_models(
    names: Sequence[str] = COLOUR_MODEL_NAMES,
    *,
    cache_dir: str | Path | None = None,
    random_state: int = 0,
) -> dict[str, CandidateModel]:
    """Train (or load from the cache) the named 32 x 32 RGB demo models, calibrated, with held-out
    (test split) accuracy in ``metadata["test_accuracy"]``."""
    trainers = {name: (partial(_train_colour, architecture, epochs), architecture, description)
                for name, (architecture, epochs, description) in _ARCHITECTURES.items()}
    return cached_models(names, trainers, coloured_splits, cache_dir, random_state,
                         input_shape=(3, COLOUR_SIZE, COLOUR_SIZE))


def _train_colour(architecture: Callable[[], nn.Module], epochs: int, splits: DigitSplits, *,
                  random_state: int) -> nn.Module:
    """A fresh ``architecture`` trained on the coloured digits (torch's seed set inside)."""
    with torch.random.fork_rng():
        torch.manual_seed(random_state)
        return train_softmax(architecture(), splits.train_images, splits.train_labels,
                             random_state=random_state, epochs=epochs)
