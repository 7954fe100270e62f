"""Scales that come out reversed or non-monotone are flagged, not passed as converged, and the
MLDS figure draws every participant curve inside its axes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humanlike.analysis.mlds.batch import fit_many
from humanlike.analysis.mlds.simulate import simulate_responses
from humanlike.stimuli.mlds_design import all_triads


def _triads(psi_by_sequence: dict[str, np.ndarray], sigma: float, repeats: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    frames = []
    for name, psi in psi_by_sequence.items():
        levels = np.tile(all_triads(len(psi)), (repeats, 1))
        response = simulate_responses(levels, psi, sigma, random_state=rng)
        frames.append(pd.DataFrame({"sequence": name, "s1": levels[:, 0], "s2": levels[:, 1],
                                    "s3": levels[:, 2], "response": response}))
    return pd.concat(frames, ignore_index=True)


def test_a_reversed_observer_is_flagged_and_not_valid():
    up = np.linspace(0, 1, 7) ** 1.5
    data = _triads({"forward": up, "reversed": up[::-1].copy(), "bump": np.array(
        [0, 0.5, 0.9, 0.2, 0.6, 0.8, 1.0])}, sigma=0.1, repeats=20)
    fits = fit_many(data, by="sequence")
    table = fits.summary_frame().set_index("sequence")
    # a reversed scale fits with psi_N < 0, i.e. a negative sigma; Fisher scoring converges on it
    assert table.loc["reversed", "sigma"] < 0
    assert table.loc["reversed", "flag"] == "reversed"
    assert not table.loc["reversed", "valid"]
    assert table.loc["forward", "flag"] == ""
    assert table.loc["forward", "valid"]
    assert table.loc["bump", "flag"] == "non-monotone"
    assert "flagged" in fits.summary()


def test_the_scale_figure_keeps_every_participant_curve_inside_its_axes():
    from humanlike.analysis.mlds.plots import plot_scales

    psi = np.linspace(0, 1, 7) ** 2
    wild = np.array([0, 1.3, 1.6, 1.5, 1.4, 1.2, 1.0])  # a participant far above the pooled scale
    people = pd.concat([
        _triads({"s": psi}, 0.2, 4, seed=1).assign(participant="p1"),
        _triads({"s": wild}, 0.6, 6, seed=2).assign(participant="p2"),
    ], ignore_index=True)
    pooled = fit_many(people[people["participant"] == "p1"], by="sequence", n_resamples=50,
                      random_state=0)
    per = fit_many(people, by=["sequence", "participant"])
    fig = plot_scales(pooled, participants=per, excluded={"p2"})
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert per.converged.all()
    curves = per.scale_std
    assert curves.max() > 1.25  # the old fixed limits (-0.25, 1.25) cut this curve
    assert low <= curves.min() and high >= curves.max()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("excluded" in label for label in labels)


def test_a_random_mlds_responder_is_uninformative_and_does_not_set_the_axis():
    """Four observers of a known scale and one who answers every triad by a coin flip: the coin
    flipper's scale is flagged uninformative (no better than a flat scale by likelihood ratio),
    drawn faint, and the y axis stays on the pooled scales' range."""
    from scipy import stats

    from humanlike.analysis.mlds.analysis import analyze_mlds
    from humanlike.analysis.mlds.plots import plot_scales

    psi = np.linspace(0, 1, 7) ** 1.5
    people = [_triads({"s": psi}, 0.15, 3, seed=k).assign(participant=f"p{k}") for k in range(4)]
    coin = _triads({"s": psi}, 0.15, 3, seed=9).assign(participant="coin")
    coin["response"] = np.random.default_rng(3).integers(0, 2, len(coin))
    data = pd.concat([*people, coin], ignore_index=True)
    result = analyze_mlds(data, n_resamples=100, random_state=0)
    per = result.per_participant.summary_frame().set_index("participant")
    assert per.loc["coin", "converged"] and not per.loc["coin", "informative"]
    assert per.loc["coin", "informative_reason"].startswith("no better than a flat scale")
    assert per.drop(index="coin")["informative"].all()
    # the likelihood ratio against p = 1/2 on every triad, recomputed from the responses
    n = len(coin)
    assert per.loc["coin", "lr_flat"] == pytest.approx(
        2 * (per.loc["coin", "loglik"] - n * np.log(0.5)))
    assert per.loc["coin", "p_flat"] == pytest.approx(
        stats.chi2.sf(per.loc["coin", "lr_flat"], 6))
    coin_scale = result.per_participant.scale_std[list(per.index).index("coin")]
    fig = plot_scales(result.pooled, participants=result.per_participant)
    low, high = fig.axes[0].get_ylim()
    pooled = np.r_[result.pooled.ci.low.ravel(), result.pooled.ci.high.ravel()]
    assert low <= np.nanmin(pooled) and high >= np.nanmax(pooled)
    assert high - low < 1.6  # the pooled range and the informative participants, padded
    assert coin_scale.min() < low or coin_scale.max() > high  # it would have set the axis
    assert "uninformative" in " ".join(t.get_text() for t in fig.legends[0].get_texts())
