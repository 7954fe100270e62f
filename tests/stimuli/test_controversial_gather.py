"""The GPU path of the synthesis, run on the CPU: converged stimuli that stay in the batch between
gatherings (padded to a power of two) change nothing, so the result does not depend on how often
the active stimuli are gathered. (No test needs a GPU; the CUDA graphs are timed in
docs/controversial-stimuli.md.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from humanlike.stimuli import controversial
from humanlike.stimuli.controversial import SynthesisSettings, synthesize_controversial
from humanlike.stimuli.device import GraphedForward
from humanlike.stimuli.models import CandidateModel, torch_threads


def test_members_pad_the_active_stimuli_to_a_power_of_two_with_converged_ones():
    active = torch.tensor([0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0], dtype=torch.bool)
    plain = controversial._members(active, bucketed=False)
    assert plain.tolist() == [1, 2, 5, 7, 10]
    padded = controversial._members(active, bucketed=True)
    assert len(padded) == 8
    assert padded[:5].tolist() == [1, 2, 5, 7, 10]
    assert not active[padded[5:]].any() and len(set(padded.tolist())) == 8
    # All active: the whole batch (12, not 16); one active: 1; none: nothing left to run.
    assert len(controversial._members(torch.ones(12, dtype=torch.bool), bucketed=True)) == 12
    one = torch.zeros(12, dtype=torch.bool)
    one[4] = True
    assert controversial._members(one, bucketed=True).tolist() == [4]
    assert len(controversial._members(torch.zeros(12, dtype=torch.bool), bucketed=True)) == 0


def small_cnn(name: str, seed: int) -> CandidateModel:
    """A random-weight convolutional network on 1 x 8 x 8 images with four classes."""
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(6, 6, 3, stride=2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(6 * 3 * 3, 4),
    )
    return CandidateModel(net, ("a", "b", "c", "d"), name=name, input_shape=(1, 8, 8))


@pytest.mark.parametrize("interval", [3, 10])
def test_the_result_does_not_depend_on_how_often_the_active_stimuli_are_gathered(
    monkeypatch, interval
):
    pair = small_cnn("one", 1), small_cnn("two", 2)
    settings = SynthesisSettings(window=5, max_steps=60, max_attempts=2, learning_rate=0.1)
    with torch_threads(1):
        every_step = synthesize_controversial(*pair, settings=settings, progress=False)
        monkeypatch.setattr(controversial, "_gather_interval", lambda device: interval)
        sparse = synthesize_controversial(*pair, settings=settings, progress=False)
    n = len(every_step.class_1)
    # Stimuli converged at different steps (some before the phase's end), so masking mattered ...
    assert every_step.image_steps < n * every_step.optimiser_steps
    # ... and the gathered runs ran converged stimuli along without changing anything.
    assert sparse.optimiser_steps >= every_step.optimiser_steps
    assert sparse.image_steps == every_step.image_steps
    np.testing.assert_array_equal(sparse.attempts, every_step.attempts)
    np.testing.assert_allclose(sparse.images, every_step.images, atol=1e-6)
    np.testing.assert_allclose(sparse.controversiality, every_step.controversiality, atol=1e-6)


def test_graphed_forward_is_the_plain_call_on_the_cpu():
    model = small_cnn("one", 1)
    x = torch.rand(5, 1, 8, 8, requires_grad=True)
    forward = GraphedForward(model, torch.device("cpu"), "bfloat16")
    assert not forward.use_graphs
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
    torch.testing.assert_close(forward(x), expected, rtol=0, atol=0)
