"""Shape bias and shape match on cue-conflict images (Geirhos et al. 2019; Hermann et al. 2020).

A cue-conflict image has the shape of one category and the texture of another; model-vs-human
names it ``<shape><n>-<texture><m>.png``. Images whose shape and texture are the same category
are left out (Brain-Score ``Hermann2020cueconflict``). Shape match = share of responses naming the
shape, texture match = share naming the texture, shape bias = shape / (shape + texture).
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import ArrayLike

_CUE_CONFLICT = re.compile(r"^(?P<shape>[a-z]+)\d+-(?P<texture>[a-z]+)\d+(\.[a-z]+)?$")


def cue_conflict_categories(images: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Shape and texture category of each ``<shape><n>-<texture><m>.png`` name ('' if not one)."""
    names = [str(name).rsplit("_", 1)[-1] for name in np.asarray(images, dtype=object)]
    matches = [_CUE_CONFLICT.match(name) for name in names]
    shape = np.array([m["shape"] if m else "" for m in matches], dtype=object)
    texture = np.array([m["texture"] if m else "" for m in matches], dtype=object)
    return shape, texture


def is_cue_conflict(images: ArrayLike) -> np.ndarray:
    """Images whose name gives a shape and a different texture category (the scored ones)."""
    shape, texture = cue_conflict_categories(images)
    return (shape != "") & (shape != texture)


def shape_bias(shape_match: ArrayLike, texture_match: ArrayLike) -> np.ndarray:
    """Return ``shape / (shape + texture)`` (Geirhos et al. 2019, Fig. 4; Hermann et al. 2020)."""
    s = np.asarray(shape_match, dtype=float)
    t = np.asarray(texture_match, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return s / (s + t)
