"""The planning and allocation report sections, and the random share's rating rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.io.export import read_export
from humanlike.analysis.planning.recovery import PlanInputs, plan_study
from humanlike.analysis.planning.report import (
    allocation_section,
    plan_section,
    random_share_ratings,
)


def test_plan_section_has_the_recovery_matrix_power_curves_and_recommendation():
    rng = np.random.default_rng(0)
    y = rng.uniform(0.01, 0.99, (3, 12, 4))
    inputs = PlanInputs(y, ("m0", "m1", "m2"), tuple(f"s{i}" for i in range(12)),
                        ("natural",) * 12, 8, 0.2)
    plan = plan_study(inputs, [3, 6], 4, n_resamples=200, seed=1, rule="winner")
    section = plan_section(plan)
    assert len(section.figures) == 2 and "<svg" in section.figures[0].svg
    assert f"Recommended N: {plan.recommended_n()}." in section.paragraphs[0] or (
        plan.recommended_n() is None and "No N" in section.paragraphs[0])
    assert len(section.tables[0].frame) == 6  # 3 generators x 2 N


def _participants() -> pd.DataFrame:
    return pd.DataFrame({
        "participant": ["p1", "p2", "p3"], "status": ["completed"] * 3,
        "adaptive_design_version": [0, 1, 1], "adaptive_random": ["a;b", "c;d", "a;c"],
        "adaptive_weighted": ["c;d;e", "a;e;f", "e;f;g"]})


def test_allocation_section_states_the_adaptive_draw(tmp_path):
    _participants().to_csv(tmp_path / "participants.csv", index=False)
    section = allocation_section(read_export(tmp_path))
    text = section.paragraphs[0]
    assert "adaptively" in text and "for 3 participants, 5 stimuli each" in text
    assert "A median of 2 of each participant's stimuli form the equal-probability subset" in text
    assert "1 weight versions; 1 participants arrived before the first" in text
    assert section.tables[0].frame["participants"].tolist() == [1, 2]
    pd.DataFrame({"participant": ["p1"], "status": ["completed"]}).to_csv(
        tmp_path / "participants.csv", index=False)
    assert "uniformly at random" in allocation_section(read_export(tmp_path)).paragraphs[0]


def test_random_share_ratings_keeps_each_participants_uniform_draw():
    ratings = pd.DataFrame({"participant": ["p1"] * 3 + ["p2"] * 2 + ["p9"],
                            "stimulus": ["a", "c", "b", "d", "a", "z"], "rating": range(6)})
    people = pd.concat([_participants(), pd.DataFrame({"participant": ["p9"]})])
    kept = random_share_ratings(ratings, people)
    assert list(zip(kept["participant"], kept["stimulus"])) == [
        ("p1", "a"), ("p1", "b"), ("p2", "d"), ("p9", "z")]
    # an adaptive participant whose equal-probability subset is empty (blank in the export)
    # contributes nothing, unlike a participant allocated without [adaptive] (p9)
    people.loc[people["participant"] == "p2", "adaptive_random"] = np.nan
    kept = random_share_ratings(ratings, people)
    assert list(zip(kept["participant"], kept["stimulus"])) == [
        ("p1", "a"), ("p1", "b"), ("p9", "z")]


def test_floor_design_is_a_lower_bound_on_every_design_the_draw_could_have_used(tmp_path):
    # pool of 10, 5 drawn each: a version-0 draw is uniform (5/10 everywhere); a weighted draw
    # keeps at least random_share * 5/10 = 0.125 on every stimulus, whatever its weights
    from humanlike.analysis.planning.design import inclusion_probabilities
    from humanlike.analysis.planning.report import floor_design

    pd.DataFrame({"participant": ["p1", "p2"], "status": ["completed"] * 2,
                  "adaptive_design_version": [0, 3]}).to_csv(tmp_path / "participants.csv",
                                                             index=False)
    weighted = inclusion_probabilities(np.r_[np.zeros(5), np.ones(5)], 5, 0.25)
    pi = np.full((2, 10), np.nan)
    pi[0, :5] = 0.5
    drawn = np.argsort(-weighted)[:5]
    pi[1, drawn] = weighted[drawn]
    floor = floor_design(read_export(tmp_path), ("p1", "p2"), pi, 10, 0.25)
    np.testing.assert_allclose(floor, [[0.5] * 10, [0.125] * 10])
    assert np.all(weighted >= floor[1] - 1e-12)
    assert weighted.min() == pytest.approx(0.125)  # attained where a stimulus has weight 0
