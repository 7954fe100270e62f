"""Request bodies of the participant API: one JSON policy for every body (``parse_json``), then
pydantic models (strict types, no extras); each trial type checks its own ``response``
(``trial_types``)."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from humanlike.server.trial_types.registry import check_trial_type

MAX_DEPTH = 32


class JSONPolicyError(ValueError):
    """A body that is JSON to Python but that the API refuses: ``error`` names the rule broken."""

    def __init__(self, error: str, detail: str):
        super().__init__(detail)
        self.error, self.detail = error, detail


def _reject_constant(name: str) -> Any:
    raise JSONPolicyError("non_finite_number", f"{name} is not a JSON number; send finite numbers only")


def _check_string(text: str, where: str) -> None:
    if text.isascii():
        if "\x00" in text:
            raise JSONPolicyError("nul_character", f"NUL (\\u0000) is not allowed ({where})")
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JSONPolicyError("lone_surrogate", f"a lone UTF-16 surrogate is not text ({where})") from None
    if "\x00" in text:
        raise JSONPolicyError("nul_character", f"NUL (\\u0000) is not allowed ({where})")


def _check_value(value: Any, depth: int) -> None:
    if isinstance(value, str):
        _check_string(value, "in a string")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise JSONPolicyError("non_finite_number", "numbers must be finite (this one overflows)")
    elif isinstance(value, (dict, list)):
        if depth >= MAX_DEPTH:
            raise JSONPolicyError("too_deep", f"JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_string(key, "in a key")
                _check_value(item, depth + 1)
        else:
            for item in value:
                _check_value(item, depth + 1)


def parse_json(raw: bytes) -> Any:
    """The JSON value in ``raw``, refusing what the databases cannot store or a browser never sends:
    NUL characters, lone surrogates, non-finite numbers (NaN, Infinity, overflows) and nesting
    deeper than ``MAX_DEPTH``; malformed JSON raises ``ValueError``, the rest ``JSONPolicyError``."""
    if b"\x00" in raw:
        raise JSONPolicyError("nul_character", "a NUL byte is not allowed in the body")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise JSONPolicyError("too_deep", f"JSON nested deeper than {MAX_DEPTH} levels") from None
    _check_value(value, 0)
    return value

Ms = Annotated[float, Field(ge=0, le=24 * 3600 * 1000)]


class TrialIn(BaseModel):
    """One finished trial as the browser sends it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    trial_index: Annotated[int, Field(ge=0)]
    trial_type: Annotated[str, AfterValidator(check_trial_type)]
    response: dict[str, Any]
    rt_ms: Ms | None = None
    first_rt_ms: Ms | None = None
    presented_ms: Ms | None = None
    frames: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    client_time: Annotated[float, Field(ge=0)] | None = None
    attempt: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    """The block attempt the trial was answered in (the timeline's ``attempt`` when it was
    answered); a page from before the resume policy's first restart sends none (0)."""


Count = Annotated[int, Field(ge=0)]


class InputEventValue(BaseModel):
    """The value of an ``input`` event: the page's input counts since its previous one
    (``static/js/provenance.js``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    trusted: Count
    untrusted: Count
    pointer_moves: Count
    clicks: Count
    clicks_without_move: Count
    pastes: Count
    webdriver: bool


def _input_schema(schema: dict[str, Any]) -> None:
    """JSON Schema's own words for ``EventIn._input_counts``: an ``input`` event's value is an
    ``InputEventValue`` (so the OpenAPI document says what the server accepts)."""
    value = InputEventValue.model_json_schema()
    schema["if"] = {"properties": {"type": {"const": "input"}}, "required": ["type"]}
    schema["then"] = {"properties": {"value": value}, "required": ["value"]}


class EventIn(BaseModel):
    """A browser event; ``environment`` carries screen size and the measured refresh rate,
    ``input`` the input counts (``InputEventValue``)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_input_schema)
    type: Literal[
        "blur", "focus", "fullscreen_enter", "fullscreen_exit", "resize", "error",
        "environment", "visibility", "offline", "online", "resume", "input",
    ]
    value: dict[str, Any] | str | float | int | None = Field(default=None, validate_default=True)
    client_time: Annotated[float, Field(ge=0)] | None = None

    @field_validator("value")
    @classmethod
    def _input_counts(cls, value: Any, info: ValidationInfo) -> Any:
        """An ``input`` event's value is an ``InputEventValue`` (errors name ``value.<field>``)."""
        if info.data.get("type") == "input":
            InputEventValue.model_validate(value)
        return value


class ConsentIn(BaseModel):
    """The participant's answer on the consent page."""

    model_config = ConfigDict(extra="forbid", strict=True)
    agree: bool


class CompleteIn(BaseModel):
    """The (empty) body of a completion request."""

    model_config = ConfigDict(extra="forbid", strict=True)
