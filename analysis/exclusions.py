"""Exclusion rules, one definition shared by the experiment spec, the export and the analysis.

The spec's ``[exclusion]`` table, the export's QC and :func:`humanlike.analysis.ratings.participant_qc`
all read :class:`ExclusionRules`; every rule has one name. ``min_rt_ms``, the spec's old name of
``min_trial_rt_ms``, is still accepted (deprecated) so existing experiment files and stored specs load.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

#: Deprecated rule names and the names that replaced them.
DEPRECATED_RULE_NAMES = {"min_rt_ms": "min_trial_rt_ms"}

_SWITCHES = frozenset({"analyse_partial_data", "analyse_simulated", "exclude_authenticity_flagged"})
"""Rules that are on/off switches, not thresholds."""

_Share = Annotated[float, Field(ge=0, le=1)]
_NonNegative = Annotated[float, Field(ge=0)]


class ExclusionRules(BaseModel):
    """Trial cleaning threshold and participant exclusion rules (``None`` switches a rule off).

    A trial faster than ``min_trial_rt_ms`` counts as missing; a participant failing any other rule
    is excluded, with the rule as the reason.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_trial_rt_ms: _NonNegative | None = 100.0
    min_natural_accuracy: _Share | None = None
    min_catch_accuracy: _Share | None = None
    min_repeat_reliability: Annotated[float, Field(ge=-1, le=1)] | None = None
    max_all_zero_share: _Share | None = None
    max_identical_run_share: _Share | None = None
    min_median_rt_ms: _NonNegative | None = None
    max_median_rt_ms: _NonNegative | None = None
    min_completion_s: _NonNegative | None = None
    max_completion_s: _NonNegative | None = None
    analyse_partial_data: bool = False
    """Analyse participants who returned, timed out or quit early (their consent must allow it);
    by default they are out of every analysis (``humanlike.analysis.sample``)."""
    analyse_simulated: bool = False
    """Analyse simulated participants (a rehearsal such as the demo: ``humanlike simulate``, which
    the server records at arrival); by default they are out of every analysis."""
    exclude_authenticity_flagged: bool = False
    """Exclude from the analyses the participants the authenticity screen flags (docs/authenticity.md);
    off by default: the verdict informs, the researcher decides. It never touches payment."""

    @model_validator(mode="before")
    @classmethod
    def _deprecated_names(cls, data: Any) -> Any:
        """Rename deprecated keys (``min_rt_ms``) with a ``DeprecationWarning``."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        for old, new in DEPRECATED_RULE_NAMES.items():
            if old in data:
                if new in data:
                    raise ValueError(f"give {new!r} or its deprecated name {old!r}, not both")
                warnings.warn(
                    f"exclusion rule {old!r} is deprecated; call it {new!r}",
                    DeprecationWarning,
                    stacklevel=2,
                )
                data[new] = data.pop(old)
        return data

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object] | None) -> ExclusionRules:
        """Rules from a plain dict; unknown keys and non-numeric values raise ``ValueError``."""
        if mapping is None:
            return cls()
        names = set(cls.model_fields)
        unknown = sorted(set(mapping) - names - set(DEPRECATED_RULE_NAMES))
        if unknown:
            raise ValueError(f"unknown exclusion rule(s) {unknown}; known rules: {sorted(names)}")
        values: dict[str, float | bool | None] = {}
        for key, value in mapping.items():
            if key in _SWITCHES:
                if not isinstance(value, bool):
                    raise ValueError(f"exclusion switch {key!r} must be true or false, got {value!r}")
                values[key] = value
                continue
            if value is None:
                values[key] = None
                continue
            try:
                values[key] = float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise ValueError(
                    f"exclusion rule {key!r} must be a number, got {value!r}"
                ) from None
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'rules'}: {e['msg']}" for e in error.errors()
            )
            raise ValueError(f"bad exclusion rule(s): {problems}") from None

    def active(self) -> dict[str, float]:
        """The threshold rules that are on (not ``None``), in declaration order (switches such as
        ``analyse_partial_data`` are not thresholds and not listed)."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k not in _SWITCHES}


def as_rules(rules: ExclusionRules | Mapping[str, object] | None) -> ExclusionRules:
    """Accept an :class:`ExclusionRules`, a plain mapping or ``None`` (defaults)."""
    if isinstance(rules, ExclusionRules):
        return rules
    return ExclusionRules.from_mapping(rules)
