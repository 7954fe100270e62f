"""Demo candidate models trained on the CPU from scikit-learn's bundled digits (8x8 upsampled to 28x28).

Four models with different inductive biases, as in Golan, Raju & Kriegeskorte (2020): a small CNN,
a logistic-regression readout of the pixels, a class-conditional Gaussian kernel density estimate
in pixel space (per-class log-likelihoods as logits) and a CNN adversarially trained with L-inf PGD
(Madry et al. 2018). Every model is calibrated on a held-out split and cached on disk.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits
from torch import nn

from humanlike.stimuli.models import CandidateModel, torch_threads

DIGIT_CLASSES = tuple(str(d) for d in range(10))
IMAGE_SIZE = 28
DEMO_MODEL_NAMES = ("cnn", "logreg", "kde", "adv_cnn")
# Bump when training changes, so stale cached weights are not reused.
TRAINING_VERSION = 2


@dataclass(frozen=True)
class DigitSplits:
    """Stratified train / calibration / test splits of the upsampled digits: float32 (N, 1, 28, 28)
    images, integer labels and ``*_index`` positions in ``sklearn.datasets.load_digits()``."""

    train_images: np.ndarray
    train_labels: np.ndarray
    train_index: np.ndarray
    calibration_images: np.ndarray
    calibration_labels: np.ndarray
    calibration_index: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    test_index: np.ndarray


def digit_images(size: int = IMAGE_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1797 digits scaled to [0, 1] and bilinearly upsampled to ``size`` x ``size``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = torch.from_numpy(digits.images.astype(np.float32) / 16.0)[:, None]
    big = F.interpolate(small, size=(size, size), mode="bilinear", align_corners=False)
    return big.clamp(0.0, 1.0).numpy(), digits.target.astype(np.int64)


def digit_splits(random_state: int = 0) -> DigitSplits:
    """60 / 20 / 20 stratified split (train / calibration / test) of the upsampled digits.

    Natural stimuli shown beside controversial ones should come from ``test_index`` (images no
    demo model was trained or calibrated on).
    """
    from sklearn.model_selection import train_test_split

    images, labels = digit_images()
    train, rest = train_test_split(
        np.arange(len(labels)), test_size=0.4, stratify=labels, random_state=random_state
    )
    calibration, test = train_test_split(
        rest, test_size=0.5, stratify=labels[rest], random_state=random_state
    )
    return DigitSplits(
        images[train], labels[train], train,
        images[calibration], labels[calibration], calibration,
        images[test], labels[test], test,
    )  # fmt: skip


class SmallCNN(nn.Module):
    """Two strided conv layers (5x5/2 with 8 channels, 3x3/2 with 16) and a linear readout to K logits."""

    def __init__(self, n_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.readout = nn.Linear(16 * 7 * 7, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout(self.features(x))


class PixelLinear(nn.Module):
    """A linear readout of the flattened pixels (weights from one-vs-rest logistic regression)."""

    def __init__(self, n_pixels: int = IMAGE_SIZE * IMAGE_SIZE, n_classes: int = 10):
        super().__init__()
        self.linear = nn.Linear(n_pixels, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))


class GaussianKDEClassifier(nn.Module):
    """Per-class Gaussian KDE log-likelihoods as logits.

    logit_k(x) = log (1/N_k) sum_{n: y_n = k} N(x; x_n, h^2 I)
               = logsumexp_n(-|x - x_n|^2 / 2h^2) - log N_k - (D/2) log(2 pi h^2).
    """

    # Buffers registered in __init__ (declared for type checkers).
    points: torch.Tensor
    sq_norms: torch.Tensor
    members: torch.Tensor
    log_pad: torch.Tensor
    log_counts: torch.Tensor
    bandwidth: torch.Tensor

    def __init__(
        self, points: torch.Tensor, labels: torch.Tensor, bandwidth: float, n_classes: int
    ):
        super().__init__()
        points = points.flatten(1).float()
        labels = labels.long()
        counts = torch.bincount(labels, minlength=n_classes)
        if (counts == 0).any():
            raise ValueError("every class needs at least one KDE point")
        # members[k] lists the points of class k, padded to the largest class with index 0 and
        # masked with -inf, so per-class sums are one gather + logsumexp.
        order = torch.argsort(labels, stable=True)
        rank = torch.arange(len(labels)) - torch.repeat_interleave(
            torch.cumsum(counts, 0) - counts, counts
        )
        members = torch.zeros(n_classes, int(counts.max()), dtype=torch.long)
        members[labels[order], rank] = order
        pad = torch.full(members.shape, -torch.inf)
        pad[labels[order], rank] = 0.0
        self.register_buffer("points", points)
        self.register_buffer("sq_norms", (points**2).sum(1))
        self.register_buffer("members", members)
        self.register_buffer("log_pad", pad)
        self.register_buffer("log_counts", torch.log(counts.float()))
        self.register_buffer("bandwidth", torch.tensor(float(bandwidth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(1)
        sq_dist = (flat**2).sum(1, keepdim=True) - 2 * flat @ self.points.T + self.sq_norms
        log_kernel = -sq_dist.clamp_min(0) / (2 * self.bandwidth**2)  # (B, N)
        per_class = torch.logsumexp(log_kernel[:, self.members] + self.log_pad, dim=-1)  # (B, K)
        dim = flat.shape[1]
        return per_class - self.log_counts - 0.5 * dim * torch.log(2 * math.pi * self.bandwidth**2)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The buffers' sizes depend on the training set: adopt the stored shapes before copying.
        for name in list(self._buffers):
            if prefix + name in state_dict:
                self._buffers[name] = torch.empty_like(state_dict[prefix + name])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def loo_bandwidth(
    points: np.ndarray, labels: np.ndarray, grid: Sequence[float] = tuple(np.geomspace(0.05, 2, 40))
) -> float:
    """Bandwidth maximising the mean leave-one-out log-likelihood of each training image under the
    Gaussian KDE of the other images of its class, over ``grid`` (all bandwidths at once)."""
    x = torch.from_numpy(np.asarray(points, dtype=np.float64)).flatten(1)
    y = torch.from_numpy(np.asarray(labels)).long()
    sq = torch.cdist(x, x) ** 2
    # Distances from each image to the members of its own class, padded to the largest class.
    counts = torch.bincount(y)
    order = torch.argsort(y, stable=True)
    rank = torch.arange(len(y)) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    members = torch.full((len(counts), int(counts.max())), -1, dtype=torch.long)
    members[y[order], rank] = order
    own = members[y]  # (N, M)
    valid = (own >= 0) & (own != torch.arange(len(y))[:, None])
    sq_own = torch.where(valid, sq.gather(1, own.clamp_min(0)), torch.inf)
    h = torch.tensor(grid, dtype=torch.float64)[:, None, None]
    loglik = (
        torch.logsumexp(-sq_own / (2 * h**2), dim=-1)  # (G, N)
        - torch.log(valid.sum(1).double())
        - 0.5 * x.shape[1] * torch.log(2 * math.pi * h[..., 0] ** 2)
    )
    return float(grid[int(loglik.mean(1).argmax())])


def pgd_linf(
    net: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epsilon: float,
    steps: int,
    step_size: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """L-inf projected gradient ascent on the cross-entropy from a random start (Madry et al. 2018)."""
    noise = (torch.rand(images.shape, generator=generator) * 2 - 1) * epsilon
    adv = (images + noise).clamp(0, 1)
    for _ in range(steps):
        adv.requires_grad_(True)
        loss = F.cross_entropy(net(adv), labels)
        (grad,) = torch.autograd.grad(loss, adv)
        adv = adv.detach() + step_size * grad.sign()
        adv = (images + (adv - images).clamp(-epsilon, epsilon)).clamp(0, 1)
    return adv.detach()


def train_cnn(
    splits: DigitSplits,
    *,
    random_state: int = 0,
    epochs: int = 30,
    batch_size: int = 64,
    lr: float = 3e-3,
    adversarial_epsilon: float | None = None,
    pgd_steps: int = 5,
) -> SmallCNN:
    """Train ``SmallCNN`` with Adam on the softmax cross-entropy (the usual way: its logits then need
    calibrating for a sigmoid readout); with ``adversarial_epsilon``, on L-inf PGD images."""
    with torch.random.fork_rng():
        torch.manual_seed(random_state)
        net = SmallCNN(len(DIGIT_CLASSES))
    generator = torch.Generator().manual_seed(random_state)
    x = torch.from_numpy(splits.train_images)
    labels = torch.from_numpy(splits.train_labels)
    optimiser = torch.optim.Adam(net.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, epochs)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x), batch_size):
            idx = order[start : start + batch_size]
            batch, batch_labels = x[idx], labels[idx]
            if adversarial_epsilon:
                net.eval()
                batch = pgd_linf(
                    net,
                    batch,
                    batch_labels,
                    epsilon=adversarial_epsilon,
                    steps=pgd_steps,
                    step_size=2.5 * adversarial_epsilon / pgd_steps,
                    generator=generator,
                )
                net.train()
            loss = F.cross_entropy(net(batch), batch_labels)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        schedule.step()
    return net.eval()


def train_adversarial_cnn(splits: DigitSplits, *, random_state: int = 0) -> SmallCNN:
    """``SmallCNN`` trained on L-inf PGD examples: eps 0.1, 3 steps of 2.5 eps / 3, 15 epochs."""
    return train_cnn(
        splits, random_state=random_state, adversarial_epsilon=0.1, epochs=15, pgd_steps=3
    )


def train_logreg(splits: DigitSplits, *, random_state: int = 0, C: float = 0.1) -> PixelLinear:
    """One-vs-rest L2 logistic regression on the 784 pixels (scikit-learn), copied into a torch layer."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    clf = OneVsRestClassifier(LogisticRegression(C=C, max_iter=2000, random_state=random_state))
    clf.fit(splits.train_images.reshape(len(splits.train_images), -1), splits.train_labels)
    net = PixelLinear(IMAGE_SIZE * IMAGE_SIZE, len(DIGIT_CLASSES))
    with torch.no_grad():
        net.linear.weight.copy_(torch.from_numpy(np.vstack([e.coef_ for e in clf.estimators_])))
        net.linear.bias.copy_(
            torch.from_numpy(np.concatenate([e.intercept_ for e in clf.estimators_]))
        )
    return net.eval()


