"""The alignment profile on model-vs-human edge/silhouette/cue-conflict equals hand computations
from Brain-Score's published formulas (accuracy_distance, Hermann2020cueconflict, Kato2026)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.alignment import (
    alignment_profile,
    baseline_correct,
    cue_conflict_shape_image,
    difficulty_regimes,
)
from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.io import read_model_vs_human

MODELS = ("bagnet33", "resnet50", "simclr_resnet50x1")


@pytest.fixture(scope="module")
def mvh() -> pd.DataFrame:
    raw = shared_data_dir() / "model-vs-human" / "raw-data"
    return pd.concat([read_model_vs_human(raw / name)
                      for name in ("edge", "silhouette", "cue-conflict")], ignore_index=True)


@pytest.fixture(scope="module")
def profile(mvh):
    base = baseline_correct(mvh[(mvh["experiment"] == "silhouette") & (mvh["group"] == "model")])
    return alignment_profile(
        mvh, baselines={"edge": (base, str), "cue-conflict": (base, cue_conflict_shape_image)},
        n_resamples=50, random_state=1)


def estimate(profile, experiment, metric, observer, regime="all") -> float:
    t = profile.table
    row = t[(t["experiment"] == experiment) & (t["metric"] == metric)
            & (t["observer"] == observer) & (t["regime"] == regime)]
    assert len(row) == 1
    return float(row["estimate"].iloc[0])


def correctness(mvh, experiment) -> pd.DataFrame:
    """Images x observers 0/1 correctness of one experiment (plain pandas)."""
    rows = mvh[mvh["experiment"] == experiment]
    return rows.pivot(index="stimulus", columns="observer", values="correct").astype(float)


def hand_kappa(a: pd.Series, b: pd.Series) -> float:
    """Cohen's kappa from Geirhos et al. 2020 eqs. 1-3, written out."""
    p_a, p_b = a.mean(), b.mean()
    c_exp = p_a * p_b + (1 - p_a) * (1 - p_b)
    c_obs = (a == b).mean()
    return (c_obs - c_exp) / (1 - c_exp)


def humans(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c.startswith("subject-")]


@pytest.mark.parametrize("experiment", ["edge", "silhouette", "cue-conflict"])
def test_accuracy_distance_and_its_leave_one_out_ceiling_equal_brain_scores_formula(
        mvh, profile, experiment):
    table = correctness(mvh, experiment)
    people = humans(table)

    def distance(source, target):  # Brain-Score AccuracyDistance.distance_measure, chance 0
        return 1 - abs(source - target) / max(1 - target, target - 0.0)

    for model in MODELS:
        expected = np.mean([distance(table[model].mean(), table[h].mean()) for h in people])
        assert estimate(profile, experiment, "accuracy_distance", model) == pytest.approx(
            expected, abs=1e-6)
    ceiling = np.mean([distance(table[h].mean(),
                                table[[o for o in people if o != h]].to_numpy().mean())
                       for h in people])
    assert estimate(profile, experiment, "accuracy_distance", "ceiling") == pytest.approx(
        ceiling, abs=1e-6)


def test_shape_bias_and_shape_match_equal_hermann2020_on_cue_conflict(mvh, profile):
    rows = mvh[mvh["experiment"] == "cue-conflict"].copy()
    parts = rows["stimulus"].str.extract(r"^([a-z]+)\d+-([a-z]+)\d+\.png$")
    rows["shape"], rows["texture"] = parts[0], parts[1]
    rows = rows[rows["shape"] != rows["texture"]]  # Brain-Score drops non-conflict images
    for observer, trials in rows.groupby("observer"):
        shape = (trials["response"] == trials["shape"]).mean()
        texture = (trials["response"] == trials["texture"]).mean()
        if observer in MODELS:
            assert estimate(profile, "cue-conflict", "shape_match", observer) == pytest.approx(
                shape, abs=1e-6)
            assert estimate(profile, "cue-conflict", "shape_bias", observer) == pytest.approx(
                shape / (shape + texture), abs=1e-6)
    per_human = [((t["response"] == t["shape"]).mean(), (t["response"] == t["texture"]).mean())
                 for o, t in rows.groupby("observer") if o.startswith("subject-")]
    assert estimate(profile, "cue-conflict", "shape_bias", "humans") == pytest.approx(
        np.mean([s / (s + t) for s, t in per_human]), abs=1e-6)


