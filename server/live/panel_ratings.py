"""The live panel's rating array, read straight from the database in chunks.

The panel used to write a temporary export, read its 16.4 M-row ratings table back into pandas and
build the participants x stimuli x categories array from it (12 GB at 2,000 participants x 820
trials). Here the rated trials are streamed by the one trial reader (``trial_store.trial_chunks``:
the driver's cursor, server-side on PostgreSQL), their JSON responses parsed by Arrow, and each chunk's first presentations are written into preallocated
per-participant cells that the process keeps: the next pass reads only the participants whose
stored trial count changed (trials are only ever added). Memory is every participant's cells plus
the analysed array (each participants x stimuli x categories floats: 131 MB at 2,000 x 820 x 10)
and one chunk.

The result is the array the export path gives (``read_export(...).ratings()`` ->
``clean_ratings`` -> ``rating_array`` of the participants that pass): practice trials out, catch and
repeated trials out of the array, ratings of trials faster than ``min_trial_rt_ms`` missing, the
analysis package's stimulus and category order, stimulus metadata normalised by the analysis
package's own ``attach_stimuli`` / ``validate_ratings`` / ``stimulus_table``. Who is excluded is the
export's decision, read from the stored QC (``participant_qc``, computed by the same ``rating_qc``
just before, in ``panel.refresh``) and the researcher's overrides (``overrides.decide``, the rule
``stats.excluded_clause`` states in SQL)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from humanlike.server.export.writer import stimulus_frame
from humanlike.server.extensions import db
from humanlike.server.participants import overrides, trial_store
from humanlike.server.tables.core import Experiment, Participant, ParticipantQC, Stimulus, Trial
from humanlike.server.trial_types import responses
from humanlike.server.trial_types.registry import rated_types

if TYPE_CHECKING:
    from humanlike.analysis.ratings.data import RatingArray

CHUNK_ROWS = 50_000
"""Rating trials read and parsed at a time (about 15 MB of JSON text)."""
IDS_PER_QUERY = 500
"""Participants named in one query's IN list (well below SQLite's bound-parameter limit)."""


@dataclass(frozen=True)
class PanelRatings:
    """The analysed participants' rating array, with who rated and who was excluded."""

    array: RatingArray
    n_rated: int
    """Participants with at least one non-practice rating trial (the export's QC table)."""
    n_excluded: int
    true_class: dict[str, Any]
    """The array's stimuli -> true class label (missing when the manifest gives none)."""
    n_read: int
    """Participants whose trials this pass read (the others' cells were current)."""


def exclusions(exp: Experiment, counts: dict[int, int] | None = None) -> pd.DataFrame:
    """Per participant (database id): public id and status, the export's ``excluded`` and
    ``exclusion_reasons`` (stored QC with the researcher's overrides, ``overrides.decide``) and its
    ``analysed`` / ``analysed_reason`` (``analysis.sample.decide_analysed``; ``counts``: trials
    stored per participant id, read when not given)."""
    from humanlike.analysis.exclusions import ExclusionRules
    from humanlike.analysis.sample import decide_analysed

    rows = db.session.execute(
        sa.select(Participant.id, Participant.public_id, Participant.status,
                  Participant.analysis_override, Participant.analysis_override_reason,
                  ParticipantQC.qc_failed, ParticipantQC.qc_reasons, Participant.simulated)
        .outerjoin(ParticipantQC, ParticipantQC.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id)).all()
    frame = pd.DataFrame(rows, columns=["id", "participant", "status", "override",
                                        "override_reason", "qc_failed", "qc_reasons", "simulated"]
                         ).set_index("id")
    frame["excluded"], frame["exclusion_reasons"] = overrides.decide(
        frame["override"], frame["override_reason"], frame["qc_failed"], frame["qc_reasons"])
    counts = trial_store.experiment_stored_counts(exp.id) if counts is None else counts
    frame["n_stored"] = [counts.get(int(i), 0) for i in frame.index]
    rules = ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))
    return decide_analysed(frame, rules.analyse_partial_data, rules.analyse_simulated)


def stimulus_metadata(exp: Experiment) -> pd.DataFrame:
    """Per stimulus id: key, kind, true class and stratum, normalised as the export's reader does."""
    from humanlike.analysis.ratings.data import attach_stimuli, stimulus_table, validate_ratings

    rows = db.session.execute(sa.select(Stimulus.id, Stimulus.key, Stimulus.kind)
                              .where(Stimulus.experiment_id == exp.id)).all()
    if not rows:
        return pd.DataFrame(columns=["stimulus", "kind", "true_class", "stratum"])
    frame = pd.DataFrame(rows, columns=["id", "stimulus", "stimulus_kind"])
    # one pseudo rating row per stimulus: the same joins and checks as a rating frame gets
    rated = attach_stimuli(frame.assign(participant="-", category="-", rating=np.nan),
                           stimulus_frame(exp))
    table = stimulus_table(validate_ratings(rated))
    return table.loc[frame["stimulus"]].set_index(pd.Index(frame["id"], name="id")).assign(
        stimulus=frame["stimulus"].to_numpy())