def train_kde(splits: DigitSplits, *, random_state: int = 0) -> GaussianKDEClassifier:
    """Class-conditional Gaussian KDE on the training pixels, bandwidth by leave-one-out likelihood."""
    bandwidth = loo_bandwidth(splits.train_images, splits.train_labels)
    return GaussianKDEClassifier(
        torch.from_numpy(splits.train_images),
        torch.from_numpy(splits.train_labels),
        bandwidth,
        len(DIGIT_CLASSES),
    )


def _empty_kde() -> GaussianKDEClassifier:
    """A placeholder KDE whose buffers ``load_state_dict`` resizes to the stored ones."""
    return GaussianKDEClassifier(
        torch.zeros(len(DIGIT_CLASSES), IMAGE_SIZE * IMAGE_SIZE),
        torch.arange(len(DIGIT_CLASSES)),
        1.0,
        len(DIGIT_CLASSES),
    )


# name -> (trainer, architecture factory for a weights-only reload, description)
_TRAINERS: dict[str, tuple[Callable[..., nn.Module], Callable[[], nn.Module], str]] = {
    "cnn": (
        train_cnn,
        SmallCNN,
        "small CNN (2 strided conv layers), softmax cross-entropy training",
    ),
    "logreg": (train_logreg, PixelLinear, "one-vs-rest logistic regression on pixels"),
    "kde": (train_kde, _empty_kde, "class-conditional Gaussian KDE in pixel space"),
    "adv_cnn": (
        train_adversarial_cnn,
        SmallCNN,
        "small CNN adversarially trained (L-inf PGD, eps 0.1, 3 steps)",
    ),
}