@pytest.mark.parametrize("experiment", ["edge", "cue-conflict"])
def test_conditional_error_consistency_keeps_only_images_the_model_gets_right_at_baseline(
        mvh, profile, experiment):
    table = correctness(mvh, experiment)
    silhouette = correctness(mvh, "silhouette")
    base_name = table.index.to_series()
    if experiment == "cue-conflict":
        base_name = base_name.str.replace(r"-.*\.png$", ".png", regex=True)
    people = humans(table)
    for model in MODELS:
        keep = silhouette[model].reindex(base_name).to_numpy() == 1
        kept = table[keep]
        expected = np.mean([hand_kappa(kept[model], kept[h]) for h in people])
        assert estimate(profile, experiment, "conditional_error_consistency", model) == (
            pytest.approx(expected, abs=1e-6))
    pairs = [hand_kappa(table[a], table[b]) for i, a in enumerate(people) for b in people[i + 1:]]
    assert estimate(profile, experiment, "conditional_error_consistency", "ceiling") == (
        pytest.approx(np.mean(pairs), abs=1e-6))


def test_published_human_ceilings_are_the_conditional_ec_ceilings(profile):
    assert round(estimate(profile, "edge", "conditional_error_consistency", "ceiling"), 5) == 0.31844
    assert round(estimate(profile, "silhouette", "conditional_error_consistency", "ceiling"),
                 5) == 0.47571


def test_each_regime_scores_only_the_images_of_its_human_accuracy_bin(mvh, profile):
    table = correctness(mvh, "cue-conflict")
    people = humans(table)
    human_acc = table[people].mean(axis=1)
    easy = table[(human_acc > 0.75) & (human_acc <= 1.0)]
    expected = np.mean([hand_kappa(easy["resnet50"], easy[h]) for h in people])
    assert estimate(profile, "cue-conflict", "error_consistency", "resnet50",
                    regime="(0.75, 1]") == pytest.approx(expected, abs=1e-6)
    t = profile.table
    assert set(t.loc[t["experiment"] == "cue-conflict", "regime"]) == {
        "all", "[0, 0.25]", "(0.25, 0.5]", "(0.5, 0.75]", "(0.75, 1]"}


def test_every_row_has_an_interval_from_the_same_resamples(profile):
    t = profile.table
    assert profile.bootstrap.shape == (len(t), 50)
    finite = t["estimate"].notna() & t["ci_low"].notna()
    assert (t.loc[finite, "ci_low"] <= t.loc[finite, "ci_high"]).all()
    # accuracy_difference = model accuracy - human accuracy on every resample (shared draws)
    rows = t.reset_index(drop=True)
    sel = lambda m, o: rows.index[(rows["experiment"] == "edge") & (rows["regime"] == "all")  # noqa: E731
                                  & (rows["metric"] == m) & (rows["observer"] == o)][0]
    boot = profile.bootstrap
    np.testing.assert_allclose(boot[sel("accuracy_difference", "resnet50")],
                               boot[sel("accuracy", "resnet50")] - boot[sel("accuracy", "humans")])


def test_difficulty_regimes_put_bin_edges_in_the_lower_bin():
    labels = difficulty_regimes([0.0, 0.25, 0.26, 0.5, 0.75, 0.8, 1.0])
    assert labels.tolist() == ["[0, 0.25]", "[0, 0.25]", "(0.25, 0.5]", "(0.25, 0.5]",
                               "(0.5, 0.75]", "(0.75, 1]", "(0.75, 1]"]
    with pytest.raises(ValueError, match="strictly increasing"):
        difficulty_regimes([0.5], edges=(0.0, 0.5, 0.5, 1.0))


def test_trials_without_models_are_refused_with_the_reason(mvh):
    with pytest.raises(ValueError, match="'human' and 'model'"):
        alignment_profile(mvh[mvh["group"] == "human"], n_resamples=5)


