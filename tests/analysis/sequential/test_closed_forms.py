"""The sequential tests against their papers' closed forms and published tables."""

from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import integrate, stats
from statsmodels.stats.multitest import multipletests

from humanlike.analysis.sequential.betting import (
    kt_fractions,
    log_capital,
    log_hedged,
    log_mixture_capital,
)
from humanlike.analysis.sequential.running import holm_sidak_adjust
from humanlike.analysis.sequential.safe_t import log_safe_t
from humanlike.analysis.sequential.spending import obrien_fleming_boundaries


def _hand_capital(xs, m=Fraction(1, 2), c=Fraction(1, 2)):
    """K_t^+ and K_t^- by the paper's recursion in exact arithmetic (WSR 2024 §4.2, §5.1 aGRAPA)."""
    total, squares = Fraction(0), Fraction(0)
    mu_prev, var_prev = Fraction(1, 2), Fraction(1, 4)
    plus, minus, out = Fraction(1), Fraction(1), []
    for t, x in enumerate(xs, start=1):
        gap = mu_prev - m
        bet = gap / (var_prev + gap * gap)
        plus *= 1 + min(max(bet, 0), c / m) * (x - m)
        minus *= 1 - min(max(-bet, 0), c / (1 - m)) * (x - m)
        out.append((plus, minus))
        total += x
        mu = (Fraction(1, 2) + total) / (t + 1)
        squares += (x - mu) ** 2
        mu_prev, var_prev = mu, (Fraction(1, 4) + squares) / (t + 1)
    return out


def test_betting_capital_matches_the_hand_computed_recursion_on_four_observations():
    # d = 1, -0.5, 0.5, 1.5 on [-2, 2] is x = 3/4, 3/8, 5/8, 7/8 on [0, 1]. By hand: the first bet is
    # 0 (mu_0 = m); mu_1 = 5/8, sigma2_1 = 17/128, bet 16/19, factor 1 - 2/19 = 17/19; mu_2 = 13/24,
    # sigma2_2 = 169/1728, bet 18/43, factor 1 + 9/172 = 181/172, so K_3^+ = 3077/3268.
    xs = [Fraction(3, 4), Fraction(3, 8), Fraction(5, 8), Fraction(7, 8)]
    hand = _hand_capital(xs)
    assert [p for p, _ in hand[:3]] == [1, Fraction(17, 19), Fraction(3077, 3268)]
    assert all(m == 1 for _, m in hand)  # every bet is on "mean above 1/2": K^- never moves
    x = np.array([float(v) for v in xs])[None, :, None]
    log_plus, log_minus = log_capital(x, 0.5)
    assert np.exp(log_plus[0, :, 0]) == pytest.approx([float(p) for p, _ in hand], rel=1e-12)
    assert np.exp(log_minus[0, :, 0]) == pytest.approx([1.0] * 4)
    hedged = np.exp(log_hedged(log_plus, log_minus))[0, :, 0]
    assert hedged == pytest.approx([max(float(p) / 2, 0.5) for p, _ in hand])


def test_betting_capital_is_one_when_every_observation_sits_on_the_null_mean():
    x = np.full((1, 5, 1), 0.5)
    log_plus, log_minus = log_capital(x, 0.5)
    assert np.all(log_plus == 0) and np.all(log_minus == 0)


def _kt_mixture(returns):
    """E[prod_i (1 + u r_i)] under u ~ Beta(1/2, 1/2), exactly: sum_k e_k(r) E[u^k], e_k the
    elementary symmetric polynomials and E[u^k] = C(2k, k) / 4^k (the arcsine law's moments)."""
    e = [Fraction(1)]
    for r in returns:  # e_k of the first i returns, built one return at a time
        e = [a + r * b for a, b in zip([*e, Fraction(0)], [Fraction(0), *e], strict=True)]
    return sum(ek * Fraction(comb(2 * k, k), 4**k) for k, ek in enumerate(e))


def test_mixture_capital_equals_the_krichevsky_trofimov_mixture_of_constant_bets():
    # x = 3/4, 3/8, 5/8, 7/8 at m = 1/2: returns of the bet on "above" r = (x - m)/m = 1/2, -1/4,
    # 1/4, 3/4; K_1^+ = 1 + E[u]/2 = 5/4, and the rest from the arcsine moments 1/2, 3/8, 5/16, 35/128
    xs = [Fraction(3, 4), Fraction(3, 8), Fraction(5, 8), Fraction(7, 8)]
    up = [(x - Fraction(1, 2)) * 2 for x in xs]
    down = [-r for r in up]  # (1 - x)/(1 - m) - 1 at m = 1/2
    assert _kt_mixture(up[:1]) == Fraction(5, 4)
    assert _kt_mixture(up[:2]) == 1 + Fraction(1, 4) * Fraction(1, 2) - Fraction(1, 8) * Fraction(3, 8)
    log_plus, log_minus = log_mixture_capital(np.array([float(v) for v in xs])[None, :, None], 0.5)
    for t in range(1, 5):
        assert np.exp(log_plus[0, t - 1, 0]) == pytest.approx(float(_kt_mixture(up[:t])), rel=1e-12)
        assert np.exp(log_minus[0, t - 1, 0]) == pytest.approx(float(_kt_mixture(down[:t])), rel=1e-12)
    u = kt_fractions(64)
    assert [np.mean(u**k) for k in range(1, 6)] == pytest.approx(
        [comb(2 * k, k) / 4**k for k in range(1, 6)], rel=1e-12)  # Gauss-Chebyshev: exact moments


