"""fit_many: one batched Newton fit gives the same scales as fitting each group alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from humanlike.analysis.data_paths import shared_data_dir
from humanlike.analysis.mlds.batch import fit_many
from humanlike.analysis.mlds.estimator import MLDS
from humanlike.analysis.mlds.probit_irls import fit_probit_batch
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.stimuli.mlds_design import all_quadruples, all_triads


def simulated_sequences(n_seq: int, n_trials: int, seed: int, design: str = "triads"):
    rng = np.random.default_rng(seed)
    universe = all_triads(7) if design == "triads" else all_quadruples(7)
    gamma = rng.uniform(0.5, 2.5, n_seq)
    psi = (np.arange(7) / 6)[None, :] ** gamma[:, None]
    levels = universe[rng.integers(0, len(universe), n_seq * n_trials)]
    seq = np.repeat(np.arange(n_seq), n_trials)
    cols = ["s1", "s2", "s3", "s4"][: universe.shape[1]]
    df = pd.DataFrame(levels, columns=cols)
    df.insert(0, "sequence", [f"seq{s:02d}" for s in seq])
    df["response"] = simulate_responses(levels, psi, 0.15, design=design, group=seq,
                                        random_state=rng)
    return df, psi


@pytest.mark.parametrize("design", ["triads", "quadruples"])
def test_batched_fit_equals_one_statsmodels_glm_per_sequence_to_1e8(design):
    df, _ = simulated_sequences(12, 300, seed=1, design=design)
    fits = fit_many(df, by="sequence", design=design)
    assert fits.converged.all()
    for i, seq in enumerate(fits.keys["sequence"]):
        one = MLDS(design, method="glm").fit(df[df["sequence"] == seq])
        np.testing.assert_allclose(fits.scale[i], one.scale_, atol=1e-8, rtol=0)
        np.testing.assert_allclose(fits.se[i], one.se_, rtol=1e-6)
        assert fits.loglik[i] == pytest.approx(one.loglik_, abs=1e-8)
        assert fits.sigma[i] == pytest.approx(one.sigma_, abs=1e-8)


def test_sequences_are_fitted_from_their_own_trials_whatever_the_row_order():
    df, _ = simulated_sequences(6, 200, seed=2)
    shuffled = df.sample(frac=1.0, random_state=0)
    a, b = fit_many(df), fit_many(shuffled)
    np.testing.assert_allclose(a.scale, b.scale, atol=1e-12)
    assert list(a.keys["sequence"]) == sorted(df["sequence"].unique())


def test_r_data_sets_stacked_as_groups_match_their_separate_fits():
    root = shared_data_dir() / "mlds"
    frames = [pd.read_csv(root / f"data_{n}.csv").assign(run=n) for n in ("kk1", "kk2", "kk3")]
    stacked = pd.concat(frames, ignore_index=True)
    fits = fit_many(stacked, by="run", design="quadruples")
    for i, frame in enumerate(frames):
        one = MLDS("quadruples").fit(frame.drop(columns="run"))
        np.testing.assert_allclose(fits.scale[i], one.scale_, atol=1e-8)


def test_pooling_everything_with_by_none_is_the_single_scale_fit():
    df = pd.read_csv(shared_data_dir() / "mlds" / "data_kk_all_swapped.csv")
    pooled = fit_many(df, by=None, design="quadruples")
    one = MLDS("quadruples").fit(df)
    np.testing.assert_allclose(pooled.scale[0], one.scale_, atol=1e-8)
    assert pooled.n_trials[0] == 990


def test_groups_by_several_columns_get_one_scale_each():
    df, _ = simulated_sequences(3, 400, seed=3)
    df["participant"] = np.where(np.arange(len(df)) % 2 == 0, "p1", "p2")
    fits = fit_many(df, by=["sequence", "participant"])
    assert len(fits.keys) == 6
    assert fits.n_trials.sum() == len(df)
    sub = df[(df["sequence"] == fits.keys["sequence"][3])
             & (df["participant"] == fits.keys["participant"][3])]
    np.testing.assert_allclose(fits.scale[3], MLDS().fit(sub).scale_, atol=1e-8)


def test_a_group_missing_a_level_is_flagged_unidentified_and_others_are_unaffected():
    df, _ = simulated_sequences(3, 300, seed=4)
    lacking = (df["sequence"] == "seq01") & ((df[["s1", "s2", "s3"]] == 4).any(axis=1))
    df = df[~lacking]
    fits = fit_many(df)
    assert fits.identified.tolist() == [True, False, True]
    assert np.isnan(fits.scale[1, 1:]).all() and np.isnan(fits.sigma[1])
    one = MLDS().fit(df[df["sequence"] == "seq02"])
    np.testing.assert_allclose(fits.scale[2], one.scale_, atol=1e-8)


def test_perfectly_separated_group_is_reported_as_not_converged():
    triads = all_triads(5)
    # responses follow the linear scale without error: the likelihood has no maximum
    delta = triads[:, 2] - 2 * triads[:, 1] + triads[:, 0]
    sep = pd.DataFrame(triads, columns=["s1", "s2", "s3"]).assign(
        response=(delta > 0).astype(int), sequence="separated")
    sep = sep[delta != 0]
    noisy, _ = simulated_sequences(1, 400, seed=5)
    noisy = noisy[noisy[["s1", "s2", "s3"]].max(axis=1) <= 5]
    fits = fit_many(pd.concat([sep, noisy]), by="sequence")
    assert fits.keys["sequence"].tolist() == ["separated", "seq00"]
    assert fits.converged.tolist() == [False, True]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_coefficients_past_what_floats_hold_end_not_converged_instead_of_failing_the_batch():
    """A separated bootstrap replicate can drift to coefficients near 1e150, where phi and Phi
    over- and underflow and the information matrix holds inf / NaN; LAPACK then failed the whole
    batch ("Eigenvalues did not converge", seen in the demo's MLDS analysis). Such a problem
    ends not converged; the others in the batch are fitted as alone."""
    rng = np.random.default_rng(0)
    X = rng.choice([-2.0, -1.0, 0.0, 1.0, 2.0], size=(30, 6))
    n = np.full((4, 30), 3.0)
    y = rng.integers(0, 4, size=(4, 30)).astype(float)
    start = rng.normal(size=(4, 6)) * 10.0 ** rng.uniform(100, 170, size=(4, 1))
    start[3] = 0.0  # one ordinary problem in the batch
    fit = fit_probit_batch(X, y, n, start=start)
    alone = fit_probit_batch(X, y[3:], n[3:])
    assert not fit.converged[:3].any() and fit.converged[3]
    np.testing.assert_allclose(fit.coef[3], alone.coef[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fit.cov[3], alone.cov[0], rtol=1e-9, atol=1e-12)


def test_bootstrap_intervals_bracket_the_estimates():
    df, _ = simulated_sequences(4, 500, seed=6)
    fits = fit_many(df, n_resamples=200, random_state=0)
    inner = slice(1, -1)
    assert (fits.ci.low[:, inner] <= fits.scale_std[:, inner]).all()
    assert (fits.scale_std[:, inner] <= fits.ci.high[:, inner]).all()
    assert (fits.sigma_ci.low < fits.sigma).all() and (fits.sigma < fits.sigma_ci.high).all()
    long = fits.to_frame()
    assert list(long.columns) == ["sequence", "level", "scale", "scale_std", "se", "ci_low",
                                  "ci_high"]
    assert len(long) == 4 * 7


def test_missing_grouping_column_raises():
    df, _ = simulated_sequences(1, 50, seed=7)
    with pytest.raises(ValueError, match="participant"):
        fit_many(df, by="participant")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_rows=st.integers(8, 40))
def test_counts_give_the_same_estimates_as_bernoulli_rows(seed, n_rows):
    """Property: collapsing identical trials into binomial counts does not change the MLE."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3))
    beta = rng.normal(scale=0.5, size=3)
    trials = rng.integers(5, 15, n_rows)
    y = rng.binomial(trials, 1 / (1 + np.exp(-1.6 * (X @ beta))))
    counts = fit_probit_batch(X, y, trials)
    assume(counts.converged[0] and np.abs(counts.coef).max() < 8)  # skip (quasi-)separation
    rows = np.repeat(np.arange(n_rows), trials)
    bern = (np.arange(trials.sum()) - np.repeat(np.cumsum(trials) - trials, trials)
            < np.repeat(y, trials)).astype(float)  # y ones then n - y zeros per row
    single = fit_probit_batch(X[rows], bern, np.ones_like(bern))
    np.testing.assert_allclose(counts.coef, single.coef, atol=1e-7)
    assert counts.loglik[0] == pytest.approx(single.loglik[0], abs=1e-8)


def _linear_program_finds_separation(X, y, n) -> bool:
    """Independent check (scipy.optimize.linprog): is there a direction d != 0 with
    X d >= 0 on all-success rows, <= 0 on all-failure rows and = 0 on mixed rows? Then the
    likelihood keeps rising along d and no maximum-likelihood estimate exists."""
    from scipy.optimize import linprog

    ones, zeros = (y == n) & (n > 0), (y == 0) & (n > 0)
    mixed = (y > 0) & (y < n)
    res = linprog(-(X[ones].sum(0) - X[zeros].sum(0)), A_ub=np.vstack([-X[ones], X[zeros]]),
                  b_ub=np.zeros(ones.sum() + zeros.sum()),
                  A_eq=X[mixed] if mixed.any() else None,
                  b_eq=np.zeros(mixed.sum()) if mixed.any() else None,
                  bounds=[(-1, 1)] * X.shape[1])
    return -res.fun > 1e-9


def test_non_convergence_flags_exactly_the_separated_data_sets():
    """Sparse quadruple data (35 trials, sigma = 0.1) are often (quasi-)separated; the batched
    fit must flag precisely those, as a linear program independently decides."""
    from humanlike.analysis.mlds.data import canonical_trials, count_trials, design_matrix

    quads = all_quadruples(7)
    psi = (np.arange(7) / 6) ** 2
    levels = np.tile(quads, (60, 1))
    df = pd.DataFrame(levels, columns=["s1", "s2", "s3", "s4"])
    df["response"] = simulate_responses(levels, psi, 0.1, design="quadruples", random_state=0)
    groups = np.repeat(np.arange(60), len(quads))
    counts = count_trials(canonical_trials(df, "quadruples"), 7, groups, 60)
    X = design_matrix(counts.rows, 7, "quadruples")
    fit = fit_probit_batch(X, counts.successes, counts.trials)
    separated = np.array([_linear_program_finds_separation(X, counts.successes[g],
                                                           counts.trials[g]) for g in range(60)])
    assert 5 < separated.sum() < 55  # both kinds occur
    np.testing.assert_array_equal(fit.converged, ~separated)
