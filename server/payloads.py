"""Request bodies of the participant API, validated with pydantic (strict types, no extras)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RATING_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
Ms = Annotated[float, Field(ge=0, le=24 * 3600 * 1000)]


class TrialIn(BaseModel):
    """One finished trial as the browser sends it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    trial_index: Annotated[int, Field(ge=0)]
    trial_type: Literal["rating", "triad", "classification", "debrief"]
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
        "environment", "visibility",
    ]
    value: dict[str, Any] | str | float | int | None = None
    client_time: Annotated[float, Field(ge=0)] | None = None


def validate_response(trial_type: str, response: dict[str, Any], labels: list[str]) -> str | None:
    """Return what is wrong with a trial's ``response`` for its type, or None when it is valid."""
    if trial_type == "rating":
        ratings = response.get("ratings")
        if not isinstance(ratings, dict):
            return "response.ratings must be an object mapping each category label to a level"
        if set(ratings) != set(labels):
            return f"response.ratings must have exactly the categories {labels}"
        for label, value in ratings.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) not in RATING_LEVELS:
                return f"response.ratings[{label!r}] must be one of {list(RATING_LEVELS)}"
    elif trial_type == "triad":
        if response.get("choice") not in ("left", "right"):
            return "response.choice must be 'left' or 'right'"
    elif trial_type == "classification":
        if response.get("choice") not in labels:
            return f"response.choice must be one of {labels}"
    elif trial_type == "debrief":
        answers = response.get("answers")
        if not isinstance(answers, dict) or not all(
            isinstance(v, str) and len(v) <= 5000 for v in answers.values()
        ):
            return "response.answers must map question names to text"
    return None
