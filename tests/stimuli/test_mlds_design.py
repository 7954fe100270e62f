"""MLDS trial designs: every triad once, random left/right, repeats, quadruples."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humanlike.stimuli.mlds_design import (
    all_quadruples,
    all_triads,
    quadruple_design,
    triad_design,
)


def test_seven_levels_give_the_35_triads_each_once():
    design = triad_design(7, rng=0)
    assert len(design) == 35 == comb(7, 3)
    assert list(design.columns) == ["s1", "s2", "s3", "swapped", "repeat"]
    assert not design.duplicated(["s1", "s2", "s3"]).any()
    assert ((design.s1 < design.s2) & (design.s2 < design.s3)).all()


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 12), seed=st.integers(0, 2**32 - 1), reps=st.integers(1, 3))
def test_each_replication_presents_every_triad_once_in_its_own_order(n, seed, reps):
    design = triad_design(n, replications=reps, rng=seed)
    assert len(design) == reps * comb(n, 3)
    counts = design.groupby(["s1", "s2", "s3"]).size()
    assert len(counts) == comb(n, 3) and (counts == reps).all()
    assert design["s1"].between(1, n).all() and design["s3"].between(1, n).all()


def test_left_right_placement_is_random_and_balanced():
    design = triad_design(12, replications=10, rng=1)  # 2200 trials
    assert design["swapped"].mean() == pytest.approx(0.5, abs=0.04)


def test_repeats_come_last_and_repeat_earlier_triads():
    design = triad_design(7, repeats=6, rng=2)
    assert len(design) == 41
    assert design["repeat"].tolist() == [0] * 35 + [1] * 6
    first = set(map(tuple, design.loc[design.repeat == 0, ["s1", "s2", "s3"]].to_numpy()))
    again = list(map(tuple, design.loc[design.repeat == 1, ["s1", "s2", "s3"]].to_numpy()))
    assert set(again) <= first and len(set(again)) == 6


def test_subset_draws_distinct_triads_or_takes_the_given_ones():
    design = triad_design(7, subset=10, rng=3)
    assert len(design) == 10 and not design.duplicated(["s1", "s2", "s3"]).any()
    given_triads = [(1, 2, 3), (2, 5, 7)]
    chosen = triad_design(7, subset=given_triads, rng=3)
    assert set(map(tuple, chosen[["s1", "s2", "s3"]].to_numpy())) == set(given_triads)


def test_the_same_seed_gives_the_same_design():
    a, b = triad_design(7, repeats=3, rng=42), triad_design(7, repeats=3, rng=42)
    assert a.equals(b)
    assert not a.equals(triad_design(7, repeats=3, rng=43))


def test_quadruples_are_the_non_overlapping_ordered_four_tuples():
    quads = all_quadruples(7)
    assert len(quads) == comb(7, 4) == 35
    assert (np.diff(quads, axis=1) > 0).all()
    design = quadruple_design(11, rng=0)
    assert len(design) == 330  # the size of each kk run (Knoblauch & Maloney 2008)
    assert list(design.columns) == ["s1", "s2", "s3", "s4", "swapped", "repeat"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"subset": 0}, "subset"),
        ({"subset": 36}, "subset"),
        ({"subset": [(3, 2, 1)]}, "increasing"),
        ({"subset": [(1, 2, 9)]}, "increasing"),
        ({"repeats": 36}, "repeats"),
        ({"replications": 0}, "replications"),
    ],
)
def test_bad_design_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        triad_design(7, rng=0, **kwargs)


def test_too_few_levels_are_refused():
    with pytest.raises(ValueError, match="at least 3"):
        all_triads(2)
