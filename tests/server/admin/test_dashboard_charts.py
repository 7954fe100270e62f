"""The dashboard's small SVG charts: round ticks, every value counted, coordinates inside the box."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from humanlike.server.admin.charts import PAD, H, W, histogram, nice_step


@pytest.mark.parametrize("hi, step", [(108, 50), (1289, 500), (3.2, 1), (47, 20), (2500, 1000),
                                      (0.9, 0.25)])
def test_nice_step_is_a_round_number_giving_at_most_four_steps(hi, step):
    assert nice_step(hi) == pytest.approx(step)
    assert hi / nice_step(hi) <= 4


def test_rt_histogram_counts_every_trial_on_round_ticks():
    rng = np.random.default_rng(0)
    rts = np.concatenate([rng.lognormal(6.5, 0.4, 500), [np.nan, 60_000.0]])
    chart = histogram(rts)
    labels = [float(text) for _, text in chart.x_ticks]
    assert labels[0] == 0 and all(b - a == labels[1] - labels[0] for a, b in itertools.pairwise(labels))
    assert labels[1] in {100, 200, 250, 500, 1000}
    assert chart.x_ticks[0][0] == PAD and chart.x_ticks[-1][0] == pytest.approx(W - 8)
    heights = np.array([b[3] for b in chart.bars])
    assert heights.max() == pytest.approx(H - PAD - 8) and (heights >= 0).all()
    assert chart.y_ticks[-1][1] == str(int(np.histogram(
        np.clip(rts[np.isfinite(rts)], 0, labels[-1]), bins=30, range=(0, labels[-1]))[0].max()))
