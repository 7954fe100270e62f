"""The trial-type registry (DESIGN.md, Trial types): one entry per type declares its response
check, its export table with the columns it adds (and their codebook text), its frame builder, and
whether the browser runner can show it. Adding a type is one entry here (and one builder in
``static/js/runner.js``'s ``TRIAL_BUILDERS``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported by the builders only, so the web app starts without it
    import pandas as pd

RATING_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class ExportInput:
    """What a frame builder reads: its type's trial rows (the common columns plus ``response`` and
    ``design``), the common columns in export order, the category labels and the stimulus table."""

    trials: pd.DataFrame
    columns: list[str]
    labels: list[str]
    stimuli: pd.DataFrame


@dataclass(frozen=True)
class DerivedTable:
    """A table computed from a type's own export table (rating decisions from ratings): its name,
    the columns it adds to the trial columns (codebook text) and its builder."""

    table: str
    columns: dict[str, str]
    frame: Callable[[pd.DataFrame, ExportInput], pd.DataFrame]


@dataclass(frozen=True)
class TrialType:
    """One trial type: response check, export table and columns, frame builder, browser support.

    ``internal`` types are made by the timeline itself (not a spec block) and stay out of the
    ``trials`` table; their own table has only their ``columns``."""

    name: str
    validate: Callable[[dict[str, Any], list[str]], str | None]
    table: str
    columns: dict[str, str]
    frame: Callable[[ExportInput], pd.DataFrame]
    browser: bool
    needs_categories: bool = False
    internal: bool = False
    derived: tuple[DerivedTable, ...] = ()
    rated: bool = False
    """Its responses rate every category (``response.ratings``): QC and the live panel read these."""


def _validate_rating(response: dict[str, Any], labels: list[str]) -> str | None:
    ratings = response.get("ratings")
    if not isinstance(ratings, dict):
        return "response.ratings must be an object mapping each category label to a level"
    if set(ratings) != set(labels):
        return f"response.ratings must have exactly the categories {labels}"
    for label, value in ratings.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) not in RATING_LEVELS:
            return f"response.ratings[{label!r}] must be one of {list(RATING_LEVELS)}"
    return None


def rating_frame(inp: ExportInput) -> pd.DataFrame:
    """Rating trials in long form: one row per (trial, category), categories in spec order."""
    import numpy as np
    import pandas as pd

    rt, labels = inp.trials, inp.labels
    if not labels:
        return rt.iloc[0:0][inp.columns]
    base = rt[inp.columns].loc[rt.index.repeat(len(labels))].reset_index(drop=True)
    base["category"] = np.tile(labels, len(rt))
    ratings = pd.DataFrame([resp["ratings"] for resp in rt["response"]], columns=labels)
    base["rating"] = ratings.to_numpy(dtype=float).ravel()  # row-major: trial, then category
    return base


_SPLITMIX_GAMMA = 0x9E3779B97F4A7C15


def splitmix64(x: Any) -> Any:
    """SplitMix64's output function on uint64 arrays (Steele, Lea & Flood 2014): a fixed bijection
    that turns consecutive integers into well-mixed 64-bit values (wrapping arithmetic)."""
    import numpy as np

    z = (np.asarray(x, dtype=np.uint64) + np.uint64(_SPLITMIX_GAMMA))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def decision_tie_seeds(participants: Any, trial_indices: Any) -> Any:
    """Each trial's tie-break seed (63 bits): splitmix64(blake2b-64(participant id) XOR trial index),
    so a decision can be redrawn from the participant id and trial index alone."""
    import hashlib

    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(pd.Series(participants, dtype=str))
    keys = np.array([int.from_bytes(hashlib.blake2b(u.encode(), digest_size=8).digest(), "little")
                     for u in uniques], dtype=np.uint64)
    mixed = splitmix64(keys[codes] ^ np.asarray(trial_indices, dtype=np.uint64))
    return (mixed >> np.uint64(1)).astype(np.int64)


def decision_frame(ratings: pd.DataFrame, inp: ExportInput) -> pd.DataFrame:
    """Rating trials on images with a true class read as K-way decisions: the highest-rated
    category; among tied top ratings the category at spec position j with the largest
    splitmix64(tie_seed + j) (``n_tied`` > 1 marks such trials, which analyses may count wrong)."""
    import numpy as np

    labels, k = inp.labels, len(inp.labels)
    columns = [*inp.columns, "category", "response", "correct", "n_tied", "top_rating",
               "tie_seed", "stimulus_condition"]
    if not k or ratings.empty:
        return ratings.iloc[0:0].reindex(columns=columns)
    base = ratings[inp.columns].iloc[::k].reset_index(drop=True)
    values = ratings["rating"].to_numpy(dtype=float).reshape(-1, k)  # trial x category, spec order
    stimuli = inp.stimuli.set_index("stimulus") if "stimulus" in inp.stimuli else None
    truth = base["stimulus"].map(stimuli["true_class"]) if stimuli is not None else None
    keep = truth.isin(labels).to_numpy() if truth is not None else np.zeros(len(base), bool)
    base, values = base[keep].reset_index(drop=True), values[keep]
    top = values.max(axis=1)
    tied = values == top[:, None]
    seeds = decision_tie_seeds(base["participant"], base["trial_index"].to_numpy())
    draws = splitmix64(seeds.astype(np.uint64)[:, None] + np.arange(k, dtype=np.uint64)[None, :])
    choice = np.where(tied, draws, np.uint64(0)).argmax(axis=1)
    base["category"] = truth[keep].to_numpy() if truth is not None else []
    base["response"] = np.asarray(labels, dtype=object)[choice]
    base["correct"] = base["response"] == base["category"]
    base["n_tied"] = tied.sum(axis=1)
    base["top_rating"] = top
    base["tie_seed"] = seeds
    assert stimuli is not None  # keep is all-False without a stimulus table
    condition = (stimuli["condition"] if "condition" in stimuli else stimuli["kind"])
    base["stimulus_condition"] = base["stimulus"].map(condition.astype("string").fillna(
        stimuli["kind"].astype("string")))
    return base[columns]


def _validate_triad(response: dict[str, Any], labels: list[str]) -> str | None:
    if response.get("choice") not in ("left", "right"):
        return "response.choice must be 'left' or 'right'"
    return None


def triad_frame(inp: ExportInput) -> pd.DataFrame:
    """Triad trials normalised to s1 < s2 < s3; response 1 = s1 judged more similar to s2."""
    import pandas as pd

    tr = inp.trials
    out = tr[inp.columns].reset_index(drop=True)
    design = pd.DataFrame(list(tr["design"]), columns=["sequence", "s1", "s2", "s3", "swapped"])
    out["sequence"] = design["sequence"].astype(str)
    out[["s1", "s2", "s3"]] = design[["s1", "s2", "s3"]].astype(int)
    swapped = design["swapped"].astype(bool).to_numpy()
    chose_left = pd.DataFrame(list(tr["response"]), columns=["choice"])["choice"].eq("left")
    out["response"] = (chose_left.to_numpy() != swapped).astype(int)  # s1 chosen as more similar
    out["swapped"] = swapped
    return out


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


def _validate_debrief(response: dict[str, Any], labels: list[str]) -> str | None:
    answers = response.get("answers")
    if not isinstance(answers, dict) or not all(
        isinstance(v, str) and len(v) <= 5000 for v in answers.values()
    ):
        return "response.answers must map question names to text"
    return None


def debrief_frame(inp: ExportInput) -> pd.DataFrame:
    """Debrief answers, one row per (participant, question)."""
    import pandas as pd

    rows = [
        {"participant": p, "question": q, "answer": a}
        for p, resp in zip(inp.trials["participant"], inp.trials["response"])
        if isinstance(resp, dict) and "answers" in resp
        for q, a in resp["answers"].items()
    ]
    return pd.DataFrame(rows, columns=["participant", "question", "answer"])


TRIAL_TYPES: dict[str, TrialType] = {
    t.name: t
    for t in (
        TrialType(
            name="rating", validate=_validate_rating, table="ratings", frame=rating_frame,
            columns={
                "category": "category label rated in this row",
                "rating": "rating of the category: 0, .25, .5, .75 or 1",
            },
            browser=True, needs_categories=True, rated=True,
            derived=(DerivedTable(
                table="decisions", frame=decision_frame,
                columns={
                    "category": "true category of the image (natural and catch images only)",
                    "response": "the decision: the highest-rated category (ties: see tie_seed)",
                    "correct": "response == category",
                    "n_tied": "number of categories sharing the top rating (> 1: a tie was broken)",
                    "top_rating": "the highest rating of the trial",
                    "tie_seed": "tie-break seed: among tied categories the one at spec position j "
                                "with the largest splitmix64(tie_seed + j) is the response",
                    "stimulus_condition": "the stimulus' condition in the manifest, else its kind",
                },
            ),),
        ),
        TrialType(
            name="triad", validate=_validate_triad, table="triads", frame=triad_frame,
            columns={
                "sequence": "MLDS sequence id",
                "s1": "lowest level of the triad (1-based)",
                "s2": "middle level: the reference shown in the centre",
                "s3": "highest level of the triad",
                "response": "1 = pair (s2, s3) judged more different (s1 chosen as more similar to the reference)",
                "swapped": "true when s1 was shown on the right",
            },
            browser=True,
        ),
        TrialType(
            name="classification", validate=_validate_classification, table="classifications",
            frame=classification_frame,
            columns={
                "response": "chosen category, or 'na' when no answer came in time",
                "category": "true category",
                "correct": "response == category ('na' is wrong)",
                "stimulus_condition": "the stimulus' condition in the manifest (e.g. noise level)",
                "mask_seed": "seed of the trial's 1/f noise mask (null with an image mask)",
            },
            browser=True, needs_categories=True,
        ),
        TrialType(
            name="debrief", validate=_validate_debrief, table="debrief", frame=debrief_frame,
            columns={"participant": "participant id", "question": "question name", "answer": "text"},
            browser=True, internal=True,
        ),
    )
}


def rated_types() -> list[str]:
    """Names of the types whose responses rate every category (what QC and the panel read)."""
    return [t.name for t in TRIAL_TYPES.values() if t.rated]


def internal_types() -> list[str]:
    """Names of the types the timeline makes itself (debrief): not a spec block, not in ``trials``."""
    return [t.name for t in TRIAL_TYPES.values() if t.internal]


def browser_trial_types() -> list[str]:
    """Names of the types the browser runner can show (its ``TRIAL_BUILDERS`` keys)."""
    return [t.name for t in TRIAL_TYPES.values() if t.browser]


def block_trial_types() -> list[str]:
    """Names a spec block may use: the browser's types that are not internal."""
    return [t.name for t in TRIAL_TYPES.values() if t.browser and not t.internal]


def check_block_trial_type(name: str) -> str:
    """``name`` when a spec block may use it, else ValueError saying why and what is available."""
    available = ", ".join(block_trial_types())
    known = TRIAL_TYPES.get(name)
    if known is None or known.internal:
        raise ValueError(f"unknown trial type {name!r}; available: {available}")
    if not known.browser:
        raise ValueError(f"trial type {name!r} has no browser trial yet; available: {available}")
    return name


def check_trial_type(name: str) -> str:
    """``name`` when it is a registered trial type, else ValueError listing the registered ones."""
    if name not in TRIAL_TYPES:
        raise ValueError(f"unknown trial type {name!r}; one of {list(TRIAL_TYPES)}")
    return name
