"""The trial-type registry (DESIGN.md, Trial types): one entry per type declares its response
check, its export table with the columns it adds (and their codebook text), its frame builder,
whether the browser runner can show it, the timeline entries it builds for a spec block, the checks
of its manifest rows, the block settings it accepts and its simulated participant's answer. Adding
a type is one entry here (and, in the browser, its file that registers its trial builder with
``HumanlikeTrialTypes`` in ``static/js/trial_types.js``).

Records another system keeps in its own storage (psiTurk's) are entries of ``STORED_RECORDS``: each
reads its table from that storage (``StoredRecords.read``), so the export needs no branch for them.

No module outside this one compares a trial type to a literal (``tests/server/test_registry.py``):
they ask the registry (``TRIAL_TYPES[name]``, its fields and the functions at the end)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from humanlike.vocabulary import StimulusKind

if TYPE_CHECKING:  # pandas and numpy are imported by the builders only, so the web app starts without them
    import numpy as np
    import pandas as pd

    from humanlike.server.manifest import StimulusRecord
    from humanlike.server.models import Experiment
    from humanlike.server.spec import Block, ExperimentSpec

Entry = dict[str, Any]
"""A timeline entry: what the browser shows for one trial (stored as the trial's ``design``)."""

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


# What a type does unless its entry says otherwise (one trial per stimulus)


def stimulus_entry(block: Block, rec: StimulusRecord, rng: np.random.Generator,
                   practice: bool = False) -> Entry:
    """One trial on one stimulus (a rating; the catch trials of every block): its type, block,
    stimulus and the stimulus' kind. Draws nothing from ``rng``."""
    return _stimulus_entry(block, rec)


def _stimulus_entry(block: Block, rec: StimulusRecord, **extra: Any) -> Entry:
    entry = {"type": block.trial_type, "block": block.name, "stimulus": rec.key, "kind": rec.kind}
    entry.update(extra)
    return entry


def spare_catch_or_pool(block: Block, records: Sequence[StimulusRecord]) -> int:
    """Practice trials a block of one trial per stimulus can draw from the manifest: the catch
    stimuli its catch trials leave over, else the stimuli of its kinds."""
    n_catch = sum(r.kind == StimulusKind.CATCH for r in records)
    pool = sum(r.kind in block.kinds for r in records)
    spare = n_catch - block.catch_trials
    return spare if spare > 0 else pool


class Observer(Protocol):
    """What a simulated answer reads (``humanlike.server.simulate.SimulatedStudy``)."""

    labels: list[str]
    true_class: dict[str, str | None]
    psi: dict[str, Any]
    rng: np.random.Generator

    @property
    def settings(self) -> Any: ...

    def model_p(self, stimulus: str) -> Any:
        """The observer model's probability of each label for ``stimulus``."""
        ...


@dataclass(frozen=True)
class TrialType:
    """One trial type: response check, export table and columns, frame builder, browser support,
    timeline entries, manifest checks, block settings and simulated answer.

    ``internal`` types are made by the timeline itself (not a spec block, ``closing_entry``) and
    stay out of the ``trials`` table; their own table has only their ``columns``. Their trials
    spend no fixation or inter-trial interval, count toward no break and record no timing."""

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
    entry: Callable[[Block, StimulusRecord, np.random.Generator, bool], Entry] = stimulus_entry
    """One trial on one stimulus, ``(block, record, rng, practice) -> entry``: the block's trials
    (unless ``designed_trials``), its practice trials and its catch trials (``timeline.py``)."""
    designed_trials: Callable[[Block, list[StimulusRecord], np.random.Generator],
                              list[Entry]] | None = None
    """A block's trials designed over its whole pool (every triad of each sequence), practice
    drawn from them; None: one ``entry`` per stimulus, practice from the spare catch stimuli."""
    closing_entry: Callable[[ExperimentSpec], Entry | None] | None = None
    """Internal types: the entry appended after every block (the debrief), or None for none."""
    seconds_per_trial: float = 5.0
    """Typical response time of one trial (the duration estimate, ``timeline.estimated_minutes``)."""
    practice_supply: Callable[[Block, Sequence[StimulusRecord]], int] = spare_catch_or_pool
    """How many practice trials the manifest can supply a block (``experiments.load_experiment``)."""
    check_manifest: Callable[[Block, Sequence[StimulusRecord]], str | None] | None = None
    """A problem with the manifest rows a block of this type needs, or None (``load_experiment``)."""
    settings: tuple[str, ...] = ()
    """The per-type block settings (``Block`` fields) a block of this type accepts (``spec.py``)."""
    simulate: Callable[[Observer, Entry, bool], dict[str, Any]] | None = None
    """A simulated participant's response to an entry, ``(observer, entry, fails_catch)``
    (``simulate.py``); None: the type cannot be simulated."""

    def block_trials(self, block: Block, pool: list[StimulusRecord],
                     spare_catch: list[StimulusRecord],
                     rng: np.random.Generator) -> tuple[list[Entry], list[Entry]]:
        """A block's trials in design order and the trials its practice is drawn from: the
        designed trials and themselves, else one entry per stimulus of ``pool`` and one practice
        entry per spare catch stimulus (the pool's stimuli when none is spare)."""
        if self.designed_trials is not None:
            trials = self.designed_trials(block, pool, rng)
            return trials, trials
        trials = [self.entry(block, r, rng, False) for r in pool]
        return trials, [self.entry(block, r, rng, True) for r in (spare_catch or pool)]


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
    one long-form builder, ``trial_store.rating_rows``; responses as stored JSON text or objects)."""
    from humanlike.server.trial_store import rating_rows

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


# Timeline entries (the per-type part of ``timeline.generate_timeline``; same draws in the same order)


def classification_entry(block: Block, rec: StimulusRecord, rng: np.random.Generator,
                         practice: bool = False) -> Entry:
    """A classification trial: the block's timings and mask, a recorded mask seed, and (practice
    with feedback only) the true class the browser shows as feedback."""
    from humanlike.server.spec import ClassificationSettings

    settings = block.classification or ClassificationSettings()
    entry = _stimulus_entry(
        block, rec, **settings.model_dump(exclude={"feedback_on_practice"}),
        mask_seed=int(rng.integers(0, 2**31 - 1)),
    )
    entry["feedback"] = bool(practice and settings.feedback_on_practice)
    if entry["feedback"]:
        entry["true_class"] = rec.true_class
    return entry


def triad_trials(block: Block, pool: list[StimulusRecord], rng: np.random.Generator) -> list[Entry]:
    """All C(n,3) triads of every sequence (s1 < s2 < s3, s2 the reference), outer pair in random order."""
    import numpy as np

    from humanlike.stimuli.mlds_design import all_triads

    by_seq: dict[str, dict[int, StimulusRecord]] = defaultdict(dict)
    for rec in pool:
        by_seq[str(rec.meta["sequence"])][int(rec.meta["level"])] = rec
    entries = []
    for seq in sorted(by_seq):
        recs = by_seq[seq]
        levels = np.array(sorted(recs))
        for s1, s2, s3 in levels[all_triads(len(levels)) - 1].tolist():
            entries.append(
                {
                    "type": block.trial_type,
                    "block": block.name,
                    "kind": StimulusKind.MLDS.value,
                    "sequence": seq,
                    "s1": s1,
                    "s2": s2,
                    "s3": s3,
                    "stimuli": [recs[s1].key, recs[s2].key, recs[s3].key],
                }
            )
    swapped = rng.random(len(entries)) < 0.5
    for entry, swap in zip(entries, swapped, strict=True):
        entry["swapped"] = bool(swap)
    return entries


def debrief_entry(spec: ExperimentSpec) -> Entry | None:
    """The debrief form after the last block, when the spec asks debrief questions."""
    if not spec.debrief:
        return None
    return {"type": "debrief", "block": "debrief", "practice": False, "is_repeat": False,
            "repeat_of": None}


# Manifest checks (``experiments.load_experiment`` names the file and the field)


def triad_supply(block: Block, records: Sequence[StimulusRecord]) -> int:
    """Practice triads a triad block can draw: every triad of each sequence of its kinds."""
    levels: dict[str, int] = {}
    for r in records:
        if r.kind in block.kinds:
            seq = str(r.meta.get("sequence"))
            levels[seq] = levels.get(seq, 0) + 1
    return sum(n * (n - 1) * (n - 2) // 6 for n in levels.values())


def check_triad_manifest(block: Block, records: Sequence[StimulusRecord]) -> str | None:
    """Triads need each MLDS stimulus' sequence and level."""
    for r in records:
        if r.kind == StimulusKind.MLDS and not {"sequence", "level"} <= r.meta.keys():
            return f"mlds stimulus {r.key!r} needs columns sequence and level"
    return None


