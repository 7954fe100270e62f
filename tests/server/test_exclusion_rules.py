"""One ExclusionRules for spec, export and analysis; the spec's old `min_rt_ms` still loads."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.server.study.spec import ExperimentSpec


def test_min_rt_ms_is_a_deprecated_alias_of_min_trial_rt_ms():
    with pytest.warns(DeprecationWarning, match="min_trial_rt_ms"):
        rules = ExclusionRules.from_mapping({"min_rt_ms": 250})
    assert rules.min_trial_rt_ms == 250
    with pytest.raises(ValueError, match="not both"):
        ExclusionRules.from_mapping({"min_rt_ms": 250, "min_trial_rt_ms": 100})


def test_the_spec_exclusion_table_is_the_analysis_rules():
    base = {"slug": "x", "title": "X", "consent": "c.md", "instructions": "i.md",
            "manifest": "m.csv", "blocks": [{"name": "b", "trial_type": "triad", "kinds": ["mlds"]}]}  # fmt: skip
    spec = ExperimentSpec.model_validate({**base, "exclusion": {"min_trial_rt_ms": 150}})
    assert isinstance(spec.exclusion, ExclusionRules) and spec.exclusion.min_trial_rt_ms == 150
    with pytest.warns(DeprecationWarning):
        old = ExperimentSpec.model_validate({**base, "exclusion": {"min_rt_ms": 150}})
    assert old.exclusion == spec.exclusion
    with pytest.raises(ValidationError, match="min_catch_acuracy"):
        ExperimentSpec.model_validate({**base, "exclusion": {"min_catch_acuracy": 0.5}})


def test_rules_out_of_range_are_rejected():
    with pytest.raises(ValueError, match="min_natural_accuracy"):
        ExclusionRules.from_mapping({"min_natural_accuracy": 1.5})
