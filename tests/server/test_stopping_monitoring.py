"""The stopping indicator's ``comparisons_decided`` under the declared monitoring: "met" exactly when
``analysis.sequential.decide`` decides every pair on the per-participant score differences, only at
the declared looks under fixed_n and group_sequential, with the guarantee said; the participants
still needed are not promised for an undecided pair."""

from __future__ import annotations

import numpy as np
import pytest

from humanlike.analysis.sequential import decide
from humanlike.analysis.sequential.monitored import monitored_pairs as sequential_section
from humanlike.server.live.stopping import evaluate

MODELS = ["a", "b", "c"]
PAIRS = [("a", "b"), ("a", "c"), ("b", "c")]


def scores(n: int, means: list[float], seed: int) -> np.ndarray:
    """models x participants Pearson r: each model's mean plus participant noise (sd 0.1)."""
    rng = np.random.default_rng(seed)
    return np.clip(np.asarray(means)[:, None] + rng.normal(0, 0.1, (len(means), n)), -1, 1)


def panel(r: np.ndarray, stopping: dict) -> dict:
    section = sequential_section(r, MODELS, PAIRS, stopping)
    comparisons = [{"subset": "all", "a": p["a"], "b": p["b"], "difference": p["difference"],
                    "ci_low": p["difference"] - 0.05, "ci_high": p["difference"] + 0.05}
                   for p in section["pairs"]]
    return {"sequential": section, "comparisons": comparisons, "n_participants": r.shape[1]}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [5, 12, 40])
def test_continuous_met_is_the_e_process_decision_on_every_pair(seed, n):
    r = scores(n, [0.6, 0.5, 0.4], seed)
    stopping = {"measure": "comparisons_decided", "alpha": 0.05}
    state = evaluate(stopping, panel(r, stopping))
    d = np.stack([r[0] - r[1], r[0] - r[2], r[1] - r[2]], axis=1)
    expected = decide(d, "continuous", 0.05)
    assert state["met"] == bool(expected.met())
    assert state["value"] == f"{int(expected.decided.sum())} of 3 decided"
    assert state["scheme"] == "continuous" and "at any number of looks" in state["guarantee"]
    if not state["met"]:
        assert state["still_needed"] is None and "not promised" in state["projection"]


def test_the_declared_continuous_test_is_the_one_that_decides():
    r = scores(30, [0.6, 0.5, 0.4], 1)
    d = np.stack([r[0] - r[1], r[0] - r[2], r[1] - r[2]], axis=1)
    for test in ("betting_mixture", "betting", "safe_t"):
        stopping = {"measure": "comparisons_decided", "alpha": 0.05, "test": test}
        section = sequential_section(r, MODELS, PAIRS, stopping)
        expected = decide(d, "continuous", 0.05, method=test)
        assert [p["decided_at"] for p in section["pairs"]] == [
            int(a) if ok else None for a, ok in zip(expected.decided_at, expected.decided)]
        assert ("safe t-test" in section["guarantee"]) == (test == "safe_t")
    # the two tests decide differently here (else this test could not tell them apart)
    betting = decide(d, "continuous", 0.05, method="betting")
    safe = decide(d, "continuous", 0.05, method="safe_t")
    assert not np.array_equal(betting.decided_at, safe.decided_at)


def test_a_difference_the_one_look_t_test_calls_significant_is_not_met_without_the_evidence():
    """Eight participants whose differences are all about +0.05: the fixed-N t-test would reject
    (Holm-Sidak), the anytime-valid e-process cannot yet (its evidence grows with n, Ville's
    bound needs e >= K / alpha): the panel says "not met", as the declared scheme does."""
    rng = np.random.default_rng(3)
    base = rng.normal(0.5, 0.05, 8)
    r = np.stack([base + 0.1, base + 0.05 + rng.normal(0, 0.01, 8), base + rng.normal(0, 0.01, 8)])
    d = np.stack([r[0] - r[1], r[0] - r[2], r[1] - r[2]], axis=1)
    assert decide(d, "fixed_n", 0.05).met()  # what the per-look test would have said
    stopping = {"measure": "comparisons_decided", "alpha": 0.05}
    state = evaluate(stopping, panel(r, stopping))
    assert state["met"] is False and state["value"] == "0 of 3 decided"


def test_fixed_n_decides_only_at_its_declared_look():
    r = scores(30, [0.8, 0.4, 0.0], 1)
    stopping = {"measure": "comparisons_decided", "alpha": 0.05, "monitoring": "fixed_n",
                "looks": [20]}
    early = evaluate(stopping, panel(r[:, :19], stopping))
    assert early["met"] is False and "N = 20" in early["note"]
    at = evaluate(stopping, panel(r[:, :20], stopping))
    assert at["met"] is True and "one declared look N = 20" in at["guarantee"]
    later = evaluate(stopping, panel(r, stopping))  # the look is at 20, whatever came after
    d = np.stack([r[0, :20] - r[1, :20], r[0, :20] - r[2, :20], r[1, :20] - r[2, :20]], axis=1)
    assert later["met"] == bool(decide(d, "fixed_n", 0.05).met())


def test_group_sequential_uses_only_the_looks_reached():
    r = scores(25, [0.7, 0.5, 0.3], 2)
    stopping = {"measure": "comparisons_decided", "alpha": 0.05,
                "monitoring": "group_sequential", "looks": [10, 20, 40]}
    section = sequential_section(r, MODELS, PAIRS, stopping)
    padded = np.full((40, 3), np.nan)
    padded[:25] = np.stack([r[0] - r[1], r[0] - r[2], r[1] - r[2]], axis=1)
    expected = decide(padded, "group_sequential", 0.05, looks=[10, 20, 40])
    assert [p["decided"] for p in section["pairs"]] == list(expected.decided)
    assert all(p["decided_at"] in (None, 10, 20) for p in section["pairs"])
    assert "3 declared looks" in section["guarantee"]
