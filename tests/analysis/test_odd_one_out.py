"""Odd-one-out alignment (Brain-Score hebart2023): accuracy, noise ceiling and score against closed
forms on synthetic triplets, model choices from embeddings, bootstrap intervals and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.alignment.odd_one_out import (
    answer_choices,
    embedding_choices,
    odd_one_out_score,
    triplet_counts,
)


def _counts(t: int) -> tuple[np.ndarray, np.ndarray]:
    """``t`` triplets, 5 responses each split 3 / 1 / 1; the model picks the majority's item on
    the first half and a minority item on the second."""
    counts = np.tile([3, 1, 1], (t, 1))
    choice = np.where(np.arange(t) < t // 2, 0, 1)
    return counts, choice


def test_score_equals_the_closed_form_on_a_synthetic_design():
    counts, choice = _counts(400)
    result = odd_one_out_score(counts, choice, n_resamples=2000, random_state=0)
    # ceiling: every triplet's majority share 3/5; accuracy: (3 + 1) / 2 of 5 per triplet = 0.4
    assert result.ceiling == pytest.approx(0.6)
    assert result.accuracy == pytest.approx(0.4)
    assert result.score == pytest.approx((0.4 - 1 / 3) / (0.6 - 1 / 3))  # = 0.25
    assert result.score == pytest.approx(0.25)
    assert (result.n_triplets, result.n_responses, result.n_repeated) == (400, 2000, 400)
    # resampling triplets: hits are 3 or 1 (variance 1), so SE(acc) = sqrt(1 / T) / 5 = 0.01
    se = result.bootstrap_distribution["accuracy"].std()
    assert se == pytest.approx(0.01, rel=0.1)
    assert result.ci["accuracy"].low < 0.4 < result.ci["accuracy"].high
    assert result.ci["accuracy"].high - result.ci["accuracy"].low == pytest.approx(2 * 1.96 * 0.01, rel=0.15)
    # the ceiling is the same in every resample (every triplet 3/5): a degenerate interval
    assert tuple(result.ci["ceiling"]) == pytest.approx((0.6, 0.6))


def test_a_model_that_always_picks_the_majority_scores_one_and_chance_scores_zero():
    counts = np.array([[4, 1, 0], [0, 3, 2], [1, 1, 3], [2, 0, 0]])  # the last: one responder pair
    majority = counts.argmax(axis=1)
    best = odd_one_out_score(counts, majority, n_resamples=10, random_state=1)
    assert best.ceiling == pytest.approx(np.mean([4 / 5, 3 / 5, 3 / 5, 1.0]))
    assert best.accuracy == pytest.approx((4 + 3 + 3 + 2) / 17)
    # a fixed ceiling (Brain-Score's THINGS constant) replaces the data's own
    fixed = odd_one_out_score(counts, majority, ceiling=0.6767, n_resamples=10, random_state=1)
    assert fixed.score == pytest.approx((12 / 17 - 1 / 3) / (0.6767 - 1 / 3))
    chance = odd_one_out_score(np.ones((6, 3), dtype=int), np.zeros(6, dtype=int), ceiling=0.6,
                               n_resamples=10, random_state=1)
    assert chance.accuracy == pytest.approx(1 / 3) and chance.score == pytest.approx(0.0)


def test_embeddings_choose_the_item_outside_the_most_similar_pair():
    emb = pd.DataFrame({"x": [1.0, 0.9, 0.0, 0.1], "y": [0.0, 0.1, 1.0, 0.9]},
                       index=["cat", "lion", "car", "bus"])
    triplets = np.array([["car", "cat", "lion"], ["bus", "car", "cat"], ["bus", "cat", "lion"]])
    assert embedding_choices(triplets, emb).tolist() == [0, 2, 0]
    as_dict = {k: v.to_numpy() for k, v in emb.iterrows()}
    assert embedding_choices(triplets, as_dict).tolist() == [0, 2, 0]
    with pytest.raises(ValueError, match=r"embeddings lack the item\(s\) \['dog'\]"):
        embedding_choices(np.array([["cat", "dog", "lion"]]), emb)


def _export(rows: list[tuple[str, str, str, str]], **extra) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["image_1", "image_2", "image_3", "odd_one_out"])
    for name, values in extra.items():
        frame[name] = values
    return frame


def test_counts_from_the_export_leave_out_practice_and_repeats():
    trials = _export([("a", "b", "c", "c"), ("a", "b", "c", "c"), ("a", "b", "c", "a"),
                      ("b", "c", "d", "b"), ("a", "b", "c", "b"), ("a", "b", "c", "b")],
                     practice=[False, False, False, False, True, False],
                     is_repeat=[False, False, False, False, False, True])
    counts = triplet_counts(trials)
    assert counts.triplets.tolist() == [["a", "b", "c"], ["b", "c", "d"]]
    assert counts.counts.tolist() == [[1, 0, 2], [1, 0, 0]]
    model = _export([("a", "b", "c", "c"), ("b", "c", "d", "d")])
    choice = answer_choices(counts.triplets, model)
    assert choice.tolist() == [2, 2]
    result = odd_one_out_score(counts.counts, choice, n_resamples=5, random_state=0)
    assert result.accuracy == pytest.approx(2 / 4) and result.ceiling == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match=r"the model answered no odd one out for triplet\(s\) "
                                         r"\[\['b', 'c', 'd'\]\]"):
        answer_choices(counts.triplets, model.iloc[:1])
    with pytest.raises(ValueError, match="one answer per triplet"):
        answer_choices(counts.triplets, pd.concat([model, model]))


@pytest.mark.parametrize(("counts", "choice", "message"), [
    (np.array([[1, 0]]), [0], r"counts must be a \(triplets, 3\) array"),
    (np.array([[1.5, 0, 0]]), [0], r"non-negative integers"),
    (np.array([[1, 0, 0]]), [3], r"model_choice must hold one position 0, 1 or 2 per triplet"),
    (np.array([[0, 0, 0]]), [0], r"no responses"),
    (np.array([[1, 0, 0], [0, 1, 0]]), [0, 1], r"no triplet was answered by two or more people"),
])
def test_bad_input_names_what_is_wrong(counts, choice, message):
    with pytest.raises(ValueError, match=message):
        odd_one_out_score(counts, np.asarray(choice), n_resamples=5)


def test_an_odd_one_out_outside_its_triplet_is_refused():
    with pytest.raises(ValueError, match=r"odd_one_out must be one of image_1..3; row 0 chose 'z'"):
        triplet_counts(_export([("a", "b", "c", "z")]))
    with pytest.raises(ValueError, match=r"lack column\(s\) \['odd_one_out'\]"):
        triplet_counts(pd.DataFrame({"image_1": ["a"], "image_2": ["b"], "image_3": ["c"]}))
