"""Reliability of ratings: repeated-trial r per participant and group split-half (Spearman-Brown)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.ratings.reliability import (
    repeat_reliability,
    spearman_brown,
    split_half_reliability,
)


def test_repeat_reliability_is_numpy_corrcoef_over_stimuli_and_categories_with_its_n():
    rng = np.random.default_rng(30)
    rows = []
    expected = {}
    for person in ("a", "b"):
        first = rng.choice([0, 0.25, 0.5, 0.75, 1.0], size=(5, 3))
        again = np.clip(first + rng.choice([-0.25, 0, 0.25], size=first.shape), 0, 1)
        again[0, 0] = np.nan  # an unanswered category drops one pair
        seen = np.isfinite(again)
        expected[person] = (np.corrcoef(first[seen], again[seen])[0, 1], int(seen.sum()))
        for repeat, values in ((False, first), (True, again)):
            for s in range(5):
                for k in range(3):
                    rows.append((person, f"s{s}", str(k), values[s, k], repeat))
    frame = pd.DataFrame(
        rows, columns=["participant", "stimulus", "category", "rating", "is_repeat"]
    )
    table = repeat_reliability(frame)
    for person, (r, n) in expected.items():
        assert table.loc[person, "r"] == pytest.approx(r, abs=1e-12)
        assert table.loc[person, "n"] == n == 14


def test_spearman_brown_doubles_test_length():
    assert spearman_brown(0.5) == pytest.approx(2 / 3)
    assert spearman_brown(0.6, factor=3) == pytest.approx(1.8 / 2.2)


def test_split_half_reliability_matches_classical_test_theory():
    """x_i = t + e_i: a half of P/2 has reliability s_t^2 / (s_t^2 + s^2 / (P/2)), the whole group
    (Spearman-Brown corrected) s_t^2 / (s_t^2 + s^2 / P)."""
    rng = np.random.default_rng(31)
    n_people, var_t, noise = 16, 1.0, 4.0
    t = rng.normal(size=4000) * np.sqrt(var_t)
    x = t + rng.normal(size=(n_people, 4000)) * np.sqrt(noise)
    x[rng.random(x.shape) < 0.1] = np.nan
    result = split_half_reliability(x, n_splits=200, random_state=0)
    var_emp = t.var()
    half = var_emp / (var_emp + noise / (n_people / 2) / 0.9)  # 10% missing: ~0.9 P/2 raters
    whole = var_emp / (var_emp + noise / n_people / 0.9)
    assert result.r_half == pytest.approx(half, abs=0.01)
    assert result.spearman_brown == pytest.approx(whole, abs=0.01)
    assert result.split_r.shape == (200,)


def test_split_half_needs_two_participants():
    with pytest.raises(ValueError, match="two participants"):
        split_half_reliability(np.ones((1, 4)))
