"""The export reader: every analysis reads ``humanlike export`` output through here, so trial and
participant exclusions are applied once and the same way for ratings, error consistency and MLDS.

* practice trials are out of everything;
* catch trials are out of scoring (the rating frame keeps them for QC's catch accuracy);
* repeated presentations are out of scoring (the rating frame keeps them for repeat reliability);
* participants the export does not analyse (``participants`` table, ``analysed`` and
  ``analysed_reason``: left early, rejected, excluded by QC or the researcher;
  :mod:`humanlike.analysis.sample`) are out, unless ``include_excluded``; the export's decision is
  read, not recomputed. Simulated participants (a rehearsal the server recorded at arrival) are out
  with the reason "simulated" unless the spec's ``analyse_simulated`` let them in; the reader's
  ``include_simulated`` lets in exactly those (a rehearsal analysed on purpose, and said so).
  Without a participants table nobody is excluded here (the ratings analysis then applies its
  :class:`~humanlike.analysis.exclusions.ExclusionRules` itself).

Input: an export folder (``trials``, ``ratings``, ``triads``, ``classifications``, ``odd_one_out``,
``participants``, ``stimuli`` as ``.parquet`` or ``.csv``) or one table file, whose folder may hold the
``participants`` and ``stimuli`` tables that go with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from humanlike.analysis.sample import Sample, with_analysed
from humanlike.vocabulary import StimulusKind

TABLES = (
    "trials", "ratings", "triads", "classifications", "decisions", "odd_one_out", "participants",
    "stimuli", "trial_timing", "display",
)
_ID_COLUMNS = {"participant": str, "stimulus": str, "category": str}


def read_table(path: str | Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """One table from ``.parquet`` or ``.csv`` (participant, stimulus and category as strings);
    with ``columns``, only those of them the table has (less memory for large exports)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        if columns is None:
            return pd.read_parquet(path)
        import pyarrow.parquet as pq

        present = set(pq.read_schema(path).names)
        return pd.read_parquet(path, columns=[c for c in columns if c in present])
    if suffix in (".csv", ".txt", ".gz"):
        wanted = None if columns is None else set(columns)
        return pd.read_csv(path, dtype=_ID_COLUMNS,  # type: ignore[arg-type]
                           usecols=None if wanted is None else lambda c: c in wanted)
    raise ValueError(f"{path}: expected a .csv or .parquet file")


def find_table(folder: str | Path, name: str) -> Path | None:
    """``<name>.parquet`` (preferred) or ``<name>.csv`` in ``folder``, if either exists."""
    for suffix in (".parquet", ".csv"):
        candidate = Path(folder) / f"{name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def flag(frame: pd.DataFrame, column: str) -> pd.Series:
    """A boolean column read leniently (True/1/'true'); all false when the column is absent."""
    if column not in frame.columns:
        return pd.Series(False, index=frame.index)
    values = frame[column]
    if values.dtype == bool:
        return values
    text = values.astype(str).str.strip().str.lower().str.replace(r"\.0$", "", regex=True)
    return text.isin(["true", "1"])


