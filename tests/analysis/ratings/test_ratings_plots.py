"""Figures of the rating analysis: the Golan et al. Fig. 4 layout and the QC plots."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.container import BarContainer

from humanlike.analysis.ratings.bootstrap import bootstrap_ratings
from humanlike.analysis.ratings.data import clean_ratings, rating_array
from humanlike.analysis.ratings.plots import (
    plot_model_scores,
    plot_repeat_reliability,
    plot_rt_histograms,
)
from humanlike.analysis.ratings.scores import model_predictions
from humanlike.analysis.ratings.simulation import simulate_rating_experiment


@pytest.fixture(scope="module")
def analysed():
    sim = simulate_rating_experiment(
        n_participants=8, n_natural=8, n_per_pair=3, n_models=4, n_categories=5, random_state=60
    )
    cleaned = clean_ratings(sim.ratings)
    ratings = rating_array(cleaned)
    result = bootstrap_ratings(
        ratings, model_predictions(sim.models, ratings), n_resamples=1000, random_state=0
    )
    return cleaned, result


def test_score_figure_has_a_bar_per_model_the_lower_bound_and_a_dot_per_participant(analysed):
    _, result = analysed
    fig = plot_model_scores(result, "all")
    ax = fig.axes[0]
    bars = [bar for c in ax.containers if isinstance(c, BarContainer) for bar in c.patches]
    heights = sorted(round(bar.get_height(), 12) for bar in bars if bar.get_height() > 0)
    scores = result.scores.query("subset == 'all' and metric == 'pearson_r'")["estimate"]
    lower = result.ceilings.query("subset == 'all' and metric == 'pearson_r' and bound == 'lower'")
    expected = sorted(round(v, 12) for v in [*scores, lower["estimate"].iloc[0]])
    assert heights == expected
    dots = [c for c in ax.collections if c.get_offsets().shape[0] == 8]
    assert len(dots) == 1  # one dot per participant
    upper = result.ceilings.query("subset == 'all' and metric == 'pearson_r' and bound == 'upper'")
    assert any(np.allclose(line.get_ydata(), upper["estimate"].iloc[0]) for line in ax.lines)
    n_brackets = int(
        result.comparisons.query(
            "subset == 'all' and metric == 'pearson_r' and comparison == 'model vs model'"
        )["significant"].sum()
    )
    assert sum(line.get_gid() == "significance-bracket" for line in ax.lines) == n_brackets
    assert n_brackets > 0
    plt.close(fig)


def test_mse_figure_puts_the_lowest_error_first(analysed):
    _, result = analysed
    fig = plot_model_scores(result, "natural", "mse")
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()][:-1]
    mse = result.scores.query("subset == 'natural' and metric == 'mse'").sort_values("estimate")
    assert labels == mse["model"].tolist()
    plt.close(fig)


def test_qc_figures_render(analysed, tmp_path):
    cleaned, _ = analysed
    for fig in (plot_repeat_reliability(cleaned), plot_rt_histograms(cleaned)):
        path = tmp_path / "figure.png"
        fig.savefig(path)
        assert path.stat().st_size > 5_000
        plt.close(fig)


def test_unknown_subset_is_rejected(analysed):
    with pytest.raises(ValueError, match="subset 'odd'"):
        plot_model_scores(analysed[1], "odd")
