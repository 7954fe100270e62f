"""Cadieu et al. (2013) Fig. 3 layout and the KA-AUC table."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from humanlike.analysis.kernel.plots import (
    auc_table,
    auc_table_markdown,
    curves_table,
    plot_ka_curves,
    save_ka_figure,
)
from humanlike.analysis.kernel.protocol import kernel_analysis_protocol


@pytest.fixture(scope="module")
def results():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 20)
    good = rng.standard_normal((60, 6)) + 2.0 * np.eye(6)[y]
    poor = rng.standard_normal((60, 6))
    return {
        "IT-like": kernel_analysis_protocol(good, y, n_subsets=4),
        "noise": kernel_analysis_protocol(poor, y, n_subsets=4),
    }


def test_figure_has_one_mean_line_and_one_min_max_band_per_representation(results):
    fig = plot_ka_curves(results)
    ax = fig.axes[0]
    assert [line.get_label().split()[0] for line in ax.get_lines()] == ["IT-like", "noise"]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2
    r = results["IT-like"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), r.curve_mean[1:])
    lows = bands[0].get_paths()[0].vertices[:, 1]
    assert lows.min() == pytest.approx(r.curve_min[1:].min())
    assert lows.max() == pytest.approx(r.curve_max[1:].max())
    assert ax.get_xscale() == "log"


def test_saved_figure_is_a_png(tmp_path, results):
    save_ka_figure(results, tmp_path / "ka.png")
    assert (tmp_path / "ka.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_auc_table_reports_mean_and_sd_over_subsets(results):
    table = auc_table(results)
    r = results["noise"]
    row = table.set_index("representation").loc["noise"]
    assert row.auc_mean == pytest.approx(np.mean(r.aucs))
    assert row.auc_sd == pytest.approx(np.std(r.aucs))
    assert row.auc == f"{np.mean(r.aucs):.3f} ({np.std(r.aucs):.3f})"
    assert (row.n_subsets, row.n_images) == (4, 48)
    markdown = auc_table_markdown(table)
    assert f"| noise | {row.auc} | 4 | 48 |" in markdown


def test_curves_table_is_long_form_with_one_row_per_representation_subset_and_d(results):
    long = curves_table(results)
    assert len(long) == 2 * 4 * 49
    one = long[(long.representation == "noise") & (long.subset == 2)]
    np.testing.assert_allclose(one.accuracy, results["noise"].curves[2])
    np.testing.assert_allclose(one.complexity, np.arange(49) / 48)