@dataclass(frozen=True)
class Selection:
    """Trials left for an analysis, with one note per exclusion step (what was dropped)."""

    frame: pd.DataFrame
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Export:
    """The tables of one export (read lazily) and which participants its QC excluded."""

    source: Path
    paths: dict[str, Path]
    include_excluded: bool = False
    include_simulated: bool = False
    """Analyse the simulated participants the export left out for that alone (a rehearsal)."""
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)

    def has(self, name: str) -> bool:
        """Whether the export holds table ``name``."""
        return name in self.paths

    def table(self, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Table ``name`` as stored (no exclusions applied); ``ValueError`` if it is missing.
        With ``columns`` only those are read (and nothing is cached)."""
        if name not in self.paths:
            raise ValueError(
                f"{self.source} holds no {name}.csv or {name}.parquet (has: {sorted(self.paths)})"
            )
        if columns is not None and name not in self._cache:
            return read_table(self.paths[name], columns)
        if name not in self._cache:
            self._cache[name] = read_table(self.paths[name])
        return self._cache[name].copy()

    @property
    def participants(self) -> pd.DataFrame | None:
        """The export's participants table (with its QC columns and ``analysed`` /
        ``analysed_reason``, decided by :mod:`humanlike.analysis.sample` for an older export
        without them; simulated participants let in with ``include_simulated``), or ``None``."""
        if not self.has("participants"):
            return None
        people = self.table("participants")
        if "participant" not in people.columns:
            return people
        return with_analysed(people.assign(participant=people["participant"].astype(str)),
                             self.include_simulated)

    def excluded_participants(self) -> frozenset[str]:
        """Participants the export does not analyse (``analysed`` false: left early, rejected,
        excluded by QC or the researcher); empty with ``include_excluded``."""
        people = self.participants
        if self.include_excluded or people is None or "participant" not in people.columns:
            return frozenset()
        return frozenset(people.loc[~people["analysed"], "participant"])

    def sample_sentence(self) -> str | None:
        """"N analysed of M who arrived: ..." (:class:`humanlike.analysis.sample.Sample`), or None
        without a participants table."""
        people = self.participants
        if people is None or "participant" not in people.columns:
            return None
        if self.include_excluded:
            return (f"{len(people)} participants arrived; all with trials analysed "
                    "(--include-excluded: the export's exclusions are ignored).")
        return Sample.of(people).sentence()

    def scoring_trials(self, name: str, required: tuple[str, ...] = ()) -> Selection:
        """Trials of table ``name`` that an analysis scores: no practice, catch or repeated trials,
        no excluded participants; ``required`` columns must be present."""
        frame = self.table(name)
        missing = [c for c in required if c not in frame.columns]
        if missing:
            raise ValueError(
                f"{self.paths[name]} lacks column(s) {missing}: not a {name} export"
            )
        if "participant" in frame.columns:
            frame["participant"] = frame["participant"].astype(str)
        keep = pd.Series(True, index=frame.index)
        notes = []
        for label, column, drop in (
            ("practice", "practice", flag(frame, "practice")),
            ("repeated-presentation", "is_repeat", flag(frame, "is_repeat")),
            (StimulusKind.CATCH.value, "stimulus_kind", _is_catch(frame)),
        ):
            if column in frame.columns:
                notes.append(f"dropped {int((drop & keep).sum())} {label} trials")
                keep &= ~drop
        people = self.participants
        if (
            not self.include_excluded
            and people is not None
            and "participant" in people.columns
            and "participant" in frame.columns
        ):
            excluded = self.excluded_participants()
            drop = frame["participant"].isin(excluded)
            notes.append(
                f"dropped {len(excluded)} excluded participants ({int((drop & keep).sum())} trials)"
            )
            keep &= ~drop
        return Selection(frame[keep].reset_index(drop=True), tuple(notes))

    def classifications(self) -> Selection:
        """Classification trials for error consistency (scoring trials only)."""
        return self.scoring_trials("classifications", ("participant", "stimulus", "correct"))

    def decisions(self) -> Selection:
        """Rating trials read as decisions (highest-rated category) for error consistency."""
        return self.scoring_trials("decisions", ("participant", "stimulus", "correct"))

    def triads(self) -> Selection:
        """Triad trials for MLDS (scoring trials only)."""
        return self.scoring_trials("triads")

    def odd_one_out(self) -> Selection:
        """Odd-one-out triplet trials for the triplet metric (scoring trials only;
        ``humanlike.analysis.alignment.odd_one_out.triplet_counts``)."""
        return self.scoring_trials("odd_one_out", ("participant", "image_1", "image_2", "image_3",
                                                   "odd_one_out"))

    def ratings(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The rating frame for QC and scoring: practice trials out; catch and repeated trials kept
        (QC and reliability need them; scoring leaves them out); ``stimuli`` metadata joined.
        Excluded participants stay in for the QC table; pass :attr:`participants` and
        ``respect_export_exclusions=not include_excluded`` to the ratings analysis. ``columns``
        reads only those columns (of a large export)."""
        from humanlike.analysis.io.golan import golan_to_tidy, is_golan_frame
        from humanlike.analysis.ratings.data import attach_stimuli, validate_ratings

        frame = self.table("ratings", None if columns is None else [*columns, "practice"])
        if columns is not None and not {"participant", "stimulus", "category"} <= set(frame):
            frame = self.table("ratings")  # not our export's layout (e.g. Golan et al.): all of it
        if is_golan_frame(frame):
            return validate_ratings(golan_to_tidy(frame))
        frame = frame[~flag(frame, "practice")].reset_index(drop=True)
        if self.has("stimuli"):
            frame = attach_stimuli(frame, self.table("stimuli"))
        return validate_ratings(frame)


def _is_catch(frame: pd.DataFrame) -> pd.Series:
    if "stimulus_kind" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["stimulus_kind"].astype(str).str.lower() == StimulusKind.CATCH


def read_export(
    path: str | Path, table: str | None = None, include_excluded: bool = False,
    include_simulated: bool = False,
) -> Export:
    """The export at ``path``: a folder of tables, or one table file (named ``<table>.csv`` or
    ``.parquet``, or any name with ``table=``) whose folder may hold ``participants`` and
    ``stimuli``; ``include_simulated`` analyses a rehearsal's simulated participants too."""
    path = Path(path)
    if path.is_dir():
        paths = {name: p for name in TABLES if (p := find_table(path, name)) is not None}
        return Export(path, paths, include_excluded, include_simulated)
    if not path.is_file():
        raise ValueError(f"no such file or folder: {path}")
    name = table or path.name.split(".")[0]
    if name not in TABLES:
        raise ValueError(f"{path}: cannot tell which export table this is; pass table=")
    paths = {name: path}
    for companion in ("participants", "stimuli"):
        if companion != name and (found := find_table(path.parent, companion)) is not None:
            paths[companion] = found
    return Export(path, paths, include_excluded, include_simulated)
