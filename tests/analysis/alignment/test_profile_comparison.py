"""Which model differences the alignment profile decides (paired bootstrap over the shared
resamples, Holm over pairs) and the metrics' rank agreement, on simulated observers whose answer
is known: a model that copies the humans' latent decision, the same model twice, and a model right
as often but independently of the humans."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.alignment import alignment_profile
from humanlike.analysis.alignment.comparison import compare_models, compare_profile, profile_cells


def simulated(seed: int = 0, n_images: int = 300, n_humans: int = 8) -> pd.DataFrame:
    """Observers right when ``d_i + noise > 0`` (d_i: the image's ease, shared); 'copy' and
    'twin' have the same small noise draw, 'coin' is right as often but independently."""
    rng = np.random.default_rng(seed)
    ease = rng.normal(0.8, 1.0, n_images)
    rows = [(f"h{i}", "human", ease + rng.normal(0, 0.6, n_images) > 0) for i in range(n_humans)]
    copy = ease + rng.normal(0, 0.3, n_images) > 0
    coin = rng.random(n_images) < copy.mean()
    rows += [("copy", "model", copy), ("twin", "model", copy.copy()), ("coin", "model", coin)]
    return pd.concat([pd.DataFrame({"observer": name, "group": group,
                                    "stimulus": np.arange(n_images), "correct": correct})
                      for name, group, correct in rows], ignore_index=True)


@pytest.fixture(scope="module")
def profile():
    return alignment_profile(simulated(), edges=None, n_resamples=400, random_state=3)


def _row(decided: pd.DataFrame, metric: str, a: str, b: str) -> pd.Series:
    rows = decided[(decided["metric"] == metric) & (decided["a"] == a) & (decided["b"] == b)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_a_copy_of_the_humans_decision_beats_an_independent_coin_on_error_consistency(profile):
    decided = compare_models(profile)
    row = _row(decided, "error_consistency", "coin", "copy")
    assert row["difference"] < 0 and row["ci_high"] < 0
    assert row["decided"] and row["more_humanlike"] == "copy"
    # the same trials under two names: no difference on any resample, never decided
    twins = decided[(decided["a"] == "copy") & (decided["b"] == "twin")]
    assert len(twins) == 5  # every compared metric of a study without cue-conflict images
    assert (twins["difference"] == 0).all() and (twins["p_value"] == 1).all()
    assert not twins["decided"].any() and (twins["more_humanlike"] == "").all()


def test_each_p_value_is_the_percentile_test_of_the_paired_differences_holm_corrected(profile):
    """Davison & Hinkley's two-sided percentile test on the row-by-row differences, then Holm's
    step-down over the three model pairs, both written out here."""
    decided = compare_models(profile)
    t = profile.table
    part = decided[decided["metric"] == "observed_consistency"].reset_index(drop=True)
    expected = []
    for row in part.itertuples():
        index = [t.index[(t["metric"] == "observed_consistency") & (t["observer"] == o)][0]
                 for o in (row.a, row.b)]
        d = profile.bootstrap[index[0]] - profile.bootstrap[index[1]]
        p = min(1.0, 2 * min((np.sum(d <= 0) + 1) / (d.size + 1),
                             (np.sum(d >= 0) + 1) / (d.size + 1)))
        expected.append(p)
    assert part["p_value"].to_numpy() == pytest.approx(expected)
    order = np.argsort(expected)
    k = len(expected)
    holm = np.maximum.accumulate([min(1.0, (k - i) * expected[j]) for i, j in enumerate(order)])
    assert part["p_holm"].to_numpy()[order] == pytest.approx(holm)


def test_accuracy_difference_counts_closeness_to_the_humans_either_side(profile):
    """'coin' and 'copy' are right about equally often: accuracy difference does not decide
    between them, whatever the signs of their differences from the humans."""
    row = _row(compare_models(profile), "accuracy_difference", "coin", "copy")
    t = profile.table.set_index(["metric", "observer"])["estimate"]
    assert row["difference"] == pytest.approx(abs(t["accuracy_difference", "copy"])
                                              - abs(t["accuracy_difference", "coin"]))
    assert not row["decided"]


def test_agreement_is_spearman_and_kendall_across_models_with_a_ci_from_the_resamples(profile):
    comparison = compare_profile(profile)
    agreement = comparison.agreement
    assert set(agreement["n_models"]) == {3}
    row = agreement[(agreement["metric_a"] == "observed_consistency")
                    & (agreement["metric_b"] == "error_consistency")].iloc[0]
    t = profile.table.set_index(["metric", "observer"])["estimate"]
    models = ["coin", "copy", "twin"]
    x = [t["observed_consistency", m] for m in models]
    y = [t["error_consistency", m] for m in models]
    # closed forms on three models with a tie (copy = twin): average ranks; tau-b
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    assert row["spearman"] == pytest.approx(np.corrcoef(rx, ry)[0, 1])
    assert row["spearman"] == pytest.approx(1.0)
    assert row["kendall"] == pytest.approx(1.0)
    assert row["ci_low"] <= row["spearman"] <= row["ci_high"]
    text = comparison.summary()
    assert "copy over coin on error consistency" in text
    cells = profile_cells(profile)["all"]
    assert list(cells.columns) == ["coin", "copy", "twin", "humans", "ceiling"]
    assert cells.loc["accuracy", "copy"].startswith(f"{t['accuracy', 'copy']:.3f} [")


def test_a_bad_alpha_is_refused_and_too_few_resamples_to_decide_are_said(profile):
    with pytest.raises(ValueError, match="alpha must lie in"):
        compare_models(profile, alpha=1.5)
    # 3 pairs: the smallest adjusted p is 3 x 2 / (B + 1), at most 0.05 from B = 119
    assert compare_profile(profile).notes == []
    few = alignment_profile(simulated(n_images=60), edges=None, n_resamples=100, random_state=0)
    [note] = compare_profile(few).notes
    assert "with 100 resamples no difference can be decided" in note
    assert "0.0594 > alpha 0.05; at least 119 resamples" in note
    assert not compare_profile(few).decided["decided"].any()


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    from humanlike.analysis.alignment.comparison import holm

    p = np.array([0.01, 0.04, 0.03, 0.2, 0.005, 0.04])
    assert holm(p) == pytest.approx(multipletests(p, method="holm")[1])
