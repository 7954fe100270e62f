"""The spec's ``[adaptive]`` table: adaptive stimulus allocation for a rating block
(docs/adaptive.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

EXPORT_COLUMNS = {
    "adaptive_design_version": "[adaptive] only: version of the stored weights the participant's "
                               "stimuli were drawn with (0: uniform, before the first weights)",
    "adaptive_weights_hash": "[adaptive] only: sha256 of those weights (stimulus ids and values)",
    "adaptive_seed": "[adaptive] only: seed of the draw (numpy default_rng)",
    "adaptive_random": "[adaptive] only: the stimuli drawn uniformly at random (the random share), "
                       "separated by ';'",
    "adaptive_weighted": "[adaptive] only: the stimuli drawn in proportion to the weights, "
                         "separated by ';'",
}
"""The participants table's columns for adaptive allocation's draw (codebook entries)."""


class AdaptiveSettings(BaseModel):
    """``[adaptive]``: each participant's ``block`` stimuli (default: the first rated block; it
    needs ``max_trials``) are drawn with the weights the panel worker last computed, except
    ``random_share`` of them, drawn uniformly at random. ``min_participants`` analysed participants
    come before the first weights (until then every draw is uniform); ``noise_sd`` is the assumed
    human noise before there are data (and ``humanlike plan``'s default)."""

    model_config = ConfigDict(extra="forbid")
    block: str | None = None
    random_share: Annotated[float, Field(ge=0, le=1)] = 0.25
    min_participants: Annotated[int, Field(ge=2, le=100_000)] = 4
    noise_sd: Annotated[float, Field(gt=0, le=1)] = 0.25
