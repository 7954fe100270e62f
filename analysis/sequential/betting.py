"""Betting e-processes and confidence sequences for a bounded mean (Waudby-Smith & Ramdas 2024):
predictable plug-in aGRAPA bets (``log_capital``) or the mixture of every constant bet under the
Krichevsky-Trofimov prior, Cover's universal portfolio (``log_mixture_capital``).

Observations are rescaled to [0, 1]; time runs along axis 1 of (R, N, K) arrays (studies,
participants in arrival order, pairs); NaN marks a participant without a score for that pair
(a factor 1, the clock does not advance). Everything is cumulative (``np.cumsum``): the predictable
bets depend only on running sums, so no loop over participants is needed."""

from __future__ import annotations

import numpy as np

THETA = 0.5  # hedging weight between the two directions: a symmetric two-sided test (WSR 2024 §4.2)
TRUNCATION = 0.5  # c in |lambda| <= c/m: the paper's default, at most half the capital per bet
PRIOR_MEAN, PRIOR_VARIANCE = 0.5, 0.25  # one pseudo-observation in the running estimates (WSR 2024)
MIXTURE_NODES = 16  # Gauss-Chebyshev nodes of the Beta(1/2, 1/2) prior: exact for t < 32 (see below);
# bench/sequential.py's price is the same with 8, 16, 32, 64 or 128 nodes (2.17x on 300 studies)