RATING_FIELDS = ("participant_id", "trial_index", "stimulus_id", "rt_ms", "is_repeat", "practice",
                 "response")
"""What the panel reads of each rated trial (``trial_store.FIELDS``)."""


def rating_chunks(exp: Experiment, ids: Sequence[int] | None = None) -> Iterator[pd.DataFrame]:
    """The experiment's rated trials (of the participants ``ids`` only, when given) from the one
    trial reader, ``CHUNK_ROWS`` at a time in the order the database reads them (a table scan)."""
    return trial_store.trial_chunks(RATING_FIELDS, experiment_id=exp.id, participant_ids=ids,
                                    trial_types=rated_types(), ordered=False,
                                    chunk_rows=CHUNK_ROWS)


def stored_trial_types(exp: Experiment) -> set[str]:
    """The trial types the experiment has stored trials of."""
    return set(db.session.execute(
        sa.select(Trial.trial_type).distinct()
        .join(Participant, Trial.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id)).scalars())


@dataclass
class _Cells:
    """Every participant's rating cells as last read (one row each, any exclusion): what a pass
    reuses for the participants whose stored trials did not change."""

    key: tuple[Any, ...]
    """What the cells depend on besides the trials: spec, rt threshold, stimuli, categories."""
    rows: dict[str, int]
    """Participant public id -> row."""
    stamps: dict[str, int]
    """Participant public id -> trials stored (of any type) when its cells were read."""
    values: np.ndarray
    """(rows, stimuli, categories) ratings, NaN where no first presentation."""
    written: np.ndarray
    """(rows, stimuli) trial index each cell holds, -1 for none."""
    rated: np.ndarray
    """(rows,) whether the participant has a non-practice rating trial."""

    @classmethod
    def empty(cls, key: tuple[Any, ...], shape: tuple[int, int]) -> _Cells:
        return cls(key, {}, {}, np.full((0, *shape), np.nan), np.full((0, shape[0]), -1, np.int64),
                   np.zeros(0, dtype=bool))

    def make_room(self, people: list[str]) -> None:
        """Give every listed participant a row (new ones empty); drop those no longer listed."""
        if set(people) == set(self.rows):
            return
        keep = [p for p in people if p in self.rows]
        old = np.array([self.rows[p] for p in keep], dtype=np.intp)
        values = np.full((len(people), *self.values.shape[1:]), np.nan)
        written = np.full((len(people), self.written.shape[1]), -1, dtype=np.int64)
        rated = np.zeros(len(people), dtype=bool)
        rows = {p: i for i, p in enumerate(people)}
        new = np.array([rows[p] for p in keep], dtype=np.intp)
        values[new], written[new], rated[new] = self.values[old], self.written[old], self.rated[old]
        self.values, self.written, self.rated, self.rows = values, written, rated, rows
        self.stamps = {p: self.stamps[p] for p in keep}

    def clear(self, rows: np.ndarray) -> None:
        self.values[rows], self.written[rows], self.rated[rows] = np.nan, -1, False


_CELLS: dict[tuple[str, int], _Cells] = {}
"""Per (database, experiment): the cells this process read last (the panel worker's pass)."""


def _read_cells(exp: Experiment, cells: _Cells, ids: list[int], rows: np.ndarray,
                labels: list[str], columns: np.ndarray, stimulus_ids: pd.Index,
                column_of: np.ndarray, min_trial_rt_ms: float | None, threads: bool) -> None:
    """Read the rating trials of the participants ``ids`` (database ids, in ``rows``) into
    ``cells``: their first presentations' ratings, in the later trial where a stimulus was shown
    twice without being marked a repeat (the export's trial order)."""
    parts: Iterator[pd.DataFrame] = rating_chunks(exp)  # most of them: one table scan
    if len(ids) <= len(cells.rows) // 2:  # a few: by the participant index
        parts = (part for i in range(0, len(ids), IDS_PER_QUERY)
                 for part in rating_chunks(exp, ids[i:i + IDS_PER_QUERY]))
    row_of = pd.Index(np.asarray(ids, dtype=np.int64))
    for part in parts:
        found = row_of.get_indexer(pd.Index(part["participant_id"].to_numpy()))
        if not (found >= 0).any():
            continue
        main = ~part["practice"].to_numpy(dtype=bool) & (found >= 0)
        stimulus = part["stimulus_id"].to_numpy(dtype=np.int64, na_value=-1)
        if (stimulus[main] < 0).any():
            raise ValueError("ratings column 'stimulus' has empty values")
        row = np.where(found >= 0, rows[found], -1)
        cells.rated[row[main]] = True
        place = stimulus_ids.get_indexer(pd.Index(stimulus))
        column = np.full(len(place), -1)
        column[place >= 0] = column_of[place[place >= 0]]
        repeat, rt, index = part["is_repeat"], part["rt_ms"], part["trial_index"]
        use = main & ~repeat.to_numpy(dtype=bool) & (column >= 0)
        ratings = responses.rating_values(part["response"].tolist(), labels,
                                            threads)[use][:, columns]  # all checked
        if min_trial_rt_ms is not None:
            ratings[rt.to_numpy(dtype=float)[use] < float(min_trial_rt_ms)] = np.nan
        trial = index.to_numpy(dtype=np.int64)[use]
        by_index = np.argsort(trial, kind="stable")  # within the chunk, later trials last
        row, column, trial, ratings = row[use][by_index], column[use][by_index], trial[by_index], \
            ratings[by_index]
        newer = trial > cells.written[row, column]
        cells.values[row[newer], column[newer]] = ratings[newer]
        cells.written[row[newer], column[newer]] = trial[newer]