def default_cache_dir() -> Path:
    """``$HUMANLIKE_CACHE_DIR`` or ``$XDG_CACHE_HOME/humanlike`` (default ``~/.cache/humanlike``)."""
    if os.environ.get("HUMANLIKE_CACHE_DIR"):
        return Path(os.environ["HUMANLIKE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "humanlike"


def _cache_path(cache_dir: Path, name: str, random_state: int) -> Path:
    key = hashlib.sha256(f"{name}|{random_state}|{TRAINING_VERSION}".encode()).hexdigest()[:10]
    return cache_dir / "demo_models" / f"{name}-seed{random_state}-{key}.pt"


def heldout_accuracy(model: CandidateModel, images: np.ndarray, labels: np.ndarray) -> float:
    """Share of images whose highest-probability class is the true class."""
    return float(np.mean(model.predict_logits(images).argmax(1) == np.asarray(labels)))


def demo_models(
    names: Sequence[str] = DEMO_MODEL_NAMES,
    *,
    cache_dir: str | Path | None = None,
    random_state: int = 0,
) -> dict[str, CandidateModel]:
    """Train (or load from the cache) the named demo models, calibrated, with held-out accuracy.

    Each model's ``metadata`` holds ``test_accuracy`` (argmax accuracy on the 20% test split) and
    ``calibration`` (slope, intercept, cross-entropy before/after on the calibration split).
    """
    return cached_models(names, _TRAINERS, digit_splits, cache_dir, random_state)


Trainer = tuple[Callable[..., nn.Module], Callable[[], nn.Module], str]
"""A demo model's trainer ``(splits, random_state=) -> net``, untrained architecture, description."""


def cached_models(
    names: Sequence[str],
    trainers: Mapping[str, Trainer],
    splits_of: Callable[[int], DigitSplits],
    cache_dir: str | Path | None,
    random_state: int,
    **model_options: Any,
) -> dict[str, CandidateModel]:
    """Each named model loaded from the cache, or trained on ``splits_of(random_state)``,
    calibrated, scored on the test split (``metadata["test_accuracy"]``) and cached."""
    unknown = [n for n in names if n not in trainers]
    if unknown:
        raise ValueError(f"unknown demo model(s) {unknown}; choose from {list(trainers)}")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    splits: DigitSplits | None = None
    models: dict[str, CandidateModel] = {}
    for name in names:
        trainer, architecture, description = trainers[name]
        path = _cache_path(cache, name, random_state)
        if path.is_file():
            models[name] = CandidateModel.load(path, net=architecture())
            continue
        splits = splits or splits_of(random_state)
        # Batches of 64 tiny images: extra threads (torch's or BLAS's) only add overhead.
        with torch_threads(1), threadpool_limits(limits=1):
            net = trainer(splits, random_state=random_state)
        model = CandidateModel(
            net,
            DIGIT_CLASSES,
            name=name,
            metadata={"description": description, "seed": random_state},
            **model_options,
        )
        model.calibrate(splits.calibration_images, splits.calibration_labels)
        model.metadata["test_accuracy"] = heldout_accuracy(
            model, splits.test_images, splits.test_labels
        )
        model.save(path)
        models[name] = model
    return models


def demo_accuracy(models: dict[str, CandidateModel], random_state: int = 0) -> pd.DataFrame:
    """Held-out (test split) argmax accuracy of each model: columns ``model, accuracy, n``."""
    splits = digit_splits(random_state)
    return pd.DataFrame(
        {
            "model": list(models),
            "accuracy": [
                heldout_accuracy(m, splits.test_images, splits.test_labels) for m in models.values()
            ],
            "n": len(splits.test_labels),
        }
    )