def running_estimates(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predictable mu_{t-1} = (1/2 + sum_{i<t} x_i) / t and sigma2_{t-1} = (1/4 + sum_{i<t}
    (x_i - mu_i)^2) / t, the regularised running mean and variance (WSR 2024 §3, eq. of PrPl-EB)."""
    observed = np.isfinite(x)
    x0 = np.where(observed, x, 0.0)
    t = np.cumsum(observed, axis=1)
    mu = (PRIOR_MEAN + np.cumsum(x0, axis=1)) / (t + 1)
    sigma2 = (PRIOR_VARIANCE + np.cumsum(np.where(observed, (x0 - mu) ** 2, 0.0), axis=1)) / (t + 1)

    def shift(a: np.ndarray, first: float) -> np.ndarray:
        return np.concatenate([np.full_like(a[:, :1], first), a[:, :-1]], axis=1)

    return shift(mu, PRIOR_MEAN), shift(sigma2, PRIOR_VARIANCE)


def agrapa_bets(mu_prev: np.ndarray, sigma2_prev: np.ndarray, m: np.ndarray | float) -> np.ndarray:
    """lambda_t(m) = (mu_{t-1} - m) / (sigma2_{t-1} + (mu_{t-1} - m)^2): the approximate
    growth-rate-adaptive (aGRAPA) Kelly bet (WSR 2024 §5.1; confseq ``lambda_aKelly``)."""
    gap = mu_prev - m
    return gap / (sigma2_prev + gap * gap)


def log_capital(x: np.ndarray, m: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """log K_t^+(m) = sum log(1 + l_i^+ (x_i - m)), log K_t^-(m) = sum log(1 - l_i^- (x_i - m)),
    l^+ = min(max(lambda, 0), c/m), l^- = min(max(-lambda, 0), c/(1 - m)) (WSR 2024 §4.2, eq. of
    the hedged capital process); an array ``m`` broadcasts against ``x[..., None]``."""
    mu_prev, sigma2_prev = running_estimates(x)
    m = np.asarray(m, dtype=float)
    if m.ndim:
        x, mu_prev, sigma2_prev = x[..., None], mu_prev[..., None], sigma2_prev[..., None]
    bets = agrapa_bets(mu_prev, sigma2_prev, m)
    centred = np.where(np.isfinite(x), x - m, 0.0)
    with np.errstate(divide="ignore"):
        up = np.minimum(np.maximum(bets, 0.0), TRUNCATION / m) * centred
        down = np.minimum(np.maximum(-bets, 0.0), TRUNCATION / (1.0 - m)) * centred
    return np.cumsum(np.log1p(up), axis=1), np.cumsum(np.log1p(-down), axis=1)


def kt_fractions(nodes: int = MIXTURE_NODES) -> np.ndarray:
    """u_j = sin^2(pi (j + 1/2) / (2 nodes)): equal-weight nodes of the Beta(1/2, 1/2) (arcsine)
    prior, the Gauss-Chebyshev rule, so their mean equals the prior's expectation of every
    polynomial of degree < 2 nodes (Abramowitz & Stegun 1964, 25.4.38)."""
    return np.sin(np.pi * (np.arange(nodes) + 0.5) / (2 * nodes)) ** 2


def log_mixture_capital(x: np.ndarray, m: np.ndarray | float,
                        nodes: int = MIXTURE_NODES) -> tuple[np.ndarray, np.ndarray]:
    """log K_t^+(m) = log mean_j prod_i (1 + u_j (x_i - m) / m) and log K_t^-(m) = log mean_j prod_i
    (1 - u_j (x_i - m) / (1 - m)): every constant bet a share u of the capital can make without
    risking ruin, mixed under the Krichevsky-Trofimov prior Beta(1/2, 1/2), i.e. Cover's universal
    portfolio of cash and the asset x/m (resp. (1 - x)/(1 - m)) with the Dirichlet(1/2, 1/2)
    prior (Cover & Ordentlich 1996, Thm 2: log-regret to the best constant bet in hindsight
    <= log 2 + log(t + 1)/2; WSR 2024 §5 on mixtures of bets). A mixture of test martingales is
    one, so Ville's inequality holds with no tuned constant; the nodes (``kt_fractions``) give the
    prior's mixture exactly for t < 2 nodes and are themselves a valid discrete prior beyond."""
    u = kt_fractions(nodes)
    m = np.asarray(m, dtype=float)
    centred = np.where(np.isfinite(x)[..., None], x[..., None] - m, 0.0) if m.ndim else \
        np.where(np.isfinite(x), x - m, 0.0)
    centred = centred[..., None]  # (..., [M,] nodes)

    def mixed(bets: np.ndarray) -> np.ndarray:
        log_wealth = np.cumsum(np.log1p(bets * centred), axis=1)
        top = log_wealth.max(-1)
        return top + np.log(np.exp(log_wealth - top[..., None]).mean(-1))

    scale_up = (1.0 / m)[..., None] if m.ndim else 1.0 / m
    scale_down = (1.0 / (1.0 - m))[..., None] if m.ndim else 1.0 / (1.0 - m)
    with np.errstate(divide="ignore"):
        return mixed(u * scale_up), mixed(-u * scale_down)


def log_hedged(log_plus: np.ndarray, log_minus: np.ndarray) -> np.ndarray:
    """log max(theta K^+, (1 - theta) K^-): the hedged capital process (WSR 2024 §4.2, Thm 3);
    at most the test martingale theta K^+ + (1 - theta) K^-, so Ville's inequality bounds it."""
    return np.maximum(np.log(THETA) + log_plus, np.log(1.0 - THETA) + log_minus)


def confidence_bounds(x: np.ndarray, alpha: float, grid_size: int = 401,
                      chunk: int = 8, mixture: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Running intersection of {m : hedged K_t(m) < 1/alpha} on a grid of m in (0, 1), rounded
    outward to the next grid point (WSR 2024 §4.2, Thm 3, and §6 on running intersections): (R, N, K)
    lower and upper bounds, ``chunk`` studies at a time to bound memory; ``mixture``: the
    universal-portfolio capital (``log_mixture_capital``), else aGRAPA's."""
    grid = np.linspace(0.0, 1.0, grid_size)[1:-1]
    lower = np.empty(x.shape)
    upper = np.empty(x.shape)
    threshold = np.log(1.0 / alpha)
    for start in range(0, x.shape[0], chunk):  # memory chunks of studies, vectorised inside
        part = slice(start, start + chunk)
        if mixture:  # the nodes add an axis: the m grid in pieces of 16 to bound memory
            inside = np.concatenate([log_hedged(*log_mixture_capital(x[part], grid[g:g + 16]))
                                     < threshold for g in range(0, grid.size, 16)], axis=-1)
        else:
            inside = log_hedged(*log_capital(x[part], grid)) < threshold  # (r, N, K, G)
        any_in = inside.any(-1)
        first = np.argmax(inside, axis=-1)
        last = grid.size - 1 - np.argmax(inside[..., ::-1], axis=-1)
        low = np.where(first > 0, grid[np.maximum(first - 1, 0)], 0.0)
        high = np.where(last < grid.size - 1, grid[np.minimum(last + 1, grid.size - 1)], 1.0)
        lower[part] = np.where(any_in, low, np.nan)
        upper[part] = np.where(any_in, high, np.nan)
    return np.fmax.accumulate(lower, axis=1), np.fmin.accumulate(upper, axis=1)
