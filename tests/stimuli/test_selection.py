"""Balanced selection of controversial stimuli: constraints hold, the integer program is optimal
(equal to brute force on small problems) and never worse than the greedy choice."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanlike.stimuli.controversial import all_class_pairs
from humanlike.stimuli.selection import select_balanced, select_greedy


def random_candidates(seed: int, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = all_class_pairs(n_classes)
    scores = np.random.default_rng(seed).uniform(0, 1, len(pairs))
    return pairs[:, 0], pairs[:, 1], scores


def brute_force_best(a: np.ndarray, b: np.ndarray, c: np.ndarray, k: int, per_class: int) -> float:
    """Enumerate every subset of the candidates (2^12 for K = 4) and keep the best balanced one."""
    best = -np.inf
    for mask in itertools.product([0, 1], repeat=len(c)):
        x = np.array(mask, dtype=bool)
        if np.all(np.bincount(a[x], minlength=k) == per_class) and np.all(
            np.bincount(b[x], minlength=k) == per_class
        ):
            best = max(best, c[x].sum())
    return best


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_selection_targets_every_class_exactly_twice_per_model(seed):
    a, b, c = random_candidates(seed, 10)
    chosen = select_balanced(a, b, c, n_classes=10, per_class=2)
    assert len(chosen.index) == 20
    assert len(set(chosen.index)) == 20
    np.testing.assert_array_equal(np.bincount(a[chosen.index], minlength=10), 2)
    np.testing.assert_array_equal(np.bincount(b[chosen.index], minlength=10), 2)
    assert chosen.total == pytest.approx(c[chosen.index].sum())


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_selection_total_is_at_least_the_greedy_total(seed):
    a, b, c = random_candidates(seed, 10)
    assert (
        select_balanced(a, b, c, n_classes=10).total
        >= select_greedy(a, b, c, n_classes=10).total - 1e-9
    )


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_selection_equals_the_brute_force_optimum_on_four_classes(seed):
    a, b, c = random_candidates(seed, 4)
    chosen = select_balanced(a, b, c, n_classes=4, per_class=2)
    assert chosen.total == pytest.approx(brute_force_best(a, b, c, 4, 2))


def test_selection_beats_greedy_when_the_best_single_stimulus_forces_a_poor_cycle():
    # Three classes, one stimulus per class and model: the two 3-cycles are the only balanced sets,
    # (0,1),(1,2),(2,0) with total 1.0 + 0.5 + 0.5 = 2.0 and (0,2),(1,0),(2,1) with 0.9 + 0.45 + 0.9
    # = 2.25. Greedy grabs (0, 1) = 1.0 first and is then forced round the poorer cycle.
    a = np.array([0, 1, 2, 0, 1, 2])
    b = np.array([1, 2, 0, 2, 0, 1])
    c = np.array([1.0, 0.5, 0.5, 0.9, 0.45, 0.9])
    greedy = select_greedy(a, b, c, n_classes=3, per_class=1)
    best = select_balanced(a, b, c, n_classes=3, per_class=1)
    assert greedy.complete and greedy.total == pytest.approx(2.0)
    assert best.total == pytest.approx(2.25)
    np.testing.assert_array_equal(best.index, [3, 4, 5])


def test_selection_without_a_balanced_subset_raises():
    pairs = all_class_pairs(10)
    keep = pairs[:, 0] != 3  # class 3 is never targeted for model 1
    with pytest.raises(ValueError, match="exactly 2 times"):
        select_balanced(pairs[keep, 0], pairs[keep, 1], np.ones(keep.sum()), n_classes=10)


def test_selection_rejects_class_indices_out_of_range():
    with pytest.raises(ValueError, match="class_1"):
        select_balanced(np.array([0, 5]), np.array([1, 0]), np.ones(2), n_classes=3)