def panel_ratings(exp: Experiment, min_trial_rt_ms: float | None,
                  threads: bool = False) -> PanelRatings:
    """The rating array of the participants that pass, read from the database in chunks; only
    the participants whose stored trials changed since this process's last pass are read."""
    # ValueError as the ratings analysis raises it: fewer than two pass, or no first presentation
    # of a scored stimulus; threads: parse the JSON texts on Arrow's threads. Trials are only ever
    # added (a replay never changes a stored one), so a participant's trial count tells whether its
    # cells are current; the counts are read before the trials, so a trial stored in between is
    # read now or on the next pass, never missed.
    from humanlike.analysis.ratings.data import (
        SCORED_KINDS,
        RatingArray,
        category_order,
        stimulus_order,
    )

    labels = [str(c["label"]) for c in exp.spec.get("categories", [])]
    categories = category_order(labels)
    columns = np.array([labels.index(c) for c in categories], dtype=np.intp)
    counts = trial_store.experiment_stored_counts(exp.id)
    people = exclusions(exp, counts)
    # the analysed set decides who is in the array (left early, rejected, excluded: out)
    people = people.assign(excluded=~people["analysed"], exclusion_reasons=people["analysed_reason"])
    stimuli = stimulus_metadata(exp)
    scored = stimuli[stimuli["kind"].isin(SCORED_KINDS)].set_index("stimulus")
    order = stimulus_order(scored)
    stimulus_ids = pd.Index(stimuli.index)
    column_of = pd.Index(order).get_indexer(pd.Index(stimuli["stimulus"]))  # -1: not scored
    key = (exp.spec_hash, min_trial_rt_ms, tuple(order), tuple(categories),
           tuple(stimulus_ids), tuple(stimuli["stimulus"]))
    where = (str(db.engine.url), exp.id)
    cells = _CELLS.get(where)
    if cells is None or cells.key != key:
        cells = _CELLS[where] = _Cells.empty(key, (len(order), len(categories)))
    public = people["participant"].tolist()
    cells.make_room(public)
    stamp = [counts.get(int(i), 0) for i in people.index]
    changed = [(int(i), p, n) for i, p, n in zip(people.index, public, stamp)
               if cells.stamps.get(p) != n]
    if changed:
        ids = [i for i, _, _ in changed]
        rows = np.array([cells.rows[p] for _, p, _ in changed], dtype=np.intp)
        cells.clear(rows)
        try:
            _read_cells(exp, cells, ids, rows, labels, columns, stimulus_ids, column_of,
                        min_trial_rt_ms, threads)
        except BaseException:
            del _CELLS[where]  # half read: start afresh next time
            raise
        cells.stamps.update((p, n) for _, p, n in changed)
    in_cells = np.array([cells.rows[p] for p in public], dtype=np.intp)
    rated = cells.rated[in_cells]
    excluded = people["excluded"].to_numpy(dtype=bool)
    n_passing = int((rated & ~excluded).sum())
    failing = people.loc[rated & excluded].sort_values("participant")
    if n_passing < 2:
        reasons = [f"export: {why}" if why else "export" for why in failing["exclusion_reasons"]]
        raise ValueError(f"only {n_passing} participant(s) pass QC; the analysis needs at least "
                         f"two (exclusions: {reasons})")
    kept = sorted(people.loc[~people["excluded"], "participant"])
    kept_rows = np.array([cells.rows[p] for p in kept], dtype=np.intp)
    written = cells.written[kept_rows]
    has_row = np.asarray((written >= 0).any(axis=1))
    has_column = np.asarray((written >= 0).any(axis=0))
    if not has_row.any():
        raise ValueError(f"no first-presentation ratings of stimulus kind(s) {sorted(SCORED_KINDS)}")
    values = cells.values[np.ix_(kept_rows[has_row], np.flatnonzero(has_column))]
    names = [s for s, keep in zip(order, has_column) if keep]
    meta = scored.loc[names]
    array = RatingArray(
        values=values,
        participants=tuple(p for p, keep in zip(kept, has_row) if keep),
        stimuli=tuple(names),
        categories=tuple(categories),
        kinds=tuple(meta["kind"].astype(str)),
        strata=tuple(meta["stratum"].astype(str)),
    )
    return PanelRatings(array=array, n_rated=int(rated.sum()), n_excluded=len(failing),
                        true_class=dict(zip(names, meta["true_class"].astype(str))),
                        n_read=len(changed))
