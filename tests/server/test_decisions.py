"""Rating trials read as decisions (issue 13): the highest-rated category, a recorded seeded
tie-break, one row per rating trial on an image with a true class, in the export and its codebook."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from humanlike.server.export.writer import write_export
from humanlike.server.trial_types.rating import decision_tie_seeds, splitmix64
from tests.server.conftest import enter
from tests.server.test_export import run_participant


def test_splitmix64_matches_the_reference_outputs():
    # SplitMix64 seeded with 0: the generator adds the gamma before mixing, so its first three
    # outputs are the mix of 1, 2 and 3 gammas (the reference C code's well-known first values)
    gamma = 0x9E3779B97F4A7C15
    states = np.array([0, gamma, (2 * gamma) % 2**64], dtype=np.uint64)
    assert [int(v) for v in splitmix64(states)] == [
        0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


def test_tie_seeds_depend_on_participant_and_trial_only():
    a = decision_tie_seeds(["p1", "p2", "p1"], [3, 3, 4])
    b = decision_tie_seeds(["p1"], [3])
    assert a[0] == b[0] and len(set(a.tolist())) == 3 and (a >= 0).all()


def test_the_export_has_one_decision_per_rating_trial_on_a_true_class_image(app, tmp_path):
    rng = np.random.default_rng(3)
    client = app.test_client()
    pid, token = enter(client, "PROLIFIC_PID=D1")
    _, given = run_participant(client, pid, token, rng)
    with app.app_context():
        counts = write_export("small", tmp_path)
    decisions = pd.read_csv(tmp_path / "decisions.csv")
    ratings = pd.read_csv(tmp_path / "ratings.csv")
    stimuli = pd.read_csv(tmp_path / "stimuli.csv")
    truth = stimuli.set_index("stimulus")["true_class"].astype(str)
    # every rating trial of this digit set shows an image with a true class (natural or catch)
    assert counts["decisions"] == len(given) == len(decisions)
    labels = [str(d) for d in range(10)]
    for row in decisions.itertuples():
        rated = given[row.trial_index]
        top = max(rated.values())
        tied = [label for label in labels if rated[label] == top]
        assert str(row.response) in tied and row.n_tied == len(tied) and row.top_rating == top
        assert str(row.category) == truth[row.stimulus]
        assert bool(row.correct) == (str(row.response) == str(row.category))
        # the tie-break is redrawn from the recorded seed alone
        draws = splitmix64(np.uint64(row.tie_seed) + np.arange(10, dtype=np.uint64))
        expected = max(tied, key=lambda label: int(draws[labels.index(label)]))
        assert str(row.response) == expected
    assert (decisions["n_tied"] > 1).any()  # random ratings tie often: the rule was exercised
    assert set(ratings["trial_index"]) == set(decisions["trial_index"])
    book = json.loads((tmp_path / "codebook.json").read_text())
    assert set(decisions.columns) <= set(book["decisions"])
    assert "tie_seed" in book["decisions"]["tie_seed"]


def test_ties_resolve_to_each_tied_category_about_equally_often():
    seeds = decision_tie_seeds([f"p{i}" for i in range(4000)], np.zeros(4000, dtype=int))
    draws = splitmix64(seeds.astype(np.uint64)[:, None] + np.arange(3, dtype=np.uint64)[None, :])
    counts = np.bincount(draws.argmax(axis=1), minlength=3)
    # a fair three-way tie: each count is Binomial(4000, 1/3), sd ~ 30
    assert np.all(np.abs(counts - 4000 / 3) < 5 * 30)
