"""Kappa matrices: Brain-Score ceilings, hierarchy, missing data, and the vectorised bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.error_consistency import kappa, kappa_matrix
from humanlike.analysis.io import read_model_vs_human


@pytest.fixture(scope="module")
def mvh() -> pd.DataFrame:
    return read_model_vs_human(shared_data_dir() / "model-vs-human" / "raw-data")


@pytest.fixture(scope="module")
def mvh_matrix(mvh: pd.DataFrame):
    return kappa_matrix(mvh, group="group", condition="condition", experiment="experiment")


@pytest.mark.parametrize(("experiment", "published"), [("edge", 0.31844), ("silhouette", 0.47571)])
def test_mean_human_human_kappa_equals_the_brain_score_ceiling(mvh_matrix, experiment, published):
    assert round(mvh_matrix.ceiling(experiment), 5) == published


@pytest.mark.parametrize(("experiment", "published"), [("edge", 0.31844), ("silhouette", 0.47571)])
def test_the_explicit_model_vs_human_convention_keeps_the_published_ceilings(
        mvh, experiment, published):
    result = kappa_matrix(mvh, group="group", condition="condition", experiment="experiment",
                          degenerate="mvh")
    assert round(result.ceiling(experiment), 5) == published


def _perfect_model_trials() -> pd.DataFrame:
    """Three humans with errors (30 stimuli), one human right on every stimulus, and a model
    right on every stimulus."""
    rng = np.random.default_rng(4)
    rows = []
    right = {"h1": rng.random(30) < 0.7, "h2": rng.random(30) < 0.6, "h3": rng.random(30) < 0.8,
             "h4": np.ones(30, bool), "cnn": np.ones(30, bool)}
    for observer, correct in right.items():
        for i, c in enumerate(correct):
            rows.append({"observer": observer, "stimulus": f"s{i:02d}", "correct": bool(c),
                         "group": "model" if observer == "cnn" else "human"})
    return pd.DataFrame(rows)


def test_a_model_right_on_every_trial_gets_nan_kappa_with_the_reason():
    trials = _perfect_model_trials()
    result = kappa_matrix(trials, group="group", n_resamples=50, random_state=0)
    pairs = result.pairs.set_index(["observer_a", "observer_b"])
    model = pairs.xs("cnn", level="observer_b")
    assert model["kappa"].isna().all() and model["ci_low"].isna().all()
    assert not model["informative"].any()
    assert model.loc["h1", "reason"].startswith("cnn at 100% accuracy")
    assert model.loc["h4", "reason"].startswith("h4 at 100% accuracy and cnn at 100% accuracy")
    summary = result.summary.set_index(["level", "statistic", "model"])["kappa"]
    assert np.isnan(summary[("overall", "model-human", "cnn")])
    # the human-human mean leaves the perfect human's pairs out: the mean of the three others
    humans = pairs.loc[[("h1", "h2"), ("h1", "h3"), ("h2", "h3")], "kappa"]
    assert pairs["informative"].sum() == 3
    assert summary[("overall", "human-human", "")] == pytest.approx(humans.mean())
    # closed form under model-vs-human's convention: c_obs = the human's accuracy = c_exp, so 0,
    # and 1 with the human who is right on every trial too (c_obs = 1)
    mvh = kappa_matrix(trials, group="group", degenerate="mvh").pairs
    to_model = mvh[mvh["observer_b"] == "cnn"].set_index("observer_a")["kappa"]
    assert to_model.to_dict() == pytest.approx({"h1": 0.0, "h2": 0.0, "h3": 0.0, "h4": 1.0})


def test_matrix_entries_equal_kappa_of_each_pair_joined_on_the_image_name(mvh):
    edge = mvh[mvh["experiment"] == "edge"]
    result = kappa_matrix(edge, group="group")
    wide = edge.pivot(index="stimulus", columns="observer", values="correct")
    matrix = result.matrix()
    for a, b in [
        ("subject-01", "subject-09"),
        ("resnet50", "subject-03"),
        ("bagnet33", "resnet50"),
    ]:
        assert matrix.loc[a, b] == pytest.approx(kappa(wide[a], wide[b]), abs=1e-12)
        assert matrix.loc[b, a] == matrix.loc[a, b]
    assert len(result.pairs) == 13 * 12 // 2
    assert list(matrix.index[:10]) == [f"subject-{i:02d}" for i in range(1, 11)]


def test_summary_holds_ceiling_each_model_to_humans_and_model_model(mvh_matrix):
    s = mvh_matrix.summary
    edge = s[(s["level"] == "experiment") & (s["experiment"] == "edge")]
    assert set(edge["statistic"]) == {"human-human", "model-human", "model-model"}
    assert set(edge.loc[edge["statistic"] == "model-human", "model"]) == {
        "bagnet33",
        "resnet50",
        "simclr_resnet50x1",
    }
    pairs = mvh_matrix.pairs
    res = pairs[
        (pairs["experiment"] == "edge")
        & ((pairs["observer_a"] == "resnet50") | (pairs["observer_b"] == "resnet50"))
        & ((pairs["group_a"] == "human") | (pairs["group_b"] == "human"))
    ]
    assert len(res) == 10
    row = edge[(edge["statistic"] == "model-human") & (edge["model"] == "resnet50")]
    assert row["kappa"].iloc[0] == pytest.approx(res["kappa"].mean())
    overall = s[(s["level"] == "overall") & (s["statistic"] == "human-human")]
    per_exp = s[(s["level"] == "experiment") & (s["statistic"] == "human-human")]
    assert overall["kappa"].iloc[0] == pytest.approx(per_exp["kappa"].mean())


def _toy_trials() -> pd.DataFrame:
    """Two conditions; the model sees only condition A; h3 misses one stimulus in B."""
    rows = []
    correct = {
        ("A", "h1"): [1, 1, 0, 0, 1, 0],
        ("A", "h2"): [1, 0, 0, 0, 1, 1],
        ("A", "h3"): [1, 1, 0, 1, 1, 0],
        ("A", "m1"): [0, 1, 0, 1, 1, 1],
        ("B", "h1"): [1, 0, 1, 0, 1],
        ("B", "h2"): [0, 0, 1, 1, 1],
        ("B", "h3"): [1, 0, 1, 0, None],
    }
    for (cond, obs), values in correct.items():
        for i, v in enumerate(values):
            if v is not None:
                rows.append(
                    {
                        "condition": cond,
                        "observer": obs,
                        "stimulus": f"{cond}{i}",
                        "correct": bool(v),
                        "group": "model" if obs == "m1" else "human",
                    }
                )
    return pd.DataFrame(rows)


def test_hierarchy_averages_pairs_within_condition_then_conditions():
    trials = _toy_trials()
    result = kappa_matrix(trials, group="group", condition="condition")
    wide = {
        c: t.pivot(index="stimulus", columns="observer", values="correct")
        for c, t in trials.groupby("condition")
    }
    hh = {}
    for c, w in wide.items():
        ks = []
        for a, b in [("h1", "h2"), ("h1", "h3"), ("h2", "h3")]:
            both = w[[a, b]].dropna()
            ks.append(kappa(both[a].astype(bool), both[b].astype(bool)))
        hh[c] = np.mean(ks)
    s = result.summary.set_index(["level", "condition", "statistic"])
    assert s.loc[("condition", "A", "human-human"), "kappa"] == pytest.approx(hh["A"])
    assert s.loc[("condition", "B", "human-human"), "kappa"] == pytest.approx(hh["B"])
    assert s.loc[("experiment", "all", "human-human"), "kappa"] == pytest.approx(
        (hh["A"] + hh["B"]) / 2
    )
    # the model exists only in condition A, so its experiment value is its condition-A value
    mh = s.xs("model-human", level="statistic")
    assert mh.loc[("experiment", "all"), "kappa"] == pytest.approx(
        mh.loc[("condition", "A"), "kappa"]
    )
    pair = result.pairs.query("condition == 'B' and observer_a == 'h1' and observer_b == 'h3'")
    assert pair["n"].iloc[0] == 4  # scored over the four stimuli both saw


def test_a_single_observer_per_condition_is_rejected():
    trials = _toy_trials()
    with pytest.raises(ValueError, match="two observers"):
        kappa_matrix(trials[trials["observer"] == "h1"], condition="condition")


def test_duplicate_trials_of_one_observer_are_rejected():
    trials = _toy_trials()
    trials = pd.concat([trials, trials.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError, match="more than one trial"):
        kappa_matrix(trials, group="group", condition="condition")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.drop(columns="correct"), "correct"),
        (lambda t: t.assign(group="robot"), "'human' or 'model'"),
        (lambda t: t.assign(correct=np.where(t.index == 0, np.nan, 1.0)), "missing"),
        (lambda t: t.assign(correct="maybe"), "True/False"),
    ],
)
def test_malformed_trial_frames_raise_value_errors_naming_the_column(change, message):
    with pytest.raises(ValueError, match=message):
        kappa_matrix(change(_toy_trials()), group="group", condition="condition")


def test_bootstrap_is_reproducible_and_brackets_the_estimate(mvh):
    edge = mvh[mvh["experiment"] == "edge"]
    r1 = kappa_matrix(edge, group="group", n_resamples=500, random_state=7)
    r2 = kappa_matrix(edge, group="group", n_resamples=500, random_state=7)
    np.testing.assert_array_equal(r1.summary_distribution, r2.summary_distribution)
    s = r1.summary
    assert (s["ci_low"] <= s["kappa"]).all() and (s["kappa"] <= s["ci_high"]).all()
    assert r1.pair_distribution.shape == (500, 78)


def _naive_bootstrap(
    trials: pd.DataFrame, result, indices: dict, degenerate: str
) -> tuple[np.ndarray, np.ndarray]:
    """Plain loop: per resample, rebuild every pair's vectors and average by hand."""
    tables = {
        c: t.pivot(index="stimulus", columns="observer", values="correct")
        for c, t in trials.groupby("condition")
    }
    pairs = []
    for p in result.pairs.itertuples():
        table = tables[p.condition]
        if p.group_a == p.group_b:
            stat, model = f"{p.group_a}-{p.group_b}", ""
        else:
            stat, model = "model-human", p.observer_a if p.group_a == "model" else p.observer_b
        pairs.append(
            (
                p.condition,
                table[p.observer_a].to_numpy(dtype=float),
                table[p.observer_b].to_numpy(dtype=float),
                stat,
                model,
            )
        )
    n_resamples = next(iter(indices.values())).shape[0]
    pair_out = np.empty((n_resamples, len(pairs)))
    summary_out = np.empty((n_resamples, len(result.summary)))
    for b in range(n_resamples):
        per_cond: dict[tuple, list[float]] = {}
        for k, (cond, col_a, col_b, stat, model) in enumerate(pairs):
            rows = indices[("all", cond)][b]
            a, c = col_a[rows], col_b[rows]
            both = ~np.isnan(a) & ~np.isnan(c)
            value = kappa(a[both], c[both], degenerate=degenerate) if both.any() else np.nan
            pair_out[b, k] = value
            per_cond.setdefault((cond, stat, model), []).append(value)
        cond_means = {
            key: np.nanmean(v) if np.isfinite(v).any() else np.nan for key, v in per_cond.items()
        }
        per_exp: dict[tuple, list[float]] = {}
        for (_, stat, model), value in cond_means.items():
            per_exp.setdefault((stat, model), []).append(value)
        for r, row in enumerate(result.summary.itertuples()):
            if row.level == "condition":
                summary_out[b, r] = cond_means[(row.condition, row.statistic, row.model)]
            else:
                values = per_exp[(row.statistic, row.model)]
                summary_out[b, r] = np.nanmean(values) if np.isfinite(values).any() else np.nan
    return pair_out, summary_out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n_humans=st.integers(2, 4),
    n_models=st.integers(0, 2),
    n_stimuli=st.lists(st.integers(3, 12), min_size=1, max_size=2),
    missing=st.booleans(),
    degenerate=st.sampled_from(["undefined", "mvh", "strict"]),
)
def test_vectorised_bootstrap_equals_a_plain_loop_over_the_same_indices(
    seed, n_humans, n_models, n_stimuli, missing, degenerate
):
    rng = np.random.default_rng(seed)
    rows = []
    observers = [(f"h{i}", "human") for i in range(n_humans)] + [
        (f"m{i}", "model") for i in range(n_models)
    ]
    for c, n in enumerate(n_stimuli):
        for name, group in observers:
            acc = rng.uniform(0.3, 0.9)
            for s in range(n):
                if missing and rng.random() < 0.15:
                    continue
                rows.append(
                    {
                        "condition": f"c{c}",
                        "observer": name,
                        "group": group,
                        "stimulus": f"s{s:02d}",
                        "correct": rng.random() < acc,
                    }
                )
    trials = pd.DataFrame(rows)
    stimuli = {c: sorted(t["stimulus"].unique()) for c, t in trials.groupby("condition")}
    n_resamples = 6
    indices = {
        ("all", c): rng.integers(0, len(s), size=(n_resamples, len(s))) for c, s in stimuli.items()
    }
    result = kappa_matrix(
        trials, group="group", condition="condition", degenerate=degenerate, indices=indices
    )
    pair_loop, summary_loop = _naive_bootstrap(trials, result, indices, degenerate)
    np.testing.assert_allclose(result.pair_distribution, pair_loop, atol=1e-9, equal_nan=True)
    np.testing.assert_allclose(result.summary_distribution, summary_loop, atol=1e-9, equal_nan=True)


