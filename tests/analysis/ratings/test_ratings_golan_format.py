"""The published Golan et al. (2020) long format gives the same analysis as our tidy export."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.io.golan import golan_models_to_tidy, golan_to_tidy
from humanlike.analysis.ratings.analysis import analyze_ratings
from humanlike.analysis.ratings.data import load_ratings
from humanlike.analysis.ratings.scores import load_model_responses
from humanlike.analysis.ratings.simulation import simulate_rating_experiment


@pytest.fixture(scope="module")
def experiment():
    return simulate_rating_experiment(
        n_participants=6,
        n_natural=6,
        n_per_pair=2,
        n_models=3,
        n_categories=4,
        missing=0.1,
        random_state=40,
    )


def _as_golan(frame: pd.DataFrame) -> pd.DataFrame:
    """Our tidy rows written in the column layout of the published CSVs."""
    return pd.DataFrame(
        {
            "subject code": frame["participant"],
            "image": frame["stimulus"],
            "image_repetition": frame["is_repeat"].astype(int),
            "response_category": frame["category"].astype(int),
            "targeted_model_1": frame["targeted_model_1"],
            "targeted_model_2": frame["targeted_model_2"],
            "targeted_class_1": pd.to_numeric(frame["targeted_class_1"]),
            "targeted_class_2": pd.to_numeric(frame["targeted_class_2"]),
            "category_rating": frame["rating"],
            "rt": frame["rt_ms"],
            "trial": frame["trial_index"],
        }
    )


def test_golan_and_tidy_inputs_give_identical_results(experiment, tmp_path):
    golan_csv = tmp_path / "human_responses.csv"
    _as_golan(experiment.ratings).to_csv(golan_csv, index=False)
    from_golan = load_ratings(golan_csv)
    tidy = experiment.ratings
    options = {"n_resamples": 200, "random_state": 3, "rules": {"min_natural_accuracy": 0.3}}
    a = analyze_ratings(tidy, experiment.models, **options)
    b = analyze_ratings(from_golan, experiment.models, **options)
    np.testing.assert_array_equal(a.ratings.values, b.ratings.values)
    assert a.ratings.strata == b.ratings.strata
    for name, table in a.tables().items():
        pd.testing.assert_frame_equal(table, b.tables()[name], check_dtype=False, obj=name)


def test_golan_reader_derives_kind_true_class_repeats_and_categories(experiment):
    tidy = golan_to_tidy(_as_golan(experiment.ratings))
    natural = tidy[tidy["stimulus"].str.startswith("natural/")]
    assert set(natural["stimulus_kind"]) == {"natural"}
    expected = natural["stimulus"].str.rsplit("_", n=1).str[-1]
    assert (natural["true_class"] == expected).all()
    controversial = tidy[tidy["stimulus"].str.startswith("controversial/")]
    assert set(controversial["stimulus_kind"]) == {"controversial"}
    assert controversial["true_class"].isna().all()
    assert tidy["is_repeat"].dtype == bool and tidy["is_repeat"].sum() > 0
    assert set(tidy["category"]) == {"0", "1", "2", "3"}
    assert set(tidy["targeted_class_1"].dropna()) <= {"0", "1", "2", "3"}


def test_golan_model_csv_becomes_the_model_responses_frame(experiment, tmp_path):
    models = experiment.models
    path = tmp_path / "model_responses.csv"
    pd.DataFrame(
        {
            "model": models["model"],
            "image": models["stimulus"],
            "response_category": models["category"].astype(int),
            "category_rating": models["probability"],
        }
    ).to_csv(path, index=False)
    loaded = load_model_responses(path)
    assert list(loaded.columns) == ["model", "stimulus", "category", "probability"]
    np.testing.assert_allclose(loaded["probability"], models["probability"])
    assert golan_models_to_tidy(pd.read_csv(path))["category"].iloc[0] == "0"


def test_missing_golan_columns_are_named():
    with pytest.raises(ValueError, match="image_repetition"):
        golan_to_tidy(
            pd.DataFrame(columns=["subject code", "image", "response_category", "category_rating"])
        )