def test_mixture_capital_stays_within_cover_and_ordentlichs_regret_of_the_best_constant_bet():
    # universal portfolio of two assets under the Dirichlet(1/2, 1/2) prior: wealth >= the best
    # constant bet's in hindsight / (2 sqrt(t + 1)) (Cover & Ordentlich 1996, Thm 2)
    x = np.random.default_rng(9).beta(6, 4, (20, 100, 1))  # mean 0.6: the bet on "above 1/2" pays
    log_plus, _ = log_mixture_capital(x, 0.5, nodes=64)  # the prior's mixture exactly: t < 128
    shares = np.linspace(0, 1, 2001)[:-1]
    best = np.log1p(shares * (x[..., None] - 0.5) / 0.5).sum(1).max(-1)  # (20, 1)
    regret = best - log_plus[:, -1]
    assert np.all(regret <= np.log(2 * np.sqrt(101)))
    assert np.all(regret >= -1e-9)  # and no mixture beats the best bet of the grid by more


def test_safe_t_equals_the_bayes_factor_integrated_over_its_prior():
    # d = 0.1, 0.3, 0.2: mean 0.2, SD 0.1, t = 2 sqrt(3), nu = 2; with g = 1/2 the closed form gives
    # (1 + 1.5)^(-1/2) ((1 + 12/2) / (1 + 12/5))^(3/2) = 1.8684...
    d = np.array([0.1, 0.3, 0.2])[None, :, None]
    bf = np.exp(log_safe_t(d, g=0.5))[0, -1, 0]
    assert bf == pytest.approx(2.5 ** -0.5 * (7 / 3.4) ** 1.5, rel=1e-12)
    assert bf == pytest.approx(1.86837, abs=1e-4)
    t, nu, n = 2 * np.sqrt(3), 2, 3
    numerator, _ = integrate.quad(
        lambda delta: stats.nct.pdf(t, nu, delta * np.sqrt(n)) * stats.norm.pdf(delta, 0, np.sqrt(0.5)),
        -np.inf, np.inf)
    assert bf == pytest.approx(numerator / stats.t.pdf(t, nu), rel=1e-6)  # definition, no closed form


def test_obrien_fleming_spending_boundaries_match_the_published_tables():
    # Lan-DeMets O'Brien-Fleming-type spending, two-sided alpha 0.05 (0.025 a side), equally spaced:
    # 5 looks 4.877 3.357 2.680 2.290 2.031, 3 looks 3.710 2.511 1.993 (Jennison & Turnbull 2000,
    # ch. 7; Reboussin, DeMets, Kim & Lan 2000, Controlled Clinical Trials 21:190-207, program
    # ld98; gsDesign sfLDOF with k = 5, test.type = 2, alpha = 0.025).
    five = obrien_fleming_boundaries([0.2, 0.4, 0.6, 0.8, 1.0], 0.05)
    assert five == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=6e-4)
    three = obrien_fleming_boundaries([1 / 3, 2 / 3, 1.0], 0.05)
    assert three == pytest.approx([3.710, 2.511, 1.993], abs=6e-4)
    assert obrien_fleming_boundaries([1.0], 0.05) == pytest.approx([stats.norm.isf(0.025)])


def test_obrien_fleming_boundaries_spend_alpha_on_simulated_brownian_paths():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((200_000, 5)).cumsum(1)
    z = w / np.sqrt(np.arange(1, 6))
    crossed = (np.abs(z) >= obrien_fleming_boundaries(np.arange(1, 6) / 5, 0.05)).any(1)
    assert abs(crossed.mean() - 0.05) < 3 * np.sqrt(0.05 * 0.95 / 200_000)


def test_boundaries_refuse_fractions_that_do_not_increase():
    with pytest.raises(ValueError, match="fractions"):
        obrien_fleming_boundaries([0.5, 0.5, 1.0], 0.05)


def test_vectorised_holm_sidak_equals_statsmodels_row_by_row():
    p = np.random.default_rng(4).uniform(0, 0.2, (50, 4))
    ours = holm_sidak_adjust(p)
    for row, got in zip(p, ours, strict=True):
        assert got == pytest.approx(multipletests(row, method="holm-sidak")[1], rel=1e-12)