def test_indices_of_the_wrong_shape_are_rejected():
    trials = _toy_trials()
    with pytest.raises(ValueError, match="shape"):
        kappa_matrix(
            trials,
            group="group",
            condition="condition",
            indices={("all", "A"): np.zeros((3, 5), int), ("all", "B"): np.zeros((3, 5), int)},
        )


def test_a_pair_with_too_few_errors_is_labelled_with_the_copy_models_trials():
    """Two observers at 90% on 20 stimuli share ~2 errors: the CI is too wide to compare them by,
    and the label names the copy model's trials for +-0.2; the same observers on 2,000 stimuli
    are not labelled."""
    from humanlike.analysis.error_consistency.analysis import analyze_error_consistency
    from humanlike.analysis.error_consistency.copy_model import kappa_standard_error, trials_needed

    def trials(n: int) -> pd.DataFrame:
        rng = np.random.default_rng(1)
        a = rng.random(n) < 0.9
        b = np.where(rng.random(n) < 0.5, a, rng.random(n) < 0.9)
        return pd.DataFrame({"observer": ["a"] * n + ["b"] * n, "stimulus": [*range(n)] * 2,
                             "correct": np.r_[a, b], "group": "human", "condition": "c",
                             "experiment": "e"}).assign(
            stimulus=lambda d: d["stimulus"].astype(str))

    small = analyze_error_consistency(trials(20), n_resamples=300, n_sim=100, random_state=0).pairs
    big = analyze_error_consistency(trials(2000), n_resamples=300, n_sim=100, random_state=0).pairs
    row = small.iloc[0]
    assert row["informative"] and (row["ci_high"] - row["ci_low"]) / 2 > 0.2
    assert row["ci_note"].startswith("too few errors to compare: CI +-")
    # the plan is the copy model's analytic one at the observed kappa and accuracies
    assert row["trials_for_ci"] == trials_needed(row["kappa"], row["acc_a"], row["acc_b"], 0.2)
    assert f"about {int(row['trials_for_ci'])} needed for +-0.2" in row["ci_note"]
    assert kappa_standard_error(row["kappa"], row["acc_a"], row["acc_b"], row["trials_for_ci"]) \
        * 1.959964 <= 0.2 + 1e-9
    assert big.iloc[0]["ci_note"] == ""


