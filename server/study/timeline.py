"""Per-participant timelines, generated once from a recorded seed (same seed, same timeline).

What differs between trial types (a block's entries, the closing debrief, seconds per trial) is
their registry entry's (``trial_types.TRIAL_TYPES``); this module orders, shuffles and repeats."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from humanlike.server.study.manifest import StimulusRecord
from humanlike.server.study.spec import Block, ExperimentSpec, Presentation
from humanlike.server.trial_types.registry import TRIAL_TYPES
from humanlike.vocabulary import StimulusKind

TIMELINE_VERSION = 1
INTERNAL_KEYS = ("stimulus_id",)  # added at allocation for the database; never sent to the browser


#: Seconds a participant typically spends on a trial of an unregistered type; a registered type's
#: is its entry's ``seconds_per_trial`` (rating ~8 s, a triad's 2AFC ~3 s, the debrief form ~60 s).
DEFAULT_SECONDS_PER_TRIAL = 5.0
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
        known = TRIAL_TYPES.get(str(t.get("type")))
        seconds += known.seconds_per_trial if known is not None else DEFAULT_SECONDS_PER_TRIAL
        if known is None or not known.internal:
            seconds += per_trial_ms / 1000
            n_task += 1
    if break_every:
        seconds += BREAK_SECONDS * ((n_task - 1) // break_every if n_task else 0)
    return max(1, math.ceil(seconds / 60))


class TimelineProblem(ValueError):
    """A block whose trials cannot be built; ``block`` (and ``field``, when one setting is to
    blame) say where, so that load-time checks name the spec's field."""

    def __init__(self, block: Block, field: str | None, message: str):
        super().__init__(message)
        self.block, self.field = block, field


def design_of(entry: dict[str, Any]) -> dict[str, Any]:
    """A timeline entry as its trial's stored design: everything but the server-internal keys."""
    return {k: v for k, v in entry.items() if k not in INTERNAL_KEYS}


def _pool(block: Block, records: list[StimulusRecord]) -> list[StimulusRecord]:
    """A block's stimuli of its kinds: those whose manifest ``block`` names it when there are
    any, else those naming no block (a named stimulus belongs to its block only)."""
    named = [r for r in records if r.meta.get("block") == block.name]
    return named or [r for r in records if r.meta.get("block") in (None, "")]


def generate_timeline(
    spec: ExperimentSpec, stimuli: list[StimulusRecord], condition: str, seed: int,
    drawn: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Build a participant's timeline: practice, shuffled trials with catch trials interleaved,
    repeats appended after the last block, then the debrief; plus the drawn key mapping.
    Each block's entries come from its type's registry entry (``TrialType.block_trials``, its
    ``entry`` for catch trials), each internal type's closing entry from its ``closing_entry``.
    ``drawn``: per block name, the only stimuli its main trials show (adaptive allocation's draw,
    ``server/live/adaptive.py``)."""
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
        trial_type = TRIAL_TYPES[block.trial_type]
        pool = _pool(block, [r for k in block.kinds for r in by_kind.get(k, [])])
        try:
            main, practice_src = trial_type.block_trials(block, pool,
                                                         catch_pool[block.catch_trials :], rng)
        except ValueError as exc:
            raise TimelineProblem(block, None, str(exc)) from exc
        if drawn is not None and block.name in drawn:
            keep = set(drawn[block.name])
            main = [entry for entry in main if entry.get("stimulus") in keep]
        if block.shuffle:
            main = [main[i] for i in rng.permutation(len(main))]
        if block.max_trials is not None:
            main = main[: block.max_trials]
        practice = [
            dict(practice_src[i], practice=True)
            for i in rng.permutation(len(practice_src))[: block.practice]
        ]
        catch_entries = [trial_type.entry(block, r, rng, False) for r in catch]
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
            raise TimelineProblem(
                block, "repeats", f"block {block.name!r} asks for {block.repeats} repeats but has only "
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
    for internal in TRIAL_TYPES.values():
        closing = internal.closing_entry(spec) if internal.closing_entry is not None else None
        if closing is not None:
            entries.append({"index": len(entries), **closing})
    return {
        "version": TIMELINE_VERSION,
        "seed": seed,
        "condition": condition,
        "categories": categories,
        "trials": entries,
    }
