"""The spec's optional tables, one model each: ``[adaptive]`` (adaptive stimulus allocation,
docs/adaptive.md), ``[panel]`` and ``[stopping]`` (the live analysis panel and its target,
docs/dashboard.md) and ``[display]`` (calibration and timing, docs/display-and-timing.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# --------------------------------------------------------------------------- [adaptive]

ADAPTIVE_EXPORT_COLUMNS = {
    "adaptive_design_version": "[adaptive] only: version of the stored weights the participant's "
                               "stimuli were drawn with (0: uniform, before the first weights)",
    "adaptive_weights_hash": "[adaptive] only: sha256 of those weights (stimulus ids and values)",
    "adaptive_seed": "[adaptive] only: seed of the draw (numpy default_rng)",
    "adaptive_pool_size": "[adaptive] only: the adaptive block's stimulus count the draw chose "
                          "from (the Horvitz-Thompson mean's denominator)",
    "adaptive_random": "[adaptive] only: the drawn stimuli in the equal-probability subset (each "
                       "stimulus of the pool is in it with the same probability; the random-share "
                       "cross-check), separated by ';'",
    "adaptive_weighted": "[adaptive] only: the other drawn stimuli, separated by ';'",
}
"""The participants table's columns for adaptive allocation's draw (codebook entries)."""

ADAPTIVE_TRIAL_COLUMNS = {
    "inclusion_probability": "[adaptive] only: the probability that the participant's draw "
                             "included this stimulus (randomised systematic PPS; the "
                             "Horvitz-Thompson weight is its inverse); blank outside the adaptive "
                             "block",
}
"""The rated trial tables' column for adaptive allocation (codebook entry)."""


class AdaptiveSettings(BaseModel):
    """``[adaptive]``: each participant's ``block`` stimuli (default: the first rated block; it
    needs ``max_trials``) are drawn with inclusion probabilities proportional to the weights the
    panel worker last computed, floored so that every stimulus keeps at least ``random_share`` of
    its uniform probability (``analysis.planning.design.inclusion_probabilities``). ``min_participants`` analysed participants
    come before the first weights (until then every draw is uniform); ``noise_sd`` is the assumed
    human noise before there are data (and ``humanlike plan``'s default)."""

    model_config = ConfigDict(extra="forbid")
    block: str | None = None
    random_share: Annotated[float, Field(gt=0, le=1)] = 0.25
    min_participants: Annotated[int, Field(ge=2, le=100_000)] = 4
    noise_sd: Annotated[float, Field(gt=0, le=1)] = 0.25


# --------------------------------------------------------------------------- [panel], [stopping]

Monitoring = Literal["continuous", "fixed_n", "group_sequential"]
ContinuousTest = Literal["betting_mixture", "betting", "safe_t"]
"""How a study's model comparisons are looked at (docs/dashboard.md, Stopping)."""

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
    ``threshold``.

    ``monitoring`` (``comparisons_decided``) is how the comparisons may be looked at with the
    family-wise error kept at ``alpha``: ``continuous`` (the default; any number of looks, any
    time: anytime-valid e-processes, ``analysis.sequential``), ``fixed_n`` (one look, at the one
    participant count in ``looks``) or ``group_sequential`` (the declared ``looks``, increasing,
    with O'Brien-Fleming-type alpha spending, Lan & DeMets 1983). ``test`` (continuous only): the
    e-process, ``betting_mixture`` (the default) or ``betting`` (valid for any bounded
    per-participant differences, Waudby-Smith & Ramdas 2024; the universal-portfolio mixture of
    bets, Cover & Ordentlich 1996, or aGRAPA plug-in bets) or ``safe_t`` (exact for normal
    differences, Grünwald, de Heide & Koolen 2024; faster when the differences vary far less than
    their bound allows)."""

    model_config = ConfigDict(extra="forbid")
    measure: StoppingMeasure
    threshold: Annotated[float, Field(gt=0, lt=10)] | None = None
    alpha: Annotated[float, Field(gt=0, lt=0.5)] = 0.05
    monitoring: Monitoring = "continuous"
    looks: list[Annotated[int, Field(ge=2, le=100_000)]] | None = None
    test: ContinuousTest = "betting_mixture"

    @model_validator(mode="after")
    def _threshold(self) -> Stopping:
        if self.measure.endswith("_halfwidth") and self.threshold is None:
            raise ValueError(f"stopping.measure = {self.measure!r} needs a threshold "
                             "(the largest acceptable CI half-width)")
        if self.monitoring != "continuous" and self.test != "betting_mixture":
            raise ValueError("stopping.test: the e-process test applies to monitoring = "
                             "'continuous' only")
        if self.monitoring == "continuous" and self.looks is not None:
            raise ValueError("stopping.looks: continuous monitoring looks at any time; declare "
                             "looks only with monitoring = 'fixed_n' or 'group_sequential'")
        if self.monitoring == "fixed_n" and (self.looks is None or len(self.looks) != 1):
            raise ValueError("stopping.looks: monitoring = 'fixed_n' needs exactly one look, the "
                             "declared N (e.g. looks = [120])")
        if self.monitoring == "group_sequential" and (
                self.looks is None or len(self.looks) < 2
                or any(b <= a for a, b in zip(self.looks, self.looks[1:]))):
            raise ValueError("stopping.looks: monitoring = 'group_sequential' needs two or more "
                             "increasing looks (participant counts, e.g. [40, 80, 120])")
        return self


# --------------------------------------------------------------------------- [display]


class DisplaySettings(BaseModel):
    """The spec's ``[display]`` table: calibration before the first trial, accepted refresh rates,
    a whole-frame requirement and the timing QC rule (docs/display-and-timing.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    calibration: bool = False
    refresh_hz: list[Annotated[float, Field(gt=0, le=1000)]] | None = None
    refresh_tolerance_hz: Annotated[float, Field(ge=0, le=100)] = 2.0
    whole_frames: bool = False
    whole_frame_tolerance: Annotated[float, Field(gt=0, lt=0.5)] = 0.1
    max_frame_miss: Annotated[int, Field(ge=0)] | None = None

    def refresh_accepted(self, refresh_hz: float) -> bool:
        """Whether a measured rate is within ``refresh_tolerance_hz`` of an accepted rate (any
        rate when none is listed)."""
        return self.refresh_hz is None or any(
            abs(refresh_hz - hz) <= self.refresh_tolerance_hz for hz in self.refresh_hz)
