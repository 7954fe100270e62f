"""Controversiality (Golan et al. 2020 eq. 2), its smooth minimum (eq. 4), gradient and optimiser,
checked on toy linear models whose optimum is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import expit
from torch import nn

from humanlike.stimuli.controversial import (
    SynthesisSettings,
    controversiality,
    log_controversiality_terms,
    objective_terms,
    smooth_minimum,
    synthesize_controversial,
    terms_to_probability,
    uniform_noise_start,
)
from humanlike.stimuli.models import CandidateModel


def linear_model(name: str, weight: list[list[float]], bias: list[float]) -> CandidateModel:
    """A two-class candidate model on 2-pixel images: logits = weight @ (x0, x1) + bias."""
    layer = nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))
    return CandidateModel(
        nn.Sequential(nn.Flatten(), layer), ("a", "b"), name=name, input_shape=(1, 1, 2)
    )


def toy_pair(k1: float, k2: float) -> tuple[CandidateModel, CandidateModel]:
    """Model 1 reads pixel 0: logit_a = k1 (x0 - 1/4), logit_b = k1 (x0 - 3/4); model 2 reads pixel 1:
    logit_a = k2 (x1 - 1/2), logit_b = k2 (x1 - 1/10).

    For target (a, b) the four terms are sigma(k1 (x0 - 1/4)), sigma(k1 (3/4 - x0)),
    sigma(k2 (x1 - 1/10)), sigma(k2 (1/2 - x1)): mirror pairs about x0 = 1/2 and x1 = 3/10. So the
    smooth minimum is maximised exactly at (1/2, 3/10) for every beta, and with k1/4 < k2/5 the hard
    maximum is c* = sigma(k1 / 4).
    """
    m1 = linear_model("one", [[k1, 0.0], [k1, 0.0]], [-k1 / 4, -3 * k1 / 4])
    m2 = linear_model("two", [[0.0, k2], [0.0, k2]], [-k2 / 2, -k2 / 10])
    return m1, m2


def test_controversiality_is_the_smallest_of_the_four_terms():
    p_1 = np.array([[0.9, 0.2, 0.5]])
    p_2 = np.array([[0.3, 0.95, 0.1]])
    # min{p_1(a)=0.9, 1-p_1(b)=0.8, p_2(b)=0.95, 1-p_2(a)=0.7} for a=0, b=1
    assert controversiality(p_1, p_2, np.array([0]), np.array([1]))[0] == pytest.approx(0.7)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, (5, 4), elements=st.floats(-30, -1e-6)),
    st.sampled_from([1.0, 3.0, 10.0, 100.0, 1000.0]),
)
def test_smooth_minimum_lies_within_log4_over_beta_below_the_hard_minimum(log_terms, beta):
    terms = torch.from_numpy(log_terms)
    smooth = smooth_minimum(terms, beta).numpy()
    hard = log_terms.min(axis=1)
    assert np.all(smooth <= hard + 1e-12)
    assert np.all(hard - smooth <= math.log(4) / beta + 1e-12)


def test_smooth_minimum_gap_is_exactly_log4_over_beta_when_all_terms_are_equal():
    terms = torch.full((1, 4), math.log(0.9), dtype=torch.float64)
    for beta in (1.0, 10.0, 100.0):
        assert float(smooth_minimum(terms, beta)) == pytest.approx(
            math.log(0.9) - math.log(4) / beta
        )


def test_smooth_minimum_converges_to_the_hard_minimum_as_beta_grows():
    rng = np.random.default_rng(0)
    terms = torch.from_numpy(np.log(rng.uniform(0.05, 1, size=(100, 4))))
    hard = terms.min(dim=1).values
    gaps = [float((hard - smooth_minimum(terms, beta)).abs().max()) for beta in (1, 10, 100, 1e4)]
    assert gaps == sorted(gaps, reverse=True)
    assert gaps[-1] < 2e-4


def test_smooth_minimum_gradient_is_the_softmin_weighting_of_the_terms():
    # d/dt_k [-(1/beta) log sum exp(-beta t)] = softmax(-beta t)_k (closed form)
    t = torch.tensor([[-0.1, -0.5, -0.2, -0.05]], dtype=torch.float64, requires_grad=True)
    smooth_minimum(t, 10.0).sum().backward()
    expected = torch.softmax(-10.0 * t.detach(), dim=-1)
    torch.testing.assert_close(t.grad, expected)


def test_objective_gradient_matches_finite_differences():
    weight = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    weight_2 = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    a, b = torch.tensor([0, 2]), torch.tensor([1, 0])

    def objective(z: torch.Tensor) -> torch.Tensor:
        x = torch.sigmoid(z)
        return smooth_minimum(log_controversiality_terms(x @ weight.T, x @ weight_2.T, a, b), 10.0)

    z = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(objective, (z,))


def test_log_terms_are_the_logs_of_the_four_probabilities():
    logits_1 = torch.tensor([[2.0, -1.0, 0.5]])
    logits_2 = torch.tensor([[-3.0, 1.5, 0.0]])
    terms = log_controversiality_terms(logits_1, logits_2, torch.tensor([0]), torch.tensor([1]))
    expected = np.log([expit(2.0), 1 - expit(-1.0), expit(1.5), 1 - expit(-3.0)])
    np.testing.assert_allclose(terms.numpy()[0], expected, rtol=1e-6)


def test_optimiser_finds_the_known_optimum_of_a_toy_linear_pair():
    m1, m2 = toy_pair(k1=8.0, k2=12.0)
    result = synthesize_controversial(m1, m2, class_pairs=[(0, 1)], random_state=3, progress=False)
    x0, x1 = result.images[0].ravel()
    # Optimum (1/2, 3/10); the stored image is quantised to 1/255.
    assert x0 == pytest.approx(0.5, abs=3 / 255)
    assert x1 == pytest.approx(0.3, abs=3 / 255)
    assert result.controversiality[0] == pytest.approx(expit(2.0), abs=0.01)  # sigma(k1 / 4)
    assert result.attempts[0] == 1  # c* = 0.881 >= 0.85: no restart


def test_unreachable_threshold_uses_every_attempt_and_keeps_the_optimum():
    m1, m2 = toy_pair(k1=4.0, k2=12.0)  # c* = sigma(1) = 0.731 < 0.85
    result = synthesize_controversial(
        m1, m2, class_pairs=[(0, 1)], settings=SynthesisSettings(max_attempts=3), progress=False
    )
    assert result.attempts[0] == 3
    assert result.controversiality[0] == pytest.approx(expit(1.0), abs=0.01)


def test_synthesis_is_reproducible_from_its_seed():
    m1, m2 = toy_pair(k1=8.0, k2=12.0)

    def run(seed):
        return synthesize_controversial(
            m1,
            m2,
            class_pairs=[(0, 1), (1, 0)],
            settings=SynthesisSettings(max_attempts=1),
            random_state=seed,
            progress=False,
        )

    np.testing.assert_array_equal(run(5).images, run(5).images)


def test_models_with_different_classes_are_rejected():
    m1, _ = toy_pair(8.0, 12.0)
    other = CandidateModel(
        nn.Sequential(nn.Flatten(), nn.Linear(2, 2)),
        ("x", "y"),
        name="other",
        input_shape=(1, 1, 2),
    )
    with pytest.raises(ValueError, match="share their classes"):
        synthesize_controversial(m1, other, progress=False)


def test_class_pairs_with_equal_classes_are_rejected():
    m1, m2 = toy_pair(8.0, 12.0)
    with pytest.raises(ValueError, match="class_pairs"):
        synthesize_controversial(m1, m2, class_pairs=[(1, 1)], progress=False)


def test_golan2020_terms_are_the_four_calibrated_logits_and_their_min_maps_to_c():
    # eq. 4 of Golan et al. 2020 takes the smooth minimum over logits, not log probabilities
    logits_1 = torch.tensor([[2.0, -1.0, 0.5]])
    logits_2 = torch.tensor([[-3.0, 1.5, 0.0]])
    a, b = torch.tensor([0]), torch.tensor([1])
    terms = objective_terms("golan2020", logits_1, logits_2, a, b)
    np.testing.assert_allclose(terms.numpy()[0], [2.0, 1.0, 1.5, 3.0])
    c = controversiality(expit(logits_1.numpy()), expit(logits_2.numpy()), np.array([0]),
                         np.array([1]))
    hard = terms_to_probability("golan2020", terms.min(dim=-1).values)
    assert float(hard[0]) == pytest.approx(c[0], rel=1e-6)  # sigma(1) = 1 - p_1(b)
    # the default stays the log-probability variant
    variant = objective_terms("logsigmoid", logits_1, logits_2, a, b)
    torch.testing.assert_close(variant, log_controversiality_terms(logits_1, logits_2, a, b))
    assert SynthesisSettings().objective == "logsigmoid"


def test_golan2020_starts_from_an_image_of_uniform_noise():
    z0 = uniform_noise_start(np.arange(200), (1, 8, 8), torch.device("cpu"))
    x0 = torch.sigmoid(z0).numpy().ravel()
    # U(0, 1) pixels: mean 1/2, variance 1/12, a flat histogram (the variant's sigmoid(U(-2, 2))
    # has variance 0.067 and no pixel beyond 0.881)
    assert x0.mean() == pytest.approx(0.5, abs=0.01)
    assert x0.var() == pytest.approx(1 / 12, abs=0.003)
    assert np.mean(x0 > 0.95) == pytest.approx(0.05, abs=0.01)
    again = uniform_noise_start(np.array([7]), (1, 8, 8), torch.device("cpu"))
    torch.testing.assert_close(again[0], z0[7])  # one generator per seed: batch-independent


def test_golan2020_objective_finds_the_known_optimum_of_a_toy_linear_pair():
    # the logit terms k1 (x0 - 1/4), k1 (3/4 - x0), k2 (x1 - 1/10), k2 (1/2 - x1) are mirror pairs
    # about (1/2, 3/10) as well, so the paper's objective has the same optimum, c* = sigma(k1 / 4)
    m1, m2 = toy_pair(k1=8.0, k2=12.0)
    result = synthesize_controversial(
        m1, m2, class_pairs=[(0, 1)], random_state=3, progress=False,
        settings=SynthesisSettings(objective="golan2020"),
    )
    x0, x1 = result.images[0].ravel()
    assert x0 == pytest.approx(0.5, abs=3 / 255)
    assert x1 == pytest.approx(0.3, abs=3 / 255)
    assert result.controversiality[0] == pytest.approx(expit(2.0), abs=0.01)


def test_unknown_objective_is_rejected():
    with pytest.raises(ValueError, match="objective"):
        SynthesisSettings(objective="logits")