def simulated_study(seed: int, n_images: int = 120, n_humans: int = 6) -> pd.DataFrame:
    """Humans right with p = .8 and one model with p = .6, independently per image."""
    rng = np.random.default_rng(seed)
    rows = [pd.DataFrame({"observer": name, "group": group, "stimulus": np.arange(n_images),
                          "correct": rng.random(n_images) < p})
            for name, group, p in [(f"subject-{i}", "human", 0.8) for i in range(n_humans)]
            + [("model", "model", 0.6)]]
    return pd.concat(rows, ignore_index=True)


def test_accuracy_difference_and_distance_intervals_cover_the_simulated_truth():
    # truth: accuracy difference .6 - .8 = -.2; accuracy distance 1 - .2 / max(.2, .8) = .75
    hits = {"accuracy_difference": 0, "accuracy_distance": 0}
    truth = {"accuracy_difference": -0.2, "accuracy_distance": 0.75}
    for seed in range(40):
        table = alignment_profile(simulated_study(seed), edges=None, n_resamples=200,
                                  random_state=seed).table
        for metric in hits:
            row = table[(table["metric"] == metric) & (table["observer"] == "model")].iloc[0]
            hits[metric] += row["ci_low"] <= truth[metric] <= row["ci_high"]
    assert hits["accuracy_difference"] >= 34, hits  # nominal 38 of 40; 1% binomial tail at 34
    assert hits["accuracy_distance"] >= 34, hits


def test_per_observer_fits_are_each_models_kappa_with_each_human(mvh, profile):
    table = correctness(mvh, "silhouette")
    fits = profile.per_observer
    row = fits[(fits["experiment"] == "silhouette") & (fits["regime"] == "all")
               & (fits["metric"] == "error_consistency") & (fits["model"] == "resnet50")
               & (fits["human"] == "subject-03")]
    assert len(row) == 1
    assert float(row["estimate"].iloc[0]) == pytest.approx(
        hand_kappa(table["resnet50"], table["subject-03"]), abs=1e-6)
    assert float(row["ci_low"].iloc[0]) < float(row["estimate"].iloc[0]) < float(
        row["ci_high"].iloc[0])
    everyone = fits[(fits["experiment"] == "edge") & (fits["regime"] == "all")]
    assert len(everyone) == 4 * 3 * 10  # four metrics, three models, ten humans


def test_bad_arguments_are_refused_naming_what_is_wrong(mvh):
    edge = mvh[mvh["experiment"] == "edge"]
    with pytest.raises(ValueError, match=r"baselines name experiment\(s\) \['contrast'\]"):
        alignment_profile(edge, baselines={"contrast": (pd.Series(dtype=bool), str)},
                          n_resamples=5)
    with pytest.raises(ValueError, match="degenerate must be one of"):
        alignment_profile(edge, degenerate="zero", n_resamples=5)
    with pytest.raises(ValueError, match="chance"):
        alignment_profile(edge, chance=1.5, n_resamples=5)
    assert cue_conflict_shape_image("airplane1-bicycle2.png") == "airplane1.png"
    assert cue_conflict_shape_image("oven10.png") == "oven10.png"


def test_the_metrics_agreement_is_scipys_rank_correlation_on_every_shared_resample(profile):
    """On cue-conflict the three models rank alike on error consistency and shape bias (bagnet33
    < resnet50 < simclr: rho = tau = 1); the CI of rho is the percentile interval of scipy's
    spearmanr over the resamples' model values."""
    from scipy import stats

    from humanlike.analysis.alignment.comparison import metric_agreement

    agreement = metric_agreement(profile)
    row = agreement[(agreement["experiment"] == "cue-conflict")
                    & (agreement["metric_a"] == "error_consistency")
                    & (agreement["metric_b"] == "shape_bias")].iloc[0]
    assert row["n_models"] == 3 and row["spearman"] == 1.0 and row["kendall"] == 1.0
    t = profile.table
    index = {(m, o): i for i, (m, o, e, r) in enumerate(
        t[["metric", "observer", "experiment", "regime"]].itertuples(index=False))
        if e == "cue-conflict" and r == "all"}
    x = profile.bootstrap[[index["error_consistency", m] for m in MODELS]]
    y = profile.bootstrap[[index["shape_bias", m] for m in MODELS]]
    rho = [stats.spearmanr(x[:, b], y[:, b]).statistic for b in range(x.shape[1])]
    low, high = np.nanquantile(rho, [0.025, 0.975])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))
