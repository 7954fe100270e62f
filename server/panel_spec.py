"""The spec's ``[panel]`` and ``[stopping]`` tables: which model responses the live analysis panel
scores, and the stopping target it checks (docs/experiment-spec.md, docs/dashboard.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

StoppingMeasure = Literal["noise_ceiling_halfwidth", "comparisons_decided", "kappa_halfwidth",
                          "mlds_halfwidth"]


class PanelSettings(BaseModel):
    """``[panel]``: model responses to score (CSV files in the experiment folder, the format of
    ``humanlike analyze ratings --models``) and the bootstrap size."""

    model_config = ConfigDict(extra="forbid")
    model_responses: list[str] = Field(default_factory=list)
    n_resamples: Annotated[int, Field(ge=100, le=100_000)] = 1000
    confidence_level: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.95


class Stopping(BaseModel):
    """``[stopping]``: when the study has answered its question.

    ``noise_ceiling_halfwidth``: the lower noise ceiling's CI half-width (r) is at most ``threshold``;
    ``comparisons_decided``: every pairwise model comparison is significant at ``alpha``
    (Holm-Sidak); ``kappa_halfwidth``: the widest CI half-width of the kappa matrix is at most
    ``threshold``; ``mlds_halfwidth``: the widest CI half-width of the MLDS scale values is at most
    ``threshold``."""

    model_config = ConfigDict(extra="forbid")
    measure: StoppingMeasure
    threshold: Annotated[float, Field(gt=0, lt=10)] | None = None
    alpha: Annotated[float, Field(gt=0, lt=0.5)] = 0.05

    @model_validator(mode="after")
    def _threshold(self) -> Stopping:
        if self.measure.endswith("_halfwidth") and self.threshold is None:
            raise ValueError(f"stopping.measure = {self.measure!r} needs a threshold "
                             "(the largest acceptable CI half-width)")
        return self
