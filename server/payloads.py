"""Request bodies of the participant API, validated with pydantic (strict types, no extras); each
trial type checks its own ``response`` (``trial_types``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from humanlike.server.trial_types import check_trial_type

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


class EventIn(BaseModel):
    """A browser event; ``environment`` carries screen size and the measured refresh rate."""

    model_config = ConfigDict(extra="forbid", strict=True)
    type: Literal[
        "blur", "focus", "fullscreen_enter", "fullscreen_exit", "resize", "error",
        "environment", "visibility", "offline", "online", "resume",
    ]
    value: dict[str, Any] | str | float | int | None = None
    client_time: Annotated[float, Field(ge=0)] | None = None
