"""A replication's design hash and equivalence tests, on small hand-made inputs: the hash ignores
only what names or recruits a study; the TOST p-value is the larger of two one-sided Welch
t-tests (scipy, independently of statsmodels) and the verdicts follow the two tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from humanlike.analysis.psychds.replication import design_hash, withheld_keys
from humanlike.analysis.report.replication import equivalence_tests

SPEC = {"slug": "a", "title": "T", "platform": {"preset": "sona", "participant_param": "id"},
        "completion": {"mturk_sandbox": True, "prolific_code": "C0DE"},
        "blocks": [{"name": "b", "prompt": "Rate https://x.org/p?token=1 now"}]}
TEXTS = {"consent": "<p>yes</p>", "instructions": "<p>go</p>"}
ROWS = [{"key": "1.png", "kind": "natural", "true_class": "1", "sha256": "0" * 64, "meta": {}},
        {"key": "2.png", "kind": "natural", "true_class": "2", "sha256": "1" * 64, "meta": {}}]


def test_the_design_hash_ignores_the_slug_platform_and_completion_only():
    base = design_hash(SPEC, TEXTS, ROWS)
    other = {**SPEC, "slug": "b", "platform": "local", "completion": {},
             "replication": {"package": "original"}}
    assert design_hash(other, TEXTS, ROWS) == base
    prompt = {**SPEC, "blocks": [{"name": "b", "prompt": "Rate"}]}
    assert design_hash(prompt, TEXTS, ROWS) != base
    assert design_hash(SPEC, {**TEXTS, "consent": "<p>no</p>"}, ROWS) != base
    assert design_hash(SPEC, TEXTS, ROWS[::-1]) != base  # the manifest's order sets timelines
    # the URL's query is not published, so the hash (computable from the package) leaves it out
    query = {**SPEC, "blocks": [{"name": "b", "prompt": "Rate https://x.org/p?token=2 now"}]}
    assert design_hash(query, TEXTS, ROWS) == base
    assert withheld_keys(SPEC, {"slug": "a", "title": "T", "platform": {"preset": "sona"},
                                "completion": {"mturk_sandbox": True}, "blocks": []}) == [
        "platform.participant_param", "completion.prolific_code"]


def _values(x: np.ndarray) -> dict[tuple[str, str], pd.DataFrame]:
    return {("all", "pearson_r"): pd.DataFrame({"m": x, "lower": x + 0.05})}


def test_tost_is_two_one_sided_welch_tests_and_the_verdicts_follow_them():
    rng = np.random.default_rng(7)
    original = rng.normal(0.6, 0.1, 30)
    same = rng.normal(0.6, 0.12, 25)
    tests = equivalence_tests(_values(original), _values(same), {"pearson_r": 0.1}, 0.05)
    assert list(tests["kind"]) == ["score", "score", "model vs lower bound"]
    row = tests.iloc[0]
    greater = stats.ttest_ind(same + 0.1, original, equal_var=False, alternative="greater")
    less = stats.ttest_ind(same - 0.1, original, equal_var=False, alternative="less")
    assert row["p_tost"] == pytest.approx(max(greater.pvalue, less.pvalue), rel=1e-9)
    assert row["p_difference"] == pytest.approx(
        stats.ttest_ind(same, original, equal_var=False).pvalue, rel=1e-9)
    assert row["verdict"] == "equivalent" and row["ci_low"] > -0.1 and row["ci_high"] < 0.1
    assert tests.iloc[2]["difference"] == pytest.approx(-0.05 - -0.05)  # m - lower, both studies
    shifted = equivalence_tests(_values(original), _values(same + 0.3), {"pearson_r": 0.1}, 0.05)
    assert shifted.iloc[0]["verdict"] == "different"
    small = equivalence_tests(_values(original), _values(same[:3]), {"pearson_r": 0.05}, 0.05)
    assert small.iloc[0]["verdict"] == "inconclusive"
    near = equivalence_tests(_values(original), _values(same + 0.04), {"pearson_r": 0.2}, 0.05)
    assert near.iloc[0]["verdict"] == "equivalent, differs"
    keyed = equivalence_tests(_values(original), _values(same),
                              {("all", "pearson_r", "m", ""): 0.001}, 0.05)
    assert keyed.iloc[0]["verdict"] == "inconclusive"  # a per-row bound wins over none
    assert keyed.iloc[1]["verdict"] == "not testable"  # no bound for 'lower'
