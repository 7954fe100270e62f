"""How a synthesised image is parametrised: the variable Adam moves, and the image it makes.

``pixel``: x = sigmoid(z), one unbounded z per pixel and channel, z0 ~ Uniform(-r, r) (the
sigmoid-bounded pixel space Golan, Raju & Kriegeskorte 2020 used for MNIST).

``fourier``: the decorrelated parametrisation of Olah, Mordvintsev & Schubert (2017, "Feature
visualization", Distill): per channel a 2-d real Fourier spectrum whose coefficients are scaled by
1 / max(f, 1 / max(H, W)) (so Adam steps are spread evenly over spatial frequencies, favouring
natural 1/f images), brought back by the orthonormal inverse FFT and divided by 4, then for three
channels mixed by the square root of ImageNet's colour covariance (normalised by its largest column
norm), then squashed by a sigmoid. It is the "decorrelated" optimisation of Golan & Kriegeskorte's
controversial-stimuli tutorial for colour networks. Spectra start at N(0, 0.01^2) (a grey image).
"""

from __future__ import annotations

import math

import numpy as np
import torch

PARAMETERISATIONS = ("pixel", "fourier")
#: Default Adam learning rate per parametrisation (pixel as the MNIST synthesis; Fourier as Lucid).
DEFAULT_LEARNING_RATE = {"pixel": 0.3, "fourier": 0.05}

# Square root of ImageNet's RGB colour covariance (Olah et al. 2017, Lucid's color_correlation_svd_sqrt).
_COLOUR_SQRT = np.array([[0.26, 0.09, 0.02], [0.27, 0.00, -0.05], [0.27, -0.09, 0.03]])
_FOURIER_INIT_SD = 0.01
_FOURIER_DIVISOR = 4.0


def _frequency_scale(height: int, width: int) -> torch.Tensor:
    """1 / max(f, 1 / max(H, W)) for each coefficient of an (H, W // 2 + 1) real spectrum."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    f = np.sqrt(fx**2 + fy**2)
    return torch.from_numpy(1.0 / np.maximum(f, 1.0 / max(height, width))).float()


class ImageParameterisation:
    """Maps optimised parameters to images in [0, 1] of shape (N, C, H, W)."""

    def __init__(self, kind: str, image_shape: tuple[int, ...], device: torch.device):
        if kind not in PARAMETERISATIONS:
            raise ValueError(f"parameterisation must be one of {PARAMETERISATIONS}, got {kind!r}")
        self.kind = kind
        if len(image_shape) != 3:
            raise ValueError(f"image shape must be (channels, height, width), got {image_shape}")
        channels, height, width = (int(v) for v in image_shape)
        self.shape = (channels, height, width)
        self.device = device
        if kind == "fourier":
            self.scale = _frequency_scale(height, width).to(device)[None, None, :, :, None]
            if channels == 3:
                mix = _COLOUR_SQRT / np.max(np.linalg.norm(_COLOUR_SQRT, axis=0))
                self.colour: torch.Tensor | None = torch.from_numpy(mix).float().to(device)
            else:
                self.colour = None

    @property
    def param_shape(self) -> tuple[int, ...]:
        channels, height, width = self.shape
        if self.kind == "pixel":
            return self.shape
        return (channels, height, width // 2 + 1, 2)

    def initial(self, seeds: np.ndarray, init_range: float) -> torch.Tensor:
        """Starting parameters, one image per seed: each from its own generator (so an image does
        not depend on which others share its batch), drawn on the CPU and moved to the device."""
        draws = []
        for seed in seeds:
            generator = torch.Generator().manual_seed(int(seed))
            if self.kind == "pixel":
                draws.append((torch.rand(self.shape, generator=generator) * 2 - 1) * init_range)
            else:
                draws.append(torch.randn(self.param_shape, generator=generator) * _FOURIER_INIT_SD)
        if not draws:
            return torch.zeros((0, *self.param_shape), device=self.device)
        return torch.stack(draws).to(self.device)

    def image(self, params: torch.Tensor) -> torch.Tensor:
        """Images in (0, 1) from parameters (differentiable)."""
        if self.kind == "pixel":
            return torch.sigmoid(params)
        _, height, width = self.shape
        spectrum = torch.view_as_complex((params * self.scale).contiguous())
        y = torch.fft.irfft2(spectrum, s=(height, width), norm="ortho") / _FOURIER_DIVISOR
        if self.colour is not None:
            y = torch.einsum("nchw,dc->ndhw", y, self.colour)
        return torch.sigmoid(y)


def settings_learning_rate(kind: str, learning_rate: float | None) -> float:
    """The explicit learning rate, or the parametrisation's default."""
    if learning_rate is not None:
        if not (learning_rate > 0 and math.isfinite(learning_rate)):
            raise ValueError("learning_rate must be a positive number")
        return float(learning_rate)
    return DEFAULT_LEARNING_RATE[kind]
