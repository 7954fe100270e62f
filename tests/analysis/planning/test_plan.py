"""``humanlike plan``: model recovery on the demo's four models, and the same numbers on joblib
and on a local Dask cluster."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from humanlike.analysis.planning.inputs import plan_inputs, read_model_responses
from humanlike.analysis.planning.recovery import PlanInputs, plan_study
from humanlike.cli import main
from tests.e2e.conftest import demo_spec  # noqa: F401 - the session's demo, built once


def _demo_inputs(spec_path, trials=20, noise=0.3) -> PlanInputs:
    root = spec_path.parent
    manifest = pd.read_csv(root / "stimuli" / "manifest.csv").rename(columns={"file": "stimulus"})
    return plan_inputs(read_model_responses(root / "stimuli" / "model_responses.csv"), manifest,
                       trials, noise)


def test_plan_recovers_each_demo_model_at_the_n_it_recommends(demo_spec, tmp_path):  # noqa: F811
    """The CLI recommends an N; fresh simulations (another seed) at that N declare the
    generating model the winner in >= 80% of studies, for each of the four models."""
    models = demo_spec.parent / "stimuli" / "model_responses.csv"
    result = CliRunner().invoke(main, [
        "plan", str(demo_spec), "--models", str(models), "--n", "2,4,8,16", "--replications", "20",
        "--n-resamples", "300", "--noise-sd", "0.3", "--trials", "20", "--rule", "winner",
        "--seed", "1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    n = plan["recommended_n"]
    assert n is not None and n > 2, result.output  # N = 2 does not recover every model
    assert "recommended N:" in result.output
    for name in ("recovery.png", "power.png", "studies.csv", "power.csv", "by_n.csv", "plan.html"):
        assert (tmp_path / name).stat().st_size > 0
    page = (tmp_path / "plan.html").read_text()
    assert "Planned sample size" in page and f"Recommended N: {n}." in page
    check = plan_study(_demo_inputs(demo_spec), [n], 30, n_resamples=300, seed=99)
    recovery = check.recovery(n)
    assert len(recovery) == 4
    for model in recovery.index:
        assert recovery.loc[model, model] >= 0.8, recovery
    assert (check.by_n()["false_decision"] <= 0.05).all()


def _small_inputs() -> PlanInputs:
    rng = np.random.default_rng(0)
    y = rng.uniform(0.01, 0.99, (3, 12, 4))
    y[1] = np.clip(y[0] + rng.normal(0, 0.15, y[0].shape), 0.01, 0.99)
    strata = ("natural",) * 6 + ("m0 vs m1",) * 6
    return PlanInputs(y, ("m0", "m1", "m2"), tuple(f"s{i}" for i in range(12)), strata, 8, 0.3)


def test_joblib_and_a_local_dask_cluster_give_the_same_numbers():
    distributed = pytest.importorskip("distributed")
    inputs = _small_inputs()
    args = dict(sample_sizes=[3, 6], n_replications=7, n_resamples=300, seed=5, chunk=3)
    serial = plan_study(inputs, n_jobs=1, **args)
    processes = plan_study(inputs, n_jobs=2, **args)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        on_dask = plan_study(inputs, dask_address=cluster.scheduler_address, **args)
    pd.testing.assert_frame_equal(serial.decisions, processes.decisions)
    pd.testing.assert_frame_equal(serial.decisions, on_dask.decisions)
    pd.testing.assert_frame_equal(serial.studies, on_dask.studies)
    assert on_dask.settings["backend"] == "dask"
    assert serial.decisions["significant"].any() and not serial.decisions["significant"].all()


def test_plan_refuses_bad_input(tmp_path, demo_spec):  # noqa: F811
    result = CliRunner().invoke(main, ["plan", str(demo_spec), "--n", "1,5"])
    assert result.exit_code != 0 and "at least 2" in result.output
    result = CliRunner().invoke(main, ["plan", str(demo_spec)])
    assert result.exit_code != 0 and "--models" in result.output


def test_the_simulated_participants_r_is_the_analysis_packages_per_participant_score():
    from humanlike.analysis.planning.recovery import participant_r
    from humanlike.analysis.planning.simulate import draw_subsets, simulate_ratings
    from humanlike.analysis.ratings.scores import participant_scores

    inputs = _small_inputs()
    rng = np.random.default_rng(4)
    shown = draw_subsets(np.ones(12), 8, (3, 6), rng)
    x = simulate_ratings(inputs.probabilities[0], 3, 6, 0.3, rng, shown)
    r = participant_r(x, inputs.probabilities)
    for study in range(3):
        expected, _ = participant_scores(x[study], inputs.probabilities)  # (models, participants)
        np.testing.assert_allclose(r[study].T, expected, rtol=1e-10, equal_nan=True)


@pytest.mark.parametrize("monitoring", ["continuous", "group_sequential"])
def test_a_monitored_plan_stops_studies_for_good_and_says_its_guarantee(monitoring):
    """Each simulated study runs to the largest N and is decided as the panel decides it: a pair
    decided by N stays decided at every larger N, so the share of studies with every comparison
    decided (and with the right winner) never falls as N grows."""
    plan = plan_study(_small_inputs(), [6, 12, 24, 48], 40, seed=3, monitoring=monitoring)
    for _, rows in plan.by_n().groupby("generator"):
        rows = rows.sort_values("n")
        assert rows["all_decided"].is_monotonic_increasing
        assert rows["correct_winner"].is_monotonic_increasing
    decided = plan.decisions.pivot_table(index=["generator", "replication", "pair"], columns="n",
                                         values="significant", aggfunc="first").astype(int)
    assert (decided.diff(axis=1).fillna(0) >= 0).all().all()  # never undecided again
    assert f"monitoring {monitoring}" in plan.summary()
    assert plan.settings["monitoring"] == monitoring


def test_a_continuous_plan_uses_the_declared_test():
    """The same simulated studies decided with the safe t-test e-process: the summary says so,
    and the decisions are the safe t-test's (never the betting ones relabelled)."""
    betting = plan_study(_small_inputs(), [6, 12, 24, 48], 20, seed=3, monitoring="continuous")
    safe = plan_study(_small_inputs(), [6, 12, 24, 48], 20, seed=3, monitoring="continuous",
                      test="safe_t")
    assert "safe t-test" in safe.summary() and "safe t-test" not in betting.summary()
    assert safe.settings["test"] == "safe_t"
    assert not safe.decisions["significant"].equals(betting.decisions["significant"])
    with pytest.raises(ValueError, match="test"):
        plan_study(_small_inputs(), [6, 12], 2, monitoring="continuous", test="z")
