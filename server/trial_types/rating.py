"""The ``rating`` trial type: a probability rating of every category (five levels), its long-form
export table and the K-way decisions derived from it (ties broken by a recorded seed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from humanlike.server.trial_types.base import DerivedTable, Entry, ExportInput, Observer, TrialType
from humanlike.vocabulary import StimulusKind

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd



RATING_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


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
    """Rating trials in long form: one row per (trial, category), categories in spec order (the
    one long-form builder, ``responses.rating_rows``; responses as stored JSON text or objects)."""
    from humanlike.server.trial_types.responses import rating_rows

    return rating_rows(inp.trials, inp.columns, inp.labels)


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


def simulate_rating(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """The observer model's probabilities plus Gaussian noise, rounded to the nearest level; a catch
    image's true class rated 1 and nothing else (a wrong class by a participant failing catches)."""
    import numpy as np

    rng, labels = observer.rng, observer.labels
    stimulus = str(entry["stimulus"])
    if entry.get("kind") == StimulusKind.CATCH:
        truth = observer.true_class.get(stimulus)
        wrong = [label for label in labels if label != truth]
        target = str(rng.choice(wrong)) if fails_catch else truth
        return {"ratings": {label: 1.0 if label == target else 0.0 for label in labels}}
    p = observer.model_p(stimulus) + rng.normal(0.0, observer.settings.noise, len(labels))
    grid = np.array(RATING_LEVELS)
    levels = grid[np.abs(p[:, None] - grid[None]).argmin(axis=1)]
    return {"ratings": dict(zip(labels, levels.tolist(), strict=True))}


def rating_label(labels: Sequence[str], label: str) -> dict[str, Any]:
    """The rating that gives ``label`` 1 and every other label 0."""
    return {"ratings": {x: 1.0 if x == label else 0.0 for x in labels}}


def rating_of_model(labels: Sequence[str], p: np.ndarray) -> dict[str, Any]:
    """A model's rating: each probability at the nearest rating level (the lower on a tie)."""
    import numpy as np

    grid = np.array(RATING_LEVELS)
    levels = grid[np.abs(np.asarray(p, dtype=float)[:, None] - grid[None]).argmin(axis=1)]
    return {"ratings": dict(zip(labels, levels.tolist(), strict=True))}


RATING = TrialType(
    name="rating", validate=_validate_rating, table="ratings", frame=rating_frame,
    columns={
        "category": "category label rated in this row",
        "rating": "rating of the category: 0, .25, .5, .75 or 1",
    },
    browser=True, needs_categories=True, rated=True,
    seconds_per_trial=8.0, simulate=simulate_rating, label_answer=rating_label,
    model_answer=rating_of_model,
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
)
