"""Loading, cleaning and participant QC of rating data (tidy export format)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.ratings.data import (
    ExclusionRules,
    clean_ratings,
    load_ratings,
    participant_qc,
    rating_array,
    validate_ratings,
)

CATEGORIES = ["0", "1", "2"]


def _trial(participant, index, stimulus, kind, ratings, rt=1500.0, repeat=False, true_class=None):
    return [
        {
            "participant": participant,
            "trial_index": index,
            "stimulus": stimulus,
            "stimulus_kind": kind,
            "is_repeat": repeat,
            "rt_ms": rt,
            "category": category,
            "rating": rating,
            "true_class": true_class,
        }
        for category, rating in zip(CATEGORIES, ratings)
    ]


@pytest.fixture
def frame() -> pd.DataFrame:
    """p1: careful. p2: wrong on natural images, all zeros, fast. p3: one too-fast trial."""
    rows = []
    rows += _trial("p1", 0, "nat_a", "natural", [1, 0, 0], true_class="0")
    rows += _trial("p1", 1, "nat_b", "natural", [0, 0.75, 0.25], true_class="1")
    rows += _trial("p1", 2, "con_x", "controversial", [0.5, 0.5, 0])
    rows += _trial("p1", 3, "catch_c", "catch", [0, 0, 1], true_class="2")
    rows += _trial("p1", 4, "nat_a", "natural", [1, 0.25, 0], repeat=True, true_class="0")
    rows += _trial("p1", 5, "nat_b", "natural", [0, 1, 0], repeat=True, true_class="1")
    rows += _trial("p2", 0, "nat_a", "natural", [0, 0, 0], rt=300, true_class="0")
    rows += _trial("p2", 1, "nat_b", "natural", [1, 0, 0], rt=300, true_class="1")
    rows += _trial("p2", 2, "con_x", "controversial", [0, 0, 0], rt=300)
    rows += _trial("p2", 3, "catch_c", "catch", [1, 0, 0], rt=300, true_class="2")
    rows += _trial("p2", 4, "nat_a", "natural", [0, 1, 0], rt=300, repeat=True, true_class="0")
    rows += _trial("p2", 5, "nat_b", "natural", [0, 0, 1], rt=300, repeat=True, true_class="1")
    rows += _trial("p3", 0, "nat_a", "natural", [1, 0, 0], rt=50, true_class="0")
    rows += _trial("p3", 1, "nat_b", "natural", [0, 1, 0], true_class="1")
    rows += _trial("p3", 2, "con_x", "controversial", [0.25, 0.75, 0])
    return pd.DataFrame(rows)


def test_trials_faster_than_the_threshold_become_missing(frame):
    cleaned = clean_ratings(frame, min_trial_rt_ms=100)
    fast = cleaned["participant"].eq("p3") & cleaned["stimulus"].eq("nat_a")
    assert cleaned.loc[fast, "rating"].isna().all()
    assert cleaned.loc[~fast, "rating"].notna().all()
    assert cleaned["too_fast"].sum() == 3


def test_rating_array_holds_first_presentations_with_nan_where_unrated(frame):
    ratings = rating_array(clean_ratings(frame))
    assert ratings.shape == (3, 3, 3)
    assert ratings.stimuli == ("nat_a", "nat_b", "con_x")  # natural first, catch left out
    assert ratings.kinds == ("natural", "natural", "controversial")
    assert ratings.subset("controversial").stimuli == ("con_x",)
    np.testing.assert_array_equal(ratings.values[0, 1], [0, 0.75, 0.25])  # not the repeat
    assert np.isnan(ratings.values[2, 0]).all()  # p3's too-fast trial


def test_qc_reports_accuracy_rt_reliability_and_zero_share(frame):
    qc = participant_qc(clean_ratings(frame)).set_index("participant")
    assert qc.loc["p1", "natural_accuracy"] == 1.0  # four natural trials, all correct
    assert qc.loc["p2", "natural_accuracy"] == 0.0
    assert qc.loc["p1", "catch_accuracy"] == 1.0 and qc.loc["p2", "catch_accuracy"] == 0.0
    assert qc.loc["p2", "all_zero_share"] == 0.25  # one all-zero trial of four natural
    assert qc.loc["p2", "median_rt_ms"] == 300.0
    # p1 first vs repeat over 2 stimuli x 3 categories.
    first, repeat = [1, 0, 0, 0, 0.75, 0.25], [1, 0.25, 0, 0, 1, 0]
    assert qc.loc["p1", "repeat_r"] == pytest.approx(np.corrcoef(first, repeat)[0, 1])
    assert qc.loc["p1", "repeat_n"] == 6
    assert np.isnan(qc.loc["p3", "repeat_r"]) and qc.loc["p3", "repeat_n"] == 0
    assert qc.loc["p3", "natural_accuracy"] == 1.0  # the too-fast trial does not count


def test_every_exclusion_carries_its_reason(frame):
    rules = {
        "min_natural_accuracy": 0.5,
        "max_all_zero_share": 0.2,
        "min_median_rt_ms": 500,
        "min_repeat_reliability": 0.0,
    }
    qc = participant_qc(clean_ratings(frame), rules=rules).set_index("participant")
    assert not qc.loc["p1", "excluded"] and qc.loc["p1", "exclusion_reasons"] == ""
    reasons = qc.loc["p2", "exclusion_reasons"].split(";")
    assert [r.split()[0] for r in reasons] == [
        "natural_accuracy",
        "repeat_r",
        "all_zero_share",
        "median_rt_ms",
    ]
    assert "0 < 0.5" in reasons[0]
    assert not qc.loc["p3", "excluded"]  # NaN repeat reliability does not exclude


def test_exclusions_already_in_the_export_are_kept(frame):
    participants = pd.DataFrame(
        {
            "participant": ["p1", "p2", "p3"],
            "excluded": [False, True, False],
            "exclusion_reasons": ["", "returned", ""],
            "duration_s": [600, 100, 700],
        }
    )
    qc = participant_qc(clean_ratings(frame), participants).set_index("participant")
    assert qc["excluded"].tolist() == [False, True, False]
    assert qc.loc["p2", "exclusion_reasons"] == "export: returned"
    assert qc.loc["p3", "completion_s"] == 700
    kept = participant_qc(clean_ratings(frame), participants, respect_export_exclusions=False)
    assert not kept["excluded"].any()


def test_rules_come_from_a_plain_mapping_and_unknown_keys_are_rejected():
    rules = ExclusionRules.from_mapping({"min_natural_accuracy": "0.8", "min_trial_rt_ms": None})
    assert rules.min_natural_accuracy == 0.8 and rules.min_trial_rt_ms is None
    with pytest.raises(ValueError, match="min_acuracy"):
        ExclusionRules.from_mapping({"min_acuracy": 0.8})
    with pytest.raises(ValueError, match="max_median_rt_ms"):
        ExclusionRules.from_mapping({"max_median_rt_ms": "slow"})


def test_bad_input_names_the_column(frame):
    with pytest.raises(ValueError, match="'category'"):
        validate_ratings(frame.drop(columns="category"))
    with pytest.raises(ValueError, match="'rating' must lie in"):
        validate_ratings(frame.assign(rating=2.0))
    with pytest.raises(ValueError, match="'is_repeat'"):
        validate_ratings(frame.assign(is_repeat="maybe"))
    with pytest.raises(ValueError, match="duplicate"):
        validate_ratings(pd.concat([frame, frame.iloc[:1]]))


def test_export_folder_joins_stimulus_metadata(tmp_path, frame):
    ratings = frame.drop(columns="true_class")
    ratings["is_repeat"] = ratings["is_repeat"].map({True: "True", False: "False"})
    ratings.to_csv(tmp_path / "ratings.csv", index=False)
    pd.DataFrame(
        {
            "stimulus": ["nat_a", "nat_b", "con_x", "catch_c"],
            "kind": ["natural", "natural", "controversial", "catch"],
            "true_class": [0, 1, None, 2],
            "targeted_model_1": [None, None, "m1", None],
            "targeted_model_2": [None, None, "m0", None],
        }
    ).to_csv(tmp_path / "stimuli.csv", index=False)
    loaded = load_ratings(tmp_path)
    assert loaded["is_repeat"].dtype == bool
    assert set(loaded.loc[loaded["stimulus"] == "nat_b", "true_class"]) == {"1"}
    assert rating_array(loaded).strata == ("natural", "natural", "m0 vs m1")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no ratings.csv"):
        load_ratings(tmp_path / "empty")


def test_missing_stimulus_kinds_are_inferred_from_the_targeted_models():
    frame = pd.DataFrame(
        {
            "participant": "a",
            "stimulus": ["x", "y", "z"],
            "category": "0",
            "rating": [0.5, 1.0, 0.0],
            "targeted_model_1": [None, "m1", None],
            "stimulus_kind": [None, None, "catch"],
        }
    )
    assert validate_ratings(frame)["stimulus_kind"].tolist() == [
        "natural",
        "controversial",
        "catch",
    ]
