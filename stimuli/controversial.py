"""Synthetic controversial stimuli: images that model i sees as class a (not b) and model j as b (not a).

Golan, Raju & Kriegeskorte (2020, PNAS 117:29330), eq. 2 defines the controversiality of image x for
models (i, j) and classes (a, b) as

    c(x) = min{ p_i(a|x), 1 - p_i(b|x), p_j(b|x), 1 - p_j(a|x) },

and eq. 4 maximises a smooth minimum. Two objectives are offered (``SynthesisSettings.objective``):

* ``"golan2020"``, the paper's eq. 4 (and its authors' tutorial code): the smooth minimum of the
  four calibrated logits ``[l_i(a), -l_i(b), l_j(b), -l_j(a)]`` (c(x) is the sigmoid of their hard
  minimum), starting from an image of uniform noise, x0 ~ U(0, 1) per pixel (z0 = logit(x0));
* ``"logsigmoid"`` (the default, humanlike's variant, not eq. 4): the smooth minimum of the log
  terms, ``c_beta(x) = -(1/beta) log sum_t exp(-beta log v_t(x))``, which approaches log c(x) from
  below as beta grows (0 <= log c - c_beta <= log(4) / beta) and stops pushing a term once its
  probability saturates; starting from z0 ~ U(-2, 2) (``init_range``).

The image is x = sigmoid(z) (or lives in the decorrelated Fourier space for colour networks, see
``image_parameterisation``) and is optimised with Adam for beta = 1, 10, 100 in turn; a stimulus
still below the threshold (0.85) is restarted from new noise. Any channel count and resolution; on
the models' device, optionally under mixed precision. ``bench/controversial.py
--compare-objectives`` compares the two on the demo models (docs/controversial-stimuli.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from scipy import special
from tqdm.auto import tqdm

from humanlike.stimuli.device import (
    PRECISIONS,
    GraphedForward,
    batch_size_for,
    check_precision,
    resolve_device,
)
from humanlike.stimuli.image_parameterisation import (
    PARAMETERISATIONS,
    ImageParameterisation,
    settings_learning_rate,
)
from humanlike.stimuli.models import CandidateModel


def controversiality(
    p_1: np.ndarray, p_2: np.ndarray, class_1: np.ndarray, class_2: np.ndarray
) -> np.ndarray:
    """c = min{p_1(a), 1 - p_1(b), p_2(b), 1 - p_2(a)} per image (Golan et al. 2020, eq. 2).

    ``p_1``, ``p_2``: (N, K) sigmoid probabilities of models 1 and 2; ``class_1`` (a) and ``class_2``
    (b): (N,) class indices, a being the class model 1 should see and b the class model 2 should see.
    """
    p_1, p_2 = np.asarray(p_1, dtype=float), np.asarray(p_2, dtype=float)
    if p_1.shape != p_2.shape or p_1.ndim != 2:
        raise ValueError("p_1 and p_2 must both have shape (images, classes)")
    a, b = np.asarray(class_1), np.asarray(class_2)
    rows = np.arange(len(p_1))
    terms = np.stack([p_1[rows, a], 1 - p_1[rows, b], p_2[rows, b], 1 - p_2[rows, a]], axis=-1)
    return terms.min(axis=-1)


def log_controversiality_terms(
    logits_1: torch.Tensor, logits_2: torch.Tensor, class_1: torch.Tensor, class_2: torch.Tensor
) -> torch.Tensor:
    """(N, 4) log terms [log p_1(a), log(1 - p_1(b)), log p_2(b), log(1 - p_2(a))] from logits."""
    rows = torch.arange(len(logits_1), device=logits_1.device)
    return torch.stack(
        [
            F.logsigmoid(logits_1[rows, class_1]),
            F.logsigmoid(-logits_1[rows, class_2]),
            F.logsigmoid(logits_2[rows, class_2]),
            F.logsigmoid(-logits_2[rows, class_1]),
        ],
        dim=-1,
    )


def logit_controversiality_terms(
    logits_1: torch.Tensor, logits_2: torch.Tensor, class_1: torch.Tensor, class_2: torch.Tensor
) -> torch.Tensor:
    """(N, 4) calibrated logit terms [l_1(a), -l_1(b), l_2(b), -l_2(a)] (Golan et al. 2020, eq. 4);
    c = sigmoid(their minimum), as 1 - sigmoid(l) = sigmoid(-l)."""
    rows = torch.arange(len(logits_1), device=logits_1.device)
    return torch.stack(
        [
            logits_1[rows, class_1],
            -logits_1[rows, class_2],
            logits_2[rows, class_2],
            -logits_2[rows, class_1],
        ],
        dim=-1,
    )


#: ``golan2020``: eq. 4 of the paper over calibrated logits, uniform-noise start; ``logsigmoid``:
#: humanlike's variant over log probabilities, z0 ~ U(-init_range, init_range).
OBJECTIVES = ("logsigmoid", "golan2020")


def objective_terms(
    objective: str,
    logits_1: torch.Tensor,
    logits_2: torch.Tensor,
    class_1: torch.Tensor,
    class_2: torch.Tensor,
) -> torch.Tensor:
    """The (N, 4) terms whose smooth minimum ``objective`` maximises (see ``OBJECTIVES``)."""
    if objective == "golan2020":
        return logit_controversiality_terms(logits_1, logits_2, class_1, class_2)
    return log_controversiality_terms(logits_1, logits_2, class_1, class_2)


def terms_to_probability(objective: str, value: torch.Tensor) -> torch.Tensor:
    """A term (or a smooth minimum of terms) of ``objective`` as a probability: sigmoid of a logit,
    exp of a log probability; the hard minimum maps to c(x) (eq. 2)."""
    return torch.sigmoid(value) if objective == "golan2020" else value.exp()


def uniform_noise_start(
    seeds: np.ndarray, shape: tuple[int, ...], device: torch.device
) -> torch.Tensor:
    """z0 = logit(x0) with x0 ~ U(0, 1) per pixel, one image per seed (the paper's start: an image
    of uniform noise, as in Golan et al.'s tutorial), clipped to x0 in [1e-6, 1 - 1e-6]."""
    draws = [
        torch.rand(shape, generator=torch.Generator().manual_seed(int(seed))) for seed in seeds
    ]
    if not draws:
        return torch.zeros((0, *shape), device=device)
    return torch.logit(torch.stack(draws), eps=1e-6).to(device)


def smooth_minimum(log_terms: torch.Tensor, beta: float) -> torch.Tensor:
    """-(1/beta) logsumexp(-beta * terms) over the last axis (the smooth minimum of Golan et al.
    2020, eq. 4; their terms are calibrated logits, the ``logsigmoid`` variant's log
    probabilities)."""
    if beta <= 0:
        raise ValueError("beta must be positive")
    return -torch.logsumexp(-beta * log_terms, dim=-1) / beta


@dataclass(frozen=True)
class SynthesisSettings:
    """Optimiser settings: Adam on the image parameters (``parameterisation``: ``pixel``, x =
    sigmoid(z), or ``fourier``, see ``image_parameterisation``), one run per beta until the best
    smooth score (in probability space: exp(c_beta), or its sigmoid for ``golan2020``) improves by
    less than ``tolerance`` (relative) over the last ``window`` steps, or ``max_steps``; restart
    from new noise while c <
    ``threshold``. ``learning_rate`` None takes the parametrisation's default (pixel 0.3, Fourier
    0.05); ``batch_size`` None sizes batches to the device (one batch on the CPU); ``precision``
    ``bfloat16`` / ``float16`` runs the optimiser's forward passes under autocast (the reported c
    is always recomputed in float32). ``objective`` (``OBJECTIVES``): ``logsigmoid``, humanlike's
    variant (smooth minimum of log probabilities, z0 ~ U(-init_range, init_range)), or
    ``golan2020``, the paper's eq. 4 (smooth minimum of calibrated logits, x0 ~ U(0, 1) noise; with
    the ``fourier`` parametrisation only the objective changes)."""

    betas: tuple[float, ...] = (1.0, 10.0, 100.0)
    learning_rate: float | None = None
    window: int = 50
    tolerance: float = 1e-3
    max_steps: int = 1000
    threshold: float = 0.85
    max_attempts: int = 5
    init_range: float = 2.0  # pixel: z0 ~ Uniform(-init_range, init_range)
    parameterisation: str = "pixel"
    precision: str = "float32"
    batch_size: int | None = None
    objective: str = "logsigmoid"

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if not self.betas or any(b <= 0 for b in self.betas):
            raise ValueError("betas must be a non-empty sequence of positive numbers")
        if self.window < 1 or self.max_steps < 1 or self.max_attempts < 1:
            raise ValueError("window, max_steps and max_attempts must be at least 1")
        if not 0 < self.threshold < 1:
            raise ValueError("threshold must lie strictly between 0 and 1")
        if self.parameterisation not in PARAMETERISATIONS:
            raise ValueError(
                f"parameterisation must be one of {PARAMETERISATIONS}, got {self.parameterisation!r}"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        settings_learning_rate(self.parameterisation, self.learning_rate)

    @property
    def lr(self) -> float:
        """The learning rate in use."""
        return settings_learning_rate(self.parameterisation, self.learning_rate)


@dataclass(frozen=True)
class ControversialStimuli:
    """Synthesised images for one model pair and its targeted class pairs.

    ``images``: float32 (N, C, H, W) in [0, 1], quantised to 8 bits (what a PNG stores);
    ``controversiality``: eq. 2 on the quantised image; ``attempts``: noise restarts used (1-based);
    ``probabilities_1`` / ``_2``: (N, K) calibrated probabilities of each model;
    ``image_steps``: optimiser steps summed over stimuli (the work done);
    ``optimiser_steps``: batched optimiser steps (one forward and backward pass per model each);
    ``precision_gap``: with mixed precision, max |c at that precision - c in float32| over the
    kept images (None in float32).
    """

    model_1: str
    model_2: str
    classes: tuple[str, ...]
    class_1: np.ndarray
    class_2: np.ndarray
    images: np.ndarray
    controversiality: np.ndarray
    attempts: np.ndarray
    probabilities_1: np.ndarray
    probabilities_2: np.ndarray
    image_steps: int
    precision_gap: float | None = None
    optimiser_steps: int = 0

    def share_at_least(self, threshold: float = 0.85) -> float:
        """Share of class pairs whose stimulus reaches controversiality >= threshold."""
        return float(np.mean(self.controversiality >= threshold))

    def classified_as_intended(self) -> np.ndarray:
        """p_1(a) > 0.5 > p_1(b) and p_2(b) > 0.5 > p_2(a), per stimulus."""
        rows = np.arange(len(self.class_1))
        a, b = self.class_1, self.class_2
        p1, p2 = self.probabilities_1, self.probabilities_2
        return (p1[rows, a] > 0.5) & (p1[rows, b] < 0.5) & (p2[rows, b] > 0.5) & (p2[rows, a] < 0.5)

    def to_frame(self) -> pd.DataFrame:
        """One row per stimulus: targeted models and classes, controversiality, attempts."""
        return pd.DataFrame(
            {
                "targeted_model_1": self.model_1,
                "targeted_model_2": self.model_2,
                "targeted_class_1": [self.classes[i] for i in self.class_1],
                "targeted_class_2": [self.classes[i] for i in self.class_2],
                "controversiality": self.controversiality,
                "attempts": self.attempts,
            }
        )


def all_class_pairs(n_classes: int) -> np.ndarray:
    """The K (K - 1) ordered pairs (a, b), a != b, as an (M, 2) integer array."""
    return np.array(list(itertools.permutations(range(n_classes), 2)), dtype=np.int64)


def _check_pair(model_1: CandidateModel, model_2: CandidateModel) -> None:
    if model_1.classes != model_2.classes:
        raise ValueError(
            f"models {model_1.name!r} and {model_2.name!r} must share their classes "
            f"({model_1.classes} vs {model_2.classes})"
        )
    if model_1.input_shape != model_2.input_shape:
        raise ValueError(
            f"models {model_1.name!r} and {model_2.name!r} expect different input shapes "
            f"({model_1.input_shape} vs {model_2.input_shape})"
        )


#: An image within this much of the best hard controversiality seen replaces the kept one.
KEEP_TOLERANCE = 1e-4


def image_seed(random_state: int, stimulus: int, attempt: int) -> int:
    """The noise seed of one stimulus' attempt: independent of batching and of the other stimuli."""
    state = np.random.SeedSequence([int(random_state), int(stimulus), int(attempt)])
    return int(state.generate_state(1)[0])


#: On a GPU, the active stimuli are re-gathered (and the phase's end tested) every this many steps:
#: each re-gathering waits for the device, so between them converged stimuli ride along in the
#: batch with their updates masked out. On the CPU, every step (no waiting to save).
GPU_GATHER_EVERY = 10


def _gather_interval(device: torch.device) -> int:
    """Steps between gatherings of the active stimuli on ``device`` (see ``GPU_GATHER_EVERY``)."""
    return 1 if device.type == "cpu" else GPU_GATHER_EVERY


def _members(active: torch.Tensor, bucketed: bool) -> torch.Tensor:
    """Indices of the active stimuli; ``bucketed``, padded with converged ones to the next power of
    two (at most all stimuli), so that a GPU replays one CUDA graph per batch size."""
    if not bucketed:
        return active.nonzero().squeeze(1)
    count = int(active.sum())
    size = min(len(active), 1 << max(0, count - 1).bit_length()) if count else 0
    return torch.argsort((~active).to(torch.uint8), stable=True)[:size]


def _optimise(
    forward_1: GraphedForward,
    forward_2: GraphedForward,
    a: torch.Tensor,
    b: torch.Tensor,
    z: torch.Tensor,
    param: ImageParameterisation,
    settings: SynthesisSettings,
    bar: tqdm,
) -> tuple[torch.Tensor, int, int]:
    """One attempt: Adam on the parameters z for each beta in turn; returns per stimulus the latest
    image whose hard c was within ``KEEP_TOLERANCE`` of the best seen, the image-steps done and the
    batched optimiser steps taken.

    Within a beta phase a stimulus stops (its z is frozen and its records no longer change) once
    its best smooth score in probability space has improved by less than ``tolerance``
    (relative) over the last ``window`` steps; the phase ends when every stimulus has converged
    or after ``max_steps``.
    The forward pass holds the stimuli active at the last gathering (``GPU_GATHER_EVERY``); the
    loss, the records and the Adam update are masked to those still active, so the result does not
    depend on how often the set is gathered, and no step waits for the device in between.
    """
    n = len(a)
    device = z.device
    gather_every = _gather_interval(device)
    best_c = torch.full((n,), -1.0, device=device)
    best_x = param.image(z).detach().clone()
    item_steps = torch.zeros((), dtype=torch.int64, device=device)
    batch_steps = reported = 0
    window = settings.window
    for beta in settings.betas:
        z = z.detach().requires_grad_(True)
        optimiser = torch.optim.Adam([z], lr=settings.lr)
        history = torch.zeros(window + 1, n, device=device)
        best_smooth = torch.zeros(n, device=device)
        active = torch.ones(n, dtype=torch.bool, device=device)
        idx = torch.arange(n, device=device)
        for step in range(settings.max_steps):
            if step % gather_every == 0:
                idx = _members(active, bucketed=gather_every > 1)  # waits for the device
                done = int(item_steps)
                bar.update(done - reported)
                reported = done
                if len(idx) == 0:
                    break
            live = active[idx]
            x = param.image(z.index_select(0, idx))
            logits_1, logits_2 = forward_1(x), forward_2(x)
            terms = objective_terms(
                settings.objective, logits_1.float(), logits_2.float(), a[idx], b[idx]
            )
            smooth = smooth_minimum(terms, beta)
            optimiser.zero_grad(set_to_none=False)
            (-(smooth * live).sum()).backward()
            with torch.no_grad():
                hard = terms_to_probability(settings.objective, terms.min(dim=-1).values)
                seen = best_c[idx]
                best = torch.where(live, torch.maximum(seen, hard), seen)
                best_c[idx] = best
                # Keep the latest image within KEEP_TOLERANCE of the best hard c seen: where c is
                # flat (one term binds) the later, smoother-optimised image is the better one.
                keep = live & (hard >= best - KEEP_TOLERANCE)
                best_x[idx] = torch.where(
                    keep.view(-1, *([1] * (x.ndim - 1))), x.to(best_x.dtype), best_x[idx]
                )
                best_smooth[idx] = torch.where(
                    live,
                    torch.maximum(
                        best_smooth[idx], terms_to_probability(settings.objective, smooth)
                    ),
                    best_smooth[idx],
                )
                history[step % (window + 1)] = best_smooth
                before = z.detach().clone()
                optimiser.step()
                # Adam's momentum must not move converged stimuli
                z.copy_(torch.where(active.view(-1, *([1] * (z.ndim - 1))), z, before))
            item_steps += live.sum()
            batch_steps += 1
            if step >= window:
                old = history[(step - window) % (window + 1)]
                active &= (best_smooth - old) > settings.tolerance * old
        done = int(item_steps)
        bar.update(done - reported)
        reported = done
        bar.set_postfix(beta=beta, mean_c=f"{best_c.mean().item():.3f}", refresh=False)
    return best_x, int(item_steps), batch_steps


def _place(
    model_1: CandidateModel, model_2: CandidateModel, device: torch.device | str | None
) -> torch.device:
    """Move both models to ``device`` (default: model 1's device) and return it."""
    target = model_1.device if device is None else resolve_device(device)
    model_1.to(target)
    model_2.to(target)
    return target


def synthesize_controversial(
    model_1: CandidateModel,
    model_2: CandidateModel,
    class_pairs: np.ndarray | Sequence[tuple[int, int]] | None = None,
    *,
    settings: SynthesisSettings | None = None,
    random_state: int = 0,
    progress: bool = True,
    device: torch.device | str | None = None,
) -> ControversialStimuli:
    """Maximise c for every (a, b) in ``class_pairs`` (default all K(K-1)) in batches.

    Stimuli whose controversiality on the 8-bit image is below ``settings.threshold`` are restarted
    from new noise (only those) up to ``settings.max_attempts`` times in all; the best attempt is
    kept. Stimulus i's noise at attempt k comes from its own seed (``image_seed``), so it does not
    depend on the batch size or on the other class pairs. ``device`` moves both models there
    (``auto``, ``cpu``, ``cuda[:N]``; default: where model 1 is).
    """
    settings = settings or SynthesisSettings()
    _check_pair(model_1, model_2)
    n_classes = len(model_1.classes)
    pairs = all_class_pairs(n_classes) if class_pairs is None else np.asarray(class_pairs)
    if (
        pairs.ndim != 2
        or pairs.shape[1] != 2
        or len(pairs) == 0
        or not np.issubdtype(pairs.dtype, np.integer)
    ):
        raise ValueError("class_pairs must be a non-empty (M, 2) array of class indices")
    if pairs.min() < 0 or pairs.max() >= n_classes or np.any(pairs[:, 0] == pairs[:, 1]):
        raise ValueError(f"class_pairs must hold distinct class indices in [0, {n_classes - 1}]")
    target = _place(model_1, model_2, device)
    check_precision(settings.precision, target)
    a_all = torch.from_numpy(pairs[:, 0].astype(np.int64)).to(target)
    b_all = torch.from_numpy(pairs[:, 1].astype(np.int64)).to(target)
    n = len(pairs)
    shape = model_1.input_shape
    param = ImageParameterisation(settings.parameterisation, shape, target)
    forward_1 = GraphedForward(model_1, target, settings.precision)
    forward_2 = GraphedForward(model_2, target, settings.precision)
    batch = batch_size_for(target, shape, n, gradients=True, requested=settings.batch_size)

    best_c = np.full(n, -1.0)
    best_x = np.zeros((n, *shape), dtype=np.float32)
    attempts = np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    image_steps = optimiser_steps = 0
    desc = f"{model_1.name} vs {model_2.name}"
    with tqdm(desc=desc, unit="image-step", disable=not progress, leave=False) as bar:
        for attempt in range(1, settings.max_attempts + 1):
            bar.set_description(f"{desc} (attempt {attempt}, {len(todo)} pairs)")
            for start in range(0, len(todo), batch):
                chunk = todo[start : start + batch]
                seeds = np.array([image_seed(random_state, i, attempt) for i in chunk])
                if settings.objective == "golan2020" and settings.parameterisation == "pixel":
                    z0 = uniform_noise_start(seeds, shape, target)
                else:
                    z0 = param.initial(seeds, settings.init_range)
                idx = torch.from_numpy(chunk).to(target)
                x_opt, used, steps = _optimise(
                    forward_1, forward_2, a_all[idx], b_all[idx], z0, param, settings, bar
                )
                image_steps += used
                optimiser_steps += steps
                x = quantise(x_opt.float().cpu().numpy())
                c = _controversiality_of(model_1, model_2, x, pairs[chunk, 0], pairs[chunk, 1])
                better = c > best_c[chunk]
                best_c[chunk[better]] = c[better]
                best_x[chunk[better]] = x[better]
                attempts[chunk] = attempt
            todo = todo[best_c[todo] < settings.threshold]
            if len(todo) == 0:
                break
    p_1, p_2 = model_1.predict_proba(best_x), model_2.predict_proba(best_x)
    c_final = controversiality(p_1, p_2, pairs[:, 0], pairs[:, 1])
    gap = None
    if settings.precision != "float32":
        low_1 = special.expit(model_1.predict_logits(best_x, precision=settings.precision))
        low_2 = special.expit(model_2.predict_logits(best_x, precision=settings.precision))
        c_low = controversiality(low_1, low_2, pairs[:, 0], pairs[:, 1])
        gap = float(np.max(np.abs(c_low - c_final)))
    return ControversialStimuli(
        model_1=model_1.name,
        model_2=model_2.name,
        classes=model_1.classes,
        class_1=pairs[:, 0].copy(),
        class_2=pairs[:, 1].copy(),
        images=best_x,
        controversiality=c_final,
        attempts=attempts,
        probabilities_1=p_1,
        probabilities_2=p_2,
        image_steps=image_steps,
        optimiser_steps=optimiser_steps,
        precision_gap=gap,
    )


def quantise(images: np.ndarray) -> np.ndarray:
    """Round [0, 1] images to the 256 levels per channel an 8-bit PNG stores."""
    return (np.round(np.clip(images, 0.0, 1.0) * 255.0) / 255.0).astype(np.float32)


def _controversiality_of(
    model_1: CandidateModel,
    model_2: CandidateModel,
    images: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
) -> np.ndarray:
    return controversiality(model_1.predict_proba(images), model_2.predict_proba(images), a, b)
