"""A (quasi-)separated probit problem drifts until phi / Phi overflows; ``fit_probit_batch`` drops
it as not converged (``_finite``) without a numpy warning (``make demo`` printed them)."""

from __future__ import annotations

import warnings

import numpy as np

from humanlike.analysis.mlds.probit_irls import fit_probit_batch

# rows (1, 0) and (0, 1) with every answer a failure: the first coefficient runs off to -infinity
X = np.array([[-2.0, 1.0], [-1.0, -2.0], [-1.0, -2.0], [1.0, 0.0], [0.0, -1.0], [1.0, 0.0],
              [0.0, 1.0]])
SUCCESSES = np.array([1.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0])
TRIALS = np.array([1.0, 1.0, 2.0, 1.0, 2.0, 0.0, 1.0])


def test_a_separated_problem_is_not_converged_and_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_probit_batch(X, SUCCESSES, TRIALS)
    assert fit.identified.tolist() == [True] and fit.converged.tolist() == [False]
    assert fit.coef[0, 0] < -1e6 and np.isnan(fit.cov).all()


def test_a_separated_problem_leaves_its_batch_neighbour_fitted():
    successes = np.vstack([SUCCESSES, [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]])
    trials = np.vstack([TRIALS, [1.0, 1.0, 2.0, 2.0, 2.0, 0.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_probit_batch(X, successes, trials)
    alone = fit_probit_batch(X, successes[1], trials[1])
    assert fit.converged.tolist() == [False, True]
    np.testing.assert_allclose(fit.coef[1], alone.coef[0], rtol=1e-8)
    assert np.isfinite(fit.cov[1]).all()
