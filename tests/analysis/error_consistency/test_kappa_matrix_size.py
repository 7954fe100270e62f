"""The kappa matrix of a large study stays a figure a browser opens: at 300 observers (a fifth of
them at 100% accuracy, so over 16,000 undefined pairs) the panel's and the report's SVG is small and
quick to draw; a small matrix keeps its per-observer labels and crosses."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from humanlike.analysis.error_consistency.matrix import kappa_matrix
from humanlike.analysis.error_consistency.plots import plot_kappa_matrix
from humanlike.analysis.figures import to_svg


def matrix_of(n: int, n_stimuli: int = 60):
    """Kappa of ``n`` simulated observers (the first fifth always correct: kappa undefined)."""
    rng = np.random.default_rng(0)
    accuracy = rng.uniform(0.5, 0.95, n)
    accuracy[: n // 5] = 1.0
    correct = rng.random((n, n_stimuli)) < accuracy[:, None]
    frame = pd.DataFrame({
        "observer": np.repeat([f"p{i:04d}" for i in range(n)], n_stimuli),
        "stimulus": np.tile([f"s{j}" for j in range(n_stimuli)], n),
        "correct": correct.ravel(), "group": "human", "condition": "c", "experiment": "e"})
    return kappa_matrix(frame, observer="observer", stimulus="stimulus", correct="correct",
                        group="group", condition="condition", experiment="experiment",
                        n_resamples=0)


def test_a_300_observer_matrix_is_a_light_svg_drawn_in_seconds():
    result = matrix_of(300)
    undefined = int(np.isnan(result.matrix("e").to_numpy()).sum()) - 300
    assert undefined >= 300 * 299 - 240 * 239  # every pair with one of the 60 perfect observers
    start = time.perf_counter()
    svg = to_svg(plot_kappa_matrix(result, "e"))
    seconds = time.perf_counter() - start
    assert len(svg.encode()) < 400_000, len(svg)  # was 14 MB (one marker per undefined cell)
    assert seconds < 30, seconds  # was 534 s (and the matrix itself 350 s: a .loc per pair)
    assert svg.count("<image") == 2  # the cells and the colour bar: images, not 90,000 shapes
    assert "p0150" not in svg  # no 300 tick labels: the axes name the observers' range


def test_a_small_matrix_keeps_its_labels_and_crosses():
    svg = to_svg(plot_kappa_matrix(matrix_of(10), "e"))
    assert all(f"p{i:04d}" in svg for i in range(10))
    assert svg.count('id="m') >= 1 and len(svg.encode()) < 200_000


def test_a_matrix_over_max_cells_is_drawn_as_block_means(monkeypatch):
    from humanlike.analysis.error_consistency import plots

    monkeypatch.setattr(plots, "MAX_CELLS", 2)
    values = np.array([[np.nan, 0.2, 0.4, np.nan, 0.1],
                       [0.2, np.nan, 0.6, np.nan, 0.3],
                       [0.4, 0.6, np.nan, np.nan, np.nan],
                       [np.nan, np.nan, np.nan, np.nan, np.nan],
                       [0.1, 0.3, np.nan, np.nan, np.nan]])
    shown, block = plots._blocks(values)
    assert block == 3  # 5 observers in at most 2 cells a side: blocks of 3
    np.testing.assert_allclose(shown, [[(0.2 * 2 + 0.4 * 2 + 0.6 * 2) / 6, (0.1 + 0.3) / 2],
                                       [(0.1 + 0.3) / 2, np.nan]])
