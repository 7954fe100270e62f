"""Per-participant timelines, generated once from a recorded seed (same seed, same timeline)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from humanlike.server.manifest import StimulusRecord
from humanlike.server.spec import Block, ClassificationSettings, ExperimentSpec, Presentation
from humanlike.stimuli.mlds_design import all_triads
from humanlike.vocabulary import StimulusKind

TIMELINE_VERSION = 1
INTERNAL_KEYS = ("stimulus_id",)  # added at allocation for the database; never sent to the browser


#: Seconds a participant typically spends per trial of each type (response, not presentation):
#: rating a few categories ~8 s, a triad's 2AFC ~3 s, the debrief form ~60 s; other types 5 s.
SECONDS_PER_TRIAL = {"rating": 8.0, "triad": 3.0, "classification": 2.5, "debrief": 60.0}
SETUP_SECONDS = 90.0  # consent, instructions, refresh measurement, preload
BREAK_SECONDS = 30.0  # a typical pause at each break screen


def estimated_minutes(
    trials: list[dict[str, Any]], presentation: Presentation, break_every: int | None
) -> int:
    """An honest duration estimate from the timeline: per-type response time plus fixation and
    inter-trial interval per trial, breaks and setup; rounded up to whole minutes."""
    import math

    per_trial_ms = presentation.fixation_ms + presentation.iti_ms
    seconds = SETUP_SECONDS
    n_task = 0
    for t in trials:
        seconds += SECONDS_PER_TRIAL.get(str(t.get("type")), 5.0)
        if t.get("type") != "debrief":
            seconds += per_trial_ms / 1000
            n_task += 1
    if break_every:
        seconds += BREAK_SECONDS * ((n_task - 1) // break_every if n_task else 0)
    return max(1, math.ceil(seconds / 60))


def design_of(entry: dict[str, Any]) -> dict[str, Any]:
    """A timeline entry as its trial's stored design: everything but the server-internal keys."""
    return {k: v for k, v in entry.items() if k not in INTERNAL_KEYS}


def _rating_entry(block: Block, rec: StimulusRecord, **extra: Any) -> dict[str, Any]:
    entry = {"type": block.trial_type, "block": block.name, "stimulus": rec.key, "kind": rec.kind}
    entry.update(extra)
    return entry


def _classification_entry(
    block: Block, rec: StimulusRecord, rng: np.random.Generator, practice: bool = False
) -> dict[str, Any]:
    """A classification trial: the block's timings and mask, a recorded mask seed, and (practice
    with feedback only) the true class the browser shows as feedback."""
    settings = block.classification or ClassificationSettings()
    entry = _rating_entry(
        block, rec, **settings.model_dump(exclude={"feedback_on_practice"}),
        mask_seed=int(rng.integers(0, 2**31 - 1)),
    )
    entry["feedback"] = bool(practice and settings.feedback_on_practice)
    if entry["feedback"]:
        entry["true_class"] = rec.true_class
    return entry


def _pool(block: Block, records: list[StimulusRecord]) -> list[StimulusRecord]:
    """A block's stimuli of its kinds: those whose manifest ``block`` names it when there are
    any, else those naming no block (a named stimulus belongs to its block only)."""
    named = [r for r in records if r.meta.get("block") == block.name]
    return named or [r for r in records if r.meta.get("block") in (None, "")]


def _triad_entries(
    block: Block, pool: list[StimulusRecord], rng: np.random.Generator
) -> list[dict]:
    """All C(n,3) triads of every sequence (s1 < s2 < s3, s2 the reference), outer pair in random order."""
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
                    "type": "triad",
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


def generate_timeline(
    spec: ExperimentSpec, stimuli: list[StimulusRecord], condition: str, seed: int
) -> dict[str, Any]:
    """Build a participant's timeline: practice, shuffled trials with catch trials interleaved,
    repeats appended after the last block, then the debrief; plus the drawn key mapping."""
    rng = np.random.default_rng(seed)
    by_kind: dict[str, list[StimulusRecord]] = defaultdict(list)
    for rec in stimuli:
        by_kind[rec.kind].append(rec)

    keys = [c.key for c in spec.categories]
    if spec.key_mapping == "shuffled":
        keys = [keys[i] for i in rng.permutation(len(keys))]
    categories = [{"label": c.label, "key": k} for c, k in zip(spec.categories, keys, strict=True)]

    entries: list[dict[str, Any]] = []
    repeat_candidates: list[tuple[int, Block]] = []
    for block in spec.blocks_for(condition):
        catch_pool = _pool(block, list(by_kind.get(StimulusKind.CATCH, [])))
        rng.shuffle(catch_pool)
        catch = catch_pool[: block.catch_trials]
        if block.trial_type == "triad":
            main = _triad_entries(block, _pool(block, [r for k in block.kinds
                                                       for r in by_kind.get(k, [])]), rng)
            practice_src = main
        elif block.trial_type == "classification":
            pool = _pool(block, [r for k in block.kinds for r in by_kind.get(k, [])])
            main = [_classification_entry(block, r, rng) for r in pool]
            spare_catch = catch_pool[block.catch_trials :]
            practice_src = [_classification_entry(block, r, rng, practice=True)
                            for r in (spare_catch or pool)]
        else:
            pool = _pool(block, [r for k in block.kinds for r in by_kind.get(k, [])])
            main = [_rating_entry(block, r) for r in pool]
            spare_catch = catch_pool[block.catch_trials :]
            practice_src = [_rating_entry(block, r) for r in (spare_catch or pool)]
        if block.shuffle:
            main = [main[i] for i in rng.permutation(len(main))]
        if block.max_trials is not None:
            main = main[: block.max_trials]
        practice = [
            dict(practice_src[i], practice=True)
            for i in rng.permutation(len(practice_src))[: block.practice]
        ]
        catch_entries = [
            _classification_entry(block, r, rng) if block.trial_type == "classification"
            else _rating_entry(block, r) for r in catch
        ]
        positions = np.sort(rng.integers(1, len(main) + 1, size=len(catch_entries)))
        merged = list(main)
        for k, (pos, entry) in enumerate(zip(positions.tolist(), catch_entries, strict=True)):
            merged.insert(pos + k, entry)  # before the trial that stood at ``pos`` in ``main``
        for entry in practice + merged:
            entry.setdefault("practice", False)
            entry.update(is_repeat=False, repeat_of=None, index=len(entries))
            entries.append(entry)
            if not entry["practice"] and entry["kind"] != StimulusKind.CATCH:
                repeat_candidates.append((entry["index"], block))

    repeats: list[dict[str, Any]] = []
    for block in spec.blocks_for(condition):
        candidates = [idx for idx, b in repeat_candidates if b.name == block.name]
        if block.repeats > len(candidates):
            raise ValueError(
                f"block {block.name!r} asks for {block.repeats} repeats but has only "
                f"{len(candidates)} trials"
            )
        chosen: np.ndarray | list[int] = (
            rng.choice(candidates, size=block.repeats, replace=False) if block.repeats else []
        )
        for idx in chosen:
            repeats.append(dict(entries[int(idx)], is_repeat=True, repeat_of=int(idx)))
    for i in rng.permutation(len(repeats)):
        repeats[i]["index"] = len(entries)
        entries.append(repeats[i])
    if spec.debrief:
        entries.append(
            {
                "index": len(entries),
                "type": "debrief",
                "block": "debrief",
                "practice": False,
                "is_repeat": False,
                "repeat_of": None,
            }
        )
    return {
        "version": TIMELINE_VERSION,
        "seed": seed,
        "condition": condition,
        "categories": categories,
        "trials": entries,
    }