# Simulated answers (``simulate.SimulatedStudy.answer``; all randomness from the observer's rng)


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


def simulate_triad(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """An MLDS observer with its sequence's scale psi and decision noise ``mlds_sigma``."""
    import numpy as np

    from humanlike.analysis.mlds.simulate import simulate_responses

    psi = observer.psi[str(entry["sequence"])]
    trio = np.array([[entry["s1"], entry["s2"], entry["s3"]]])
    chose_s1 = bool(simulate_responses(trio, psi, observer.settings.mlds_sigma,
                                       random_state=observer.rng)[0])
    return {"choice": "left" if chose_s1 != bool(entry["swapped"]) else "right"}


def simulate_classification(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """The observer model's most probable class, a uniformly drawn one with probability ``lapse``."""
    import numpy as np

    rng = observer.rng
    if rng.random() < observer.settings.lapse:
        return {"choice": str(rng.choice(observer.labels))}
    return {"choice": observer.labels[int(np.argmax(observer.model_p(str(entry["stimulus"]))))]}


def simulate_debrief(observer: Observer, entry: Entry, fails_catch: bool) -> dict[str, Any]:
    """The demo's debrief answers."""
    return {"answers": {"strategy": "simulated participant", "problems": "none"}}


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
            seconds_per_trial=8.0, simulate=simulate_rating,
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
            browser=True, designed_trials=triad_trials, seconds_per_trial=3.0,
            practice_supply=triad_supply, check_manifest=check_triad_manifest,
            simulate=simulate_triad,
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
            browser=True, needs_categories=True, entry=classification_entry,
            seconds_per_trial=2.5, settings=("classification",), simulate=simulate_classification,
        ),
        TrialType(
            name="debrief", validate=_validate_debrief, table="debrief", frame=debrief_frame,
            columns={"participant": "participant id", "question": "question name", "answer": "text"},
            browser=True, internal=True, closing_entry=debrief_entry, seconds_per_trial=60.0,
            simulate=simulate_debrief,
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
    """Names of the types the browser runner can show (the builders registered with
    ``HumanlikeTrialTypes``)."""
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


def block_settings() -> dict[str, list[str]]:
    """Each per-type block setting (a ``Block`` field) and the types whose blocks accept it."""
    owners: dict[str, list[str]] = {}
    for t in TRIAL_TYPES.values():
        for name in t.settings:
            owners.setdefault(name, []).append(t.name)
    return owners


PSITURK_KIND = "psiturk"
"""The spec ``kind`` of a psiTurk-compatible experiment (``server/psiturk/``)."""


@dataclass(frozen=True)
class StoredRecords:
    """Trial records another system keeps in its own storage, and the export table made of them.

    psiTurk's records are stored by its ``/sync`` route in psiTurk storage (``psiturk_trial``
    rows): they are not a browser trial, not a spec block, not posted to ``/trials``, not in the
    ``trials`` table or the codebook (their columns are the records' own keys). ``read(exp)``
    returns the experiment's table from that storage, or None when it keeps no such records:
    the export writes ``table`` for each entry that returns one (``stored_record_tables``)."""

    name: str
    table: str
    read: Callable[[Experiment], pd.DataFrame | None]


def psiturk_records(exp: Experiment) -> pd.DataFrame | None:
    """A psiTurk-compatible experiment's trial records from psiTurk storage, one row per record and
    one column per trialdata key (``psiturk.transfer.tidy_trials``); None for any other experiment."""
    if (exp.spec or {}).get("kind") != PSITURK_KIND:
        return None
    from humanlike.server.psiturk.transfer import tidy_trials

    return tidy_trials(exp.slug)


STORED_RECORDS: dict[str, StoredRecords] = {
    r.name: r for r in (StoredRecords(name="psiturk", table="psiturk_trials", read=psiturk_records),)
}


def stored_record_tables(exp: Experiment,
                         tables: Collection[str] | None = None) -> dict[str, pd.DataFrame]:
    """The table of every ``STORED_RECORDS`` entry that ``exp`` keeps records of, by table name
    (only those in ``tables`` when given; others are not read). The export writes each, after
    its own tables; none of them is in ``TRIAL_TYPES``, so its per-type loops never see them."""
    out: dict[str, pd.DataFrame] = {}
    for entry in STORED_RECORDS.values():
        if tables is not None and entry.table not in tables:
            continue
        frame = entry.read(exp)
        if frame is not None:
            out[entry.table] = frame
    return out
