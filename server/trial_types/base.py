"""What every trial type is made of: ``TrialType`` (one registry entry), the frame builders' input
(``ExportInput``), derived tables, timeline ``Entry`` and the default one-trial-per-stimulus entry."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from humanlike.vocabulary import StimulusKind

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from humanlike.server.study.manifest import StimulusRecord
    from humanlike.server.study.spec import Block, ExperimentSpec


Entry = dict[str, Any]
"""A timeline entry: what the browser shows for one trial (stored as the trial's ``design``)."""


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


def stimulus_entry(block: Block, rec: StimulusRecord, rng: np.random.Generator,
                   practice: bool = False) -> Entry:
    """One trial on one stimulus (a rating; the catch trials of every block): its type, block,
    stimulus and the stimulus' kind. Draws nothing from ``rng``."""
    return stimulus_entry_with(block, rec)


def stimulus_entry_with(block: Block, rec: StimulusRecord, **extra: Any) -> Entry:
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
    """What a simulated answer reads (``humanlike.server.demo.simulate.SimulatedStudy``)."""

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
    label_answer: Callable[[Sequence[str], str], dict[str, Any]] | None = None
    """The response that picks one label, ``(labels, label)``: what the lazy and replay agents of
    ``server/demo/agents.py`` send; None: the agents answer this type as the noisy human."""
    model_answer: Callable[[Sequence[str], np.ndarray], dict[str, Any]] | None = None
    """A model's response from its probabilities over the labels (the model agent); None: as the
    noisy human."""
    timeout_answer: dict[str, Any] | None = None
    """The response a trial answered too late sends (with no reaction time); None: the type has
    no timeout, and a replayed timeout answers at the recording's median reaction time."""
    summary: Callable[[dict[str, Any]], str] | None = None
    """A stored response in a few words for the dashboard's participant page (the triad's "left
    image chosen as more similar"); None: the page's generic summary (ratings, answers, choice)."""
    participant_qc: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    """Per-participant QC metrics of this type's stored trials (``live/qc.py``'s ``TRIAL_FIELDS``,
    ``response`` as stored JSON): a frame indexed by participant, one column per metric, kept
    among each participant's stored QC metrics; None: the type adds none."""

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
