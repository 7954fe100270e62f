"""The researcher API's bodies and answers as pydantic models: the handlers validate and answer
with them, and ``openapi`` publishes their JSON Schema (one source for both)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from humanlike.server.lifecycle import ExperimentStatus

STRICT = ConfigDict(extra="forbid", strict=True)


class StatusIn(BaseModel):
    """Switch an experiment between draft, live and closed."""

    model_config = STRICT
    status: Annotated[ExperimentStatus, Field(strict=False)]  # the value's string, as JSON sends it


class RejectIn(BaseModel):
    """Reject a submission: the message the participant reads (Prolific: at least 100
    characters) and, on Prolific, a rejection category."""

    model_config = STRICT
    message: str = Field(min_length=1, max_length=5000)
    category: str | None = Field(default=None, max_length=64)


class ExcludeIn(BaseModel):
    """Exclude from (or include in) analysis, with the reason kept in the audit log."""

    model_config = STRICT
    reason: str = Field(min_length=1, max_length=500)


class BonusIn(BaseModel):
    """A bonus in the study's currency (major units, as a string: "0.50"), at most once per
    reason for a participant."""

    model_config = STRICT
    amount: str = Field(pattern=r"^\d{1,4}(\.\d{1,2})?$", examples=["0.50"])
    reason: str = Field(min_length=1, max_length=200)


class ExperimentOut(BaseModel):
    """An experiment and its participants by status."""

    slug: str
    title: str
    status: str
    platform: str
    participants: int
    by_status: dict[str, int]


class ParticipantOut(BaseModel):
    """A participant with the QC the dashboard shows; ``platform_id`` only with the reveal
    scope and permission."""

    public_id: str
    status: str
    condition: str | None
    platform_id: str | None = None
    started_at: dt.datetime | None
    completed_at: dt.datetime | None
    bonus: Decimal | None
    n_stored: int | None
    catch_accuracy: float | None
    repeat_reliability: float | None
    median_rt_ms: float | None
    qc_failed: bool | None
    qc_reasons: list[str]
    analysis_override: str | None
    excluded: bool


class ParticipantPage(BaseModel):
    """One page of participants, and how many match."""

    total: int
    page: int
    per_page: int
    participants: list[ParticipantOut]


class ActionOut(BaseModel):
    """What an action did (the dashboard's result of ``participants.actions``)."""

    participant: str
    action: str
    ok: bool
    message: str
    detail: dict[str, Any]


class PanelOut(BaseModel):
    """The live panel's stored result (computed in the background; null until then)."""

    computed_at: dt.datetime | None
    n_participants: int | None
    stale: bool
    result: dict[str, Any] | None


class ErrorOut(BaseModel):
    """Every error: a short code and what is wrong."""

    error: str
    detail: Any = None


BODIES = (StatusIn, RejectIn, ExcludeIn, BonusIn)
ANSWERS = (ExperimentOut, ParticipantOut, ParticipantPage, ActionOut, PanelOut, ErrorOut)
