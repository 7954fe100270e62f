"""ImageNet's 1,000 classes aggregated to the 16 entry-level categories of Geirhos et al.

The categories and the ImageNet (ILSVRC-2012) class indices that belong to each are the WordNet
mapping used by model-vs-human (Geirhos et al. 2018, "Generalisation in humans and deep neural
networks"; Geirhos et al. 2021, "Partial success in closing the gap between human and machine
vision"), facts taken from its ``helper/human_categories.py``. Its decision for an image is the
category whose *mean* softmax probability over its ImageNet classes is highest
(``ImageNetProbabilitiesTo16ClassesMapping`` with the default aggregation ``np.mean``); indices
belonging to no category are ignored. ``aggregation="sum"`` gives the probability-sum alternative.
"""

from __future__ import annotations

import numpy as np
from scipy import special

#: The 16 categories in model-vs-human's order (alphabetical).
IMAGENET16_CATEGORIES: tuple[str, ...] = (
    "airplane", "bear", "bicycle", "bird", "boat", "bottle", "car", "cat",
    "chair", "clock", "dog", "elephant", "keyboard", "knife", "oven", "truck",
)  # fmt: skip

#: ImageNet class indices per category (model-vs-human's ``<category>_indices``).
IMAGENET16_INDICES: dict[str, tuple[int, ...]] = {
    "airplane": (404,),
    "bear": (294, 295, 296, 297),
    "bicycle": (444, 671),
    "bird": (
        8, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 23, 24, 80, 81, 82, 83, 87, 88, 89, 90, 91,
        92, 93, 94, 95, 96, 98, 99, 100, 127, 128, 129, 130, 131, 132, 133, 135, 136, 137, 138,
        139, 140, 141, 142, 143, 144, 145,
    ),
    "boat": (472, 554, 625, 814, 914),
    "bottle": (440, 720, 737, 898, 899, 901, 907),
    "car": (436, 511, 817),
    "cat": (281, 282, 283, 284, 285, 286),
    "chair": (423, 559, 765, 857),
    "clock": (409, 530, 892),
    "dog": (
        152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169,
        170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187,
        188, 189, 190, 191, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 205, 206, 207,
        208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225,
        226, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 243, 244, 245,
        246, 247, 248, 249, 250, 252, 253, 254, 255, 256, 257, 259, 261, 262, 263, 265, 266, 267,
        268,
    ),
    "elephant": (385, 386),
    "keyboard": (508, 878),
    "knife": (499,),
    "oven": (766,),
    "truck": (555, 569, 656, 675, 717, 734, 864, 867),
}  # fmt: skip

N_IMAGENET_CLASSES = 1000
AGGREGATIONS = ("mean", "sum")


def membership(
    groups: dict[str, tuple[int, ...]] | None = None, n_classes: int = N_IMAGENET_CLASSES
) -> np.ndarray:
    """(categories x classes) 0/1 matrix: row k marks the source classes of category k."""
    groups = IMAGENET16_INDICES if groups is None else groups
    matrix = np.zeros((len(groups), n_classes))
    for row, indices in enumerate(groups.values()):
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= n_classes:
            raise ValueError(f"category indices must be non-empty and lie in [0, {n_classes - 1}]")
        matrix[row, idx] = 1.0
    return matrix


def aggregate_log_probabilities(
    logits: np.ndarray, aggregation: str = "mean", groups: dict[str, tuple[int, ...]] | None = None
) -> np.ndarray:
    """(N, 16) log of each category's mean (or summed) softmax probability over its classes."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    logits = np.atleast_2d(np.asarray(logits, dtype=float))
    members = membership(groups, logits.shape[1])
    log_p = special.log_softmax(logits, axis=1)
    with np.errstate(divide="ignore"):
        mask = np.log(members)  # 0 for members, -inf otherwise
    out = special.logsumexp(log_p[:, None, :] + mask[None], axis=2)
    if aggregation == "mean":
        out = out - np.log(members.sum(axis=1))
    return out


def imagenet16_decisions(logits: np.ndarray, aggregation: str = "mean") -> list[str]:
    """The category model-vs-human decides on for each row of ImageNet logits (N, 1000)."""
    scores = aggregate_log_probabilities(logits, aggregation)
    return [IMAGENET16_CATEGORIES[i] for i in scores.argmax(axis=1)]
