"""The ``classification`` trial type (speeded, model-vs-human's paradigm): fixation, image for a
whole number of frames, mask, forced choice; its block settings are ``ClassificationSettings``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from humanlike.server.trial_types.base import (
    Entry,
    ExportInput,
    Observer,
    TrialType,
    stimulus_entry_with,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from humanlike.server.study.manifest import StimulusRecord
    from humanlike.server.study.spec import Block


class ClassificationSettings(BaseModel):
    """A classification block's paradigm (model-vs-human): fixation, image, mask, response
    (the spec's ``[blocks.classification]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    categories: list[str] | None = None  # a subset of the experiment's labels; None: all
    fixation_ms: Annotated[int, Field(ge=0, le=5000)] = 300
    duration_ms: Annotated[int, Field(gt=0, le=5000)] = 200
    mask_ms: Annotated[int, Field(ge=0, le=5000)] = 200
    mask: str = "noise"  # "noise": 1/f noise from a per-trial seed; else a mask image's manifest key
    response_timeout_ms: Annotated[int, Field(gt=0, le=60_000)] | None = None
    feedback_on_practice: bool = True


NO_RESPONSE = "na"  # a classification answered too late (model-vs-human's timeout code)


def _validate_classification(response: dict[str, Any], labels: list[str]) -> str | None:
    if response.get("choice") not in [*labels, NO_RESPONSE]:
        return f"response.choice must be one of {labels} or {NO_RESPONSE!r} (no answer in time)"
    return None


def classification_frame(inp: ExportInput) -> pd.DataFrame:
    """Classification trials with the true category, correctness (``na`` = wrong), the stimulus'
    condition from its manifest metadata (e.g. a noise level) and the trial's mask seed."""
    cl = inp.trials
    out = cl[inp.columns].reset_index(drop=True)
    out["response"] = [r["choice"] for r in cl["response"]]
    stimuli = inp.stimuli.set_index("stimulus") if "stimulus" in inp.stimuli else None
    empty: dict[str, Any] = {}
    truth: Any = stimuli["true_class"] if stimuli is not None else empty
    out["category"] = out["stimulus"].map(truth)
    out["correct"] = out["response"] == out["category"]  # "na" never equals a category
    conditions: Any = (stimuli["condition"] if stimuli is not None and "condition" in stimuli
                       else empty)
    out["stimulus_condition"] = out["stimulus"].map(conditions)
    out["mask_seed"] = [d.get("mask_seed") if isinstance(d, dict) else None for d in cl["design"]]
    out["mask_seed"] = out["mask_seed"].astype("Int64")
    return out


def classification_entry(block: Block, rec: StimulusRecord, rng: np.random.Generator,
                         practice: bool = False) -> Entry:
    """A classification trial: the block's timings and mask, a recorded mask seed, and (practice
    with feedback only) the true class the browser shows as feedback."""
    settings = block.classification or ClassificationSettings()
    entry = stimulus_entry_with(
        block, rec, **settings.model_dump(exclude={"feedback_on_practice"}),
        mask_seed=int(rng.integers(0, 2**31 - 1)),
    )
    entry["feedback"] = bool(practice and settings.feedback_on_practice)
    if entry["feedback"]:
        entry["true_class"] = rec.true_class
    return entry


def simulate_classification(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """The observer model's most probable class, a uniformly drawn one with probability ``lapse``."""
    import numpy as np

    rng = observer.rng
    if rng.random() < observer.settings.lapse:
        return {"choice": str(rng.choice(observer.labels))}
    return {"choice": observer.labels[int(np.argmax(observer.model_p(str(entry["stimulus"]))))]}


def classification_label(labels: Sequence[str], label: str) -> dict[str, Any]:
    """The classification that chooses ``label``."""
    return {"choice": label}


def classification_of_model(labels: Sequence[str], p: np.ndarray) -> dict[str, Any]:
    """A model's classification: its most probable label."""
    import numpy as np

    return {"choice": labels[int(np.argmax(p))]}


CLASSIFICATION = TrialType(
    name="classification", validate=_validate_classification, table="classifications",
    frame=classification_frame,
    columns={
        "response": "chosen category, or 'na' when no answer came in time",
        "category": "true category",
        "correct": "response == category ('na' is wrong)",
        "stimulus_condition": "the stimulus' condition in the manifest (e.g. noise level)",
        "mask_seed": "seed of the trial's 1/f noise mask (null with an image mask)",
    },
    browser=True, needs_categories=True, entry=classification_entry,
    seconds_per_trial=2.5, settings=("classification",), simulate=simulate_classification,
    label_answer=classification_label, model_answer=classification_of_model,
    timeout_answer={"choice": NO_RESPONSE},
)
