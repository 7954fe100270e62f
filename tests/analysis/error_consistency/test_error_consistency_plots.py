"""Error-consistency figures draw what they claim to draw."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.image import imread

from humanlike.analysis.error_consistency import kappa_matrix
from humanlike.analysis.error_consistency import plots as ec_plots


@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(0)
    rows = []
    latent = rng.random(120) < 0.7
    observers = [(f"h{i}", "human", 0.6) for i in range(4)] + [
        ("m1", "model", 0.3),
        ("m2", "model", 0.0),
    ]
    for name, group, p_copy in observers:
        own = rng.random(120) < 0.7
        values = np.where(rng.random(120) < p_copy, latent, own)
        rows += [
            {"observer": name, "group": group, "stimulus": s, "correct": bool(v)}
            for s, v in enumerate(values)
        ]
    return kappa_matrix(pd.DataFrame(rows), group="group", n_resamples=200, random_state=0)


def _saved(fig, path: Path) -> np.ndarray:
    fig.savefig(path)
    plt.close(fig)
    return imread(path)


def test_heatmap_orders_humans_before_models_and_masks_the_diagonal(result, tmp_path):
    fig = ec_plots.plot_kappa_matrix(result)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["h0", "h1", "h2", "h3", "m1", "m2"]
    image = ax.images[0].get_array()
    assert image.shape == (6, 6) and image.mask.diagonal().all()
    assert _saved(fig, tmp_path / "m.png").shape[0] > 100


def test_scatter_shows_every_pair_with_bounds_and_null_band(result, tmp_path):
    fig = ec_plots.plot_consistency_scatter(result.pairs)
    ax = fig.axes[0]
    points = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    assert points == len(result.pairs) == 15
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("independent (n=120)" in t for t in legend)
    _saved(fig, tmp_path / "s.png")


def test_scatter_refuses_an_empty_pair_table():
    with pytest.raises(ValueError, match="empty"):
        ec_plots.plot_consistency_scatter(pd.DataFrame(columns=["c_exp", "c_obs", "n"]))


def test_ec_per_model_draws_one_error_bar_per_model_and_the_ceiling(result, tmp_path):
    fig = ec_plots.plot_ec_per_model(result)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["m1", "m2"]
    ceiling = result.ceiling()
    assert any(np.allclose(line.get_ydata(), ceiling) for line in ax.get_lines())
    _saved(fig, tmp_path / "e.png")


def test_ci_width_plot_marks_the_trials_needed(tmp_path):
    fig = ec_plots.plot_ci_width(
        0.3, 0.8, 0.6, [50, 200, 800], target_halfwidth=0.1, n_sim=300, random_state=0
    )
    texts = [t.get_text() for t in fig.axes[0].texts]
    from humanlike.analysis.error_consistency import trials_needed

    assert texts == [f"n = {trials_needed(0.3, 0.8, 0.6, 0.1)}"]
    _saved(fig, tmp_path / "w.png")


def test_simulated_points_on_the_width_plot_shrink_with_more_trials():
    fig = ec_plots.plot_ci_width(0.3, 0.8, 0.6, [50, 5000], n_sim=300, random_state=0)
    sim = next(line for line in fig.axes[0].get_lines() if line.get_marker() == "o")
    y = sim.get_ydata()
    assert y[1] < y[0] / 5
    plt.close(fig)


def test_an_undefined_kappa_is_drawn_grey_with_a_cross_not_as_zero():
    from matplotlib.lines import Line2D

    from humanlike.analysis.error_consistency import kappa_matrix
    from humanlike.analysis.error_consistency.plots import plot_kappa_matrix
    from humanlike.analysis.figures import caption
    from tests.analysis.error_consistency.test_error_consistency_matrix import (
        _perfect_model_trials,
    )

    result = kappa_matrix(_perfect_model_trials(), group="group")
    fig = plot_kappa_matrix(result)
    ax = fig.axes[0]
    crosses = [line for line in ax.get_lines() if isinstance(line, Line2D)
               and line.get_marker() == "x"]
    # h4 and cnn are right on every trial: their pairs with everyone (4 + 3, both ways) are undefined
    assert len(crosses) == 2 * 7
    assert len(ax.texts) == 2 * 3  # numbers only for the three defined (human) pairs
    assert "Grey with a cross: 7 pair(s) whose kappa is undefined" in caption(fig)


def test_a_pair_with_too_few_errors_is_starred_in_the_matrix():
    from humanlike.analysis.error_consistency.plots import plot_kappa_matrix
    from humanlike.analysis.figures import caption
    from tests.analysis.error_consistency.test_error_consistency_matrix import (
        _perfect_model_trials,
    )

    result = kappa_matrix(_perfect_model_trials(), group="group", n_resamples=200, random_state=0)
    pairs = result.pairs
    wide = pairs[pairs["informative"] & ((pairs["ci_high"] - pairs["ci_low"]) / 2 > 0.2)]
    assert len(wide)  # 30 stimuli at 60-80% accuracy: CIs of about +-0.3
    fig = plot_kappa_matrix(result)
    starred = [t.get_text() for t in fig.axes[0].texts if t.get_text().endswith("*")]
    assert len(starred) == 2 * len(wide)
    assert f"*: {len(wide)} pair(s) with too few errors to compare" in caption(fig)
