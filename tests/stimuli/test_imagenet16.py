"""ImageNet-to-16-category decisions as model-vs-human makes them, on hand-checked logit vectors.

model-vs-human (``ImageNetProbabilitiesTo16ClassesMapping``) averages the softmax probabilities of
each category's ImageNet classes (``np.mean``) and decides for the largest; classes outside the 16
categories are ignored. Each vector below was worked out by hand from its index lists.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from humanlike.stimuli.imagenet16 import (
    IMAGENET16_CATEGORIES,
    IMAGENET16_INDICES,
    aggregate_log_probabilities,
    imagenet16_decisions,
)
from humanlike.stimuli.model_spec import ClassMapping, InputSpec, ModelSpec, PreparedNetwork


def logits_from_probabilities(assign: dict[int, float], rest: float) -> np.ndarray:
    """Logits whose softmax gives ``assign[i]`` at index i and spreads ``rest`` over the others."""
    p = np.full(1000, rest / (1000 - len(assign)))
    for i, value in assign.items():
        p[i] = value
    assert p.sum() == pytest.approx(1.0)
    return np.log(p)


def test_the_index_lists_are_model_vs_humans():
    assert tuple(sorted(IMAGENET16_CATEGORIES)) == IMAGENET16_CATEGORIES
    assert len(IMAGENET16_CATEGORIES) == 16
    sizes = {c: len(v) for c, v in IMAGENET16_INDICES.items()}
    # Counted by hand in model-vs-human's helper/human_categories.py.
    assert sizes == {
        "airplane": 1, "bear": 4, "bicycle": 2, "bird": 49, "boat": 5, "bottle": 7, "car": 3,
        "cat": 6, "chair": 4, "clock": 3, "dog": 109, "elephant": 2, "keyboard": 2, "knife": 1,
        "oven": 1, "truck": 8,
    }  # fmt: skip
    every = [i for v in IMAGENET16_INDICES.values() for i in v]
    assert len(every) == len(set(every)) == 207  # disjoint categories


def test_a_vector_peaked_on_a_category_index_gives_that_category():
    # 499 = letter opener ("knife"); 409 = analog clock; 386 = African elephant; 817 = sports car.
    rows = [logits_from_probabilities({i: 0.9}, 0.1) for i in (499, 409, 386, 817)]
    assert imagenet16_decisions(np.array(rows)) == ["knife", "clock", "elephant", "car"]


def test_mean_aggregation_decides_where_sum_and_mean_disagree():
    # Each of the 109 dog classes at 0.004 (sum 0.436, mean 0.004) against one knife at 0.05:
    # the sum picks dog, the mean (model-vs-human's) picks knife.
    assign = {i: 0.004 for i in IMAGENET16_INDICES["dog"]} | {499: 0.05}
    row = logits_from_probabilities(assign, 1 - 0.436 - 0.05)
    assert imagenet16_decisions(row[None]) == ["knife"]
    assert imagenet16_decisions(row[None], aggregation="sum") == ["dog"]


def test_classes_outside_the_16_categories_are_ignored():
    # Mass on tench (0) and on 192 (Cairn terrier, left out of model-vs-human's dog list): the
    # decision falls to cat (281 at 0.02) over bird (8 at 0.01).
    row = logits_from_probabilities({0: 0.6, 192: 0.3, 281: 0.02, 8: 0.01}, 0.07)
    assert imagenet16_decisions(row[None]) == ["cat"]


def test_aggregated_log_probability_is_the_log_mean_of_the_softmax():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (5, 1000))
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    expected = np.stack(
        [p[:, IMAGENET16_INDICES[c]].mean(1) for c in IMAGENET16_CATEGORIES], axis=1
    )
    np.testing.assert_allclose(np.exp(aggregate_log_probabilities(logits)), expected, rtol=1e-10)


class FixedLogits(torch.nn.Module):
    """A "network" returning given ImageNet logits whatever the images."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.logits = logits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits[: len(x)]


@pytest.mark.parametrize("aggregation", ["mean", "sum"])
def test_the_torch_readout_of_a_model_toml_matches_the_numpy_mapping(tmp_path, aggregation):
    spec = ModelSpec(
        name="m",
        path=tmp_path / "m.toml",
        input=InputSpec(3, 4, 4, (0.0,) * 3, (1.0,) * 3),
        classes=ClassMapping(IMAGENET16_CATEGORIES, dict(IMAGENET16_INDICES), aggregation),
    )
    logits = torch.randn(6, 1000, generator=torch.Generator().manual_seed(0)) * 4
    net = PreparedNetwork(FixedLogits(logits), spec)
    with torch.no_grad():
        out = net(torch.zeros(6, 3, 4, 4)).double().numpy()
    expected = aggregate_log_probabilities(logits.double().numpy(), aggregation)
    np.testing.assert_allclose(out, expected, atol=1e-4)
    decisions = [IMAGENET16_CATEGORIES[i] for i in out.argmax(1)]
    assert decisions == imagenet16_decisions(logits.numpy(), aggregation)