def test_observers_who_share_no_stimulus_get_no_test_and_the_others_are_still_tested():
    """Three observers: a and b saw stimuli 0-19, c saw 20-39 only (no trial shared with a or b).
    The a-b pair is tested; the pairs with c have no kappa and no p-value instead of failing the
    whole analysis ('need n >= 1'), and Holm-Sidak corrects over the tested pairs only."""
    from humanlike.analysis.error_consistency.analysis import analyze_error_consistency

    rng = np.random.default_rng(3)
    rows = [{"observer": obs, "stimulus": str(s), "correct": bool(rng.random() < 0.7)}
            for obs, stimuli in (("a", range(20)), ("b", range(20)), ("c", range(20, 40)))
            for s in stimuli]
    frame = pd.DataFrame(rows).assign(group="human", condition="c", experiment="e")
    pairs = analyze_error_consistency(frame, n_resamples=200, n_sim=200, random_state=0).pairs
    by_pair = {(r.observer_a, r.observer_b): r for r in pairs.itertuples()}
    tested = by_pair[("a", "b")]
    assert tested.n == 20 and np.isfinite(tested.p_independence)
    assert tested.p_holm_sidak == pytest.approx(tested.p_independence)  # one test in the family
    for pair in (("a", "c"), ("b", "c")):
        assert by_pair[pair].n == 0 and np.isnan(by_pair[pair].p_independence)
        assert not by_pair[pair].significant
