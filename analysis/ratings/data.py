"""Rating experiments: load the tidy export, clean trials, QC participants, build the rating array.

The input is the canonical tidy frame (``ratings.csv`` of ``humanlike export``: one row per trial and
category with ``participant, stimulus, category, rating, rt_ms, is_repeat, stimulus_kind, ...``),
optionally joined with ``stimuli.csv`` (``true_class``, ``targeted_model_1/2``), or the published long
format of Golan, Raju & Kriegeskorte (2020), read by :mod:`humanlike.analysis.io.golan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from humanlike.analysis.exclusions import ExclusionRules, as_rules
from humanlike.analysis.ratings.reliability import repeat_reliability
from humanlike.vocabulary import StimulusKind

REQUIRED_COLUMNS = ("participant", "stimulus", "category", "rating")
SCORED_KINDS = (StimulusKind.NATURAL.value, StimulusKind.CONTROVERSIAL.value)
STIMULUS_METADATA = (
    "true_class",
    "targeted_model_1",
    "targeted_model_2",
    "targeted_class_1",
    "targeted_class_2",
)
_KIND_ORDER: dict[str, int] = {StimulusKind.NATURAL: 0, StimulusKind.CONTROVERSIAL: 1, StimulusKind.CATCH: 2}


# --------------------------------------------------------------------------- loading


def load_ratings(path: str | Path) -> pd.DataFrame:
    """The tidy rating frame from an export folder, a ratings CSV/Parquet, or a Golan et al. CSV.

    Read by :mod:`humanlike.analysis.io.export`: practice trials out, ``stimuli`` metadata (kind,
    ``true_class``, targeted models) joined; a file whose columns include ``subject code`` is read
    as the Golan et al. (2020) long format.
    """
    from humanlike.analysis.io.export import read_export

    return read_export(path, table="ratings").ratings()


def load_participants(path: str | Path) -> pd.DataFrame | None:
    """``participants.csv``/``.parquet`` of an export folder (or next to a ratings file), if present."""
    from humanlike.analysis.io.export import read_export

    return read_export(path, table="ratings").participants


def attach_stimuli(ratings: pd.DataFrame, stimuli: pd.DataFrame) -> pd.DataFrame:
    """Join ``stimuli.csv`` metadata (kind, true class, targeted models) onto the rating rows."""
    if "stimulus" not in stimuli.columns:
        raise ValueError("stimuli table has no 'stimulus' column")
    keep = ["stimulus"] + [c for c in (*STIMULUS_METADATA, "kind") if c in stimuli.columns]
    meta = stimuli[keep].copy()
    meta["stimulus"] = meta["stimulus"].astype(str)
    meta = meta.drop_duplicates("stimulus")
    already = [c for c in keep[1:] if c in ratings.columns]
    meta = meta.drop(columns=already)
    out = ratings.copy()
    out["stimulus"] = out["stimulus"].astype(str)
    out = out.merge(meta, on="stimulus", how="left")
    if "stimulus_kind" not in out.columns and "kind" in out.columns:
        out = out.rename(columns={"kind": "stimulus_kind"})
    elif "kind" in out.columns:
        out = out.drop(columns="kind")
    return out


# --------------------------------------------------------------------------- validation, cleaning


def validate_ratings(frame: pd.DataFrame) -> pd.DataFrame:
    """Check and normalise a tidy rating frame (string ids, float ratings in [0, 1], bool repeats)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError("ratings must be a pandas DataFrame")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"ratings frame lacks column(s) {missing}; it has {list(frame.columns)}")
    out = frame.copy()
    for column in ("participant", "stimulus", "category"):
        if out[column].isna().any():
            raise ValueError(f"ratings column {column!r} has empty values")
        out[column] = out[column].astype(str)
    try:
        out["rating"] = pd.to_numeric(out["rating"], errors="raise").astype(float)
    except (TypeError, ValueError):
        raise ValueError(
            "ratings column 'rating' must be numeric (0..1, empty if unanswered)"
        ) from None
    bad = out["rating"].notna() & ~out["rating"].between(0.0, 1.0)
    if bad.any():
        raise ValueError(
            f"ratings column 'rating' must lie in [0, 1]; found {out.loc[bad, 'rating'].iloc[0]!r}"
        )
    out["is_repeat"] = _as_bool(out["is_repeat"]) if "is_repeat" in out.columns else False
    if "rt_ms" in out.columns:
        try:
            out["rt_ms"] = pd.to_numeric(out["rt_ms"], errors="raise").astype(float)
        except (TypeError, ValueError):
            raise ValueError("ratings column 'rt_ms' must be numeric (milliseconds)") from None
    else:
        out["rt_ms"] = np.nan
    for column in STIMULUS_METADATA:
        if column in out.columns:
            out[column] = _as_labels(out[column])
    # Missing kinds: controversial when a targeted model is named, else natural.
    targeted = out["targeted_model_1"].notna() if "targeted_model_1" in out.columns else False
    inferred = pd.Series(np.where(targeted, StimulusKind.CONTROVERSIAL.value, StimulusKind.NATURAL.value), index=out.index)
    kind = out.get("stimulus_kind", pd.Series(np.nan, index=out.index, dtype=object))
    out["stimulus_kind"] = kind.fillna(inferred).astype(str).str.lower()
    key = ["participant", "stimulus", "category", "is_repeat"]
    if "trial_index" in out.columns and out["trial_index"].notna().all():
        key = ["participant", "trial_index", "category"]
    duplicated = out.duplicated(key)
    if duplicated.any():
        row = out.loc[duplicated, key].iloc[0].to_dict()
        raise ValueError(f"ratings frame has duplicate rows for {row} (key columns {key})")
    return out


def _as_bool(series: pd.Series) -> pd.Series:
    if series.dtype == bool:
        return series
    mapping = {"true": True, "false": False, "1": True, "0": False, "": False, "nan": False}
    text = series.astype(str).str.strip().str.lower()
    text = text.str.replace(r"\.0$", "", regex=True)
    unknown = ~text.isin(list(mapping))
    if unknown.any():
        raise ValueError(
            f"ratings column 'is_repeat' must be boolean; found {series[unknown].iloc[0]!r}"
        )
    return text.map(mapping).astype(bool)


def _as_labels(series: pd.Series) -> pd.Series:
    """:func:`_as_label` applied once per distinct value."""
    values = series.dropna().unique()
    return series.map(dict(zip(values, map(_as_label, values))))


def _as_label(value: object) -> object:
    """Category-like labels as strings ('3', not 3.0); missing stays missing."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return np.nan
    if isinstance(value, str):
        return value if value.strip() else np.nan
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def clean_ratings(frame: pd.DataFrame, min_trial_rt_ms: float | None = 100.0) -> pd.DataFrame:
    """Ratings of trials answered faster than ``min_trial_rt_ms`` become missing (column ``too_fast``)."""
    out = validate_ratings(frame)
    too_fast = np.zeros(len(out), dtype=bool)
    if min_trial_rt_ms is not None:
        too_fast = (out["rt_ms"] < float(min_trial_rt_ms)).to_numpy()
    out["too_fast"] = too_fast
    out.loc[too_fast, "rating"] = np.nan
    return out


# --------------------------------------------------------------------------- the rating array


@dataclass(frozen=True)
class RatingArray:
    """Ratings as a participants x stimuli x categories array with NaN where nothing was observed.

    Stimuli are ordered natural first, then controversial, then by id; ``strata`` gives each stimulus'
    resampling stratum ('natural' or the unordered targeted model pair 'a vs b').
    """

    values: np.ndarray
    participants: tuple[str, ...]
    stimuli: tuple[str, ...]
    categories: tuple[str, ...]
    kinds: tuple[str, ...]
    strata: tuple[str, ...]

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of observed ratings, same shape as ``values``."""
        return np.isfinite(self.values)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.values.shape  # type: ignore[return-value]

    def select_stimuli(self, mask: np.ndarray | Sequence[bool]) -> RatingArray:
        """The same participants and categories on the stimuli where ``mask`` is true."""
        mask = np.asarray(mask, dtype=bool)
        idx = np.flatnonzero(mask)
        return RatingArray(
            values=self.values[:, idx, :],
            participants=self.participants,
            stimuli=tuple(self.stimuli[i] for i in idx),
            categories=self.categories,
            kinds=tuple(self.kinds[i] for i in idx),
            strata=tuple(self.strata[i] for i in idx),
        )

    def subset(self, kinds: str | Iterable[str]) -> RatingArray:
        """Only stimuli of the given kind(s), e.g. ``subset('controversial')``."""
        wanted = {kinds} if isinstance(kinds, str) else set(kinds)
        return self.select_stimuli(np.array([k in wanted for k in self.kinds], dtype=bool))


def stimulus_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per stimulus: ``kind``, ``true_class`` and resampling ``stratum``, indexed by stimulus."""
    columns = ["stimulus", "stimulus_kind"] + [c for c in STIMULUS_METADATA if c in frame.columns]
    table = frame[columns].drop_duplicates("stimulus").set_index("stimulus")
    table = table.rename(columns={"stimulus_kind": "kind"})
    if "true_class" not in table.columns:
        table["true_class"] = np.nan
    table["stratum"] = _strata(table)
    return table


def _strata(table: pd.DataFrame) -> pd.Series:
    kind = table["kind"].astype(str)
    stratum = kind.copy()
    if "targeted_model_1" in table.columns and "targeted_model_2" in table.columns:
        a = table["targeted_model_1"]
        b = table["targeted_model_2"]
        has_pair = (kind == StimulusKind.CONTROVERSIAL) & a.notna() & b.notna()
        pairs = [" vs ".join(sorted((str(x), str(y)))) for x, y in zip(a[has_pair], b[has_pair])]
        stratum.loc[has_pair] = pairs  # type: ignore[call-overload]  # stubs reject a list value
    return stratum


def category_order(categories: Iterable[str]) -> list[str]:
    """The rating array's category order: numerically when every label is a number, else by name."""
    # the distinct labels first: iterating millions of Arrow-backed strings in Python is slow
    unique = categories.unique() if isinstance(categories, pd.Series) else categories
    labels = sorted(set(unique))
    try:
        return sorted(labels, key=float)
    except ValueError:
        return labels


def stimulus_order(stimuli: pd.DataFrame) -> list[str]:
    """Stimulus ids (:func:`stimulus_table`'s index) natural first, then controversial, each by id."""
    kind = stimuli["kind"]
    return sorted(stimuli.index, key=lambda s: (_KIND_ORDER.get(cast(str, kind[s]), 9), s))


def rating_array(
    frame: pd.DataFrame,
    kinds: str | Iterable[str] = SCORED_KINDS,
    participants: Iterable[str] | None = None,
) -> RatingArray:
    """First presentations of ``kinds`` stimuli as a :class:`RatingArray` (repeats are left out)."""
    frame = validate_ratings(frame)
    wanted = {kinds} if isinstance(kinds, str) else set(kinds)
    rows = frame[~frame["is_repeat"] & frame["stimulus_kind"].isin(wanted)]
    if participants is not None:
        keep = {str(p) for p in participants}
        rows = rows[rows["participant"].isin(keep)]
    if rows.empty:
        raise ValueError(f"no first-presentation ratings of stimulus kind(s) {sorted(wanted)}")
    stimuli = stimulus_table(rows)
    order = stimulus_order(stimuli)
    stimuli = stimuli.loc[order]
    people = sorted(rows["participant"].unique())
    categories = category_order(rows["category"])
    p = pd.Categorical(rows["participant"], categories=people).codes
    s = pd.Categorical(rows["stimulus"], categories=order).codes
    k = pd.Categorical(rows["category"], categories=categories).codes
    values = np.full((len(people), len(order), len(categories)), np.nan)
    values[p, s, k] = rows["rating"].to_numpy(dtype=float)
    return RatingArray(
        values=values,
        participants=tuple(people),
        stimuli=tuple(order),
        categories=tuple(categories),
        kinds=tuple(stimuli["kind"].astype(str)),
        strata=tuple(stimuli["stratum"].astype(str)),
    )


# --------------------------------------------------------------------------- participant QC


def trial_table(frame: pd.DataFrame, validated: bool = False) -> pd.DataFrame:
    """One row per rating trial: participant, stimulus, kind, is_repeat, rt_ms, max rating and accuracy.

    ``correct`` is true when the true class got a strictly higher rating than every other category
    (argmax rating = true class, ties count as wrong); it is NaN for unanswered trials and for
    stimuli without a true class. ``validated``: ``frame`` is already :func:`validate_ratings`'
    output (checked once, not again).
    """
    frame = frame if validated else validate_ratings(frame)
    if "trial_index" in frame.columns and frame["trial_index"].notna().all():
        key = ["participant", "trial_index"]
    else:
        key = ["participant", "stimulus", "is_repeat"]
    if "true_class" not in frame.columns:
        frame = frame.assign(true_class=np.nan)
    rating = frame["rating"]
    groups = frame.groupby(key, sort=False)
    top = groups["rating"].transform("max")
    at_top = (rating == top).groupby([frame[c] for c in key], sort=False).transform("sum")
    is_true = frame["category"] == frame["true_class"]
    true_rating = rating.where(is_true)
    trials = frame.assign(
        _top=top, _n_top=at_top, _true=true_rating, _answered=rating.notna(), _is_true=is_true
    )
    agg = trials.groupby(key, sort=False).agg(
        stimulus=("stimulus", "first"),
        kind=("stimulus_kind", "first"),
        is_repeat=("is_repeat", "first"),
        rt_ms=("rt_ms", "first"),
        max_rating=("_top", "first"),
        n_at_max=("_n_top", "first"),
        true_rating=("_true", "max"),
        has_true=("_is_true", "any"),
        answered=("_answered", "any"),
    )
    agg = agg.reset_index()
    correct = (agg["true_rating"] == agg["max_rating"]) & (agg["n_at_max"] == 1)
    agg["correct"] = correct.astype(float).where(agg["answered"] & agg["has_true"])
    agg["all_zero"] = (agg["max_rating"] == 0).astype(float).where(agg["answered"])
    return agg.drop(columns=["true_rating", "has_true", "n_at_max"])


def identical_run_share(frame: pd.DataFrame, trials: pd.DataFrame) -> pd.Series:
    """Per participant: the longest run of consecutive trials (in trial order) with the same
    rating of every category, as a share of their trials (a straight-liner's is 1). A trial's
    response is summarised by the wrapping sum of the 64-bit hashes of its (category, rating)
    cells, so the comparison is one vectorised pass."""
    if frame.empty:  # no rating trial yet (a practice trial only): np.r_ below would invent one
        return pd.Series(dtype=float)
    key = ["participant", "trial_index"] if "trial_index" in frame.columns and (
        frame["trial_index"].notna().all()) else ["participant", "stimulus", "is_repeat"]
    cells = pd.util.hash_pandas_object(
        frame[["category", "rating"]].astype({"category": str}), index=False)
    response = cells.groupby([frame[c] for c in key], sort=True).sum()
    people = response.index.get_level_values("participant").to_numpy()
    values = response.to_numpy()
    same = np.r_[False, (values[1:] == values[:-1]) & (people[1:] == people[:-1])]
    run = np.cumsum(~same)  # run id of each trial
    lengths = pd.Series(run).map(pd.Series(run).value_counts()).to_numpy()
    longest = pd.Series(lengths, index=people).groupby(level=0).max()
    n_trials = trials.groupby("participant").size()
    return (longest / n_trials.reindex(longest.index)).astype(float)


RULE_CHECKS: dict[str, tuple[str, str]] = {
    "min_natural_accuracy": ("natural_accuracy", "<"),
    "min_catch_accuracy": ("catch_accuracy", "<"),
    "min_repeat_reliability": ("repeat_r", "<"),
    "max_all_zero_share": ("all_zero_share", ">"),
    "max_identical_run_share": ("identical_run_share", ">"),
    "min_median_rt_ms": ("median_rt_ms", "<"),
    "max_median_rt_ms": ("median_rt_ms", ">"),
    "min_completion_s": ("completion_s", "<"),
    "max_completion_s": ("completion_s", ">"),
}
"""Each participant rule of :class:`ExclusionRules`: the QC column it reads and the comparison
that excludes ('<': a value below the threshold, '>': above it)."""


def participant_qc(
    frame: pd.DataFrame,
    participants: pd.DataFrame | None = None,
    rules: ExclusionRules | Mapping[str, object] | None = None,
    respect_export_exclusions: bool = True,
    validated: bool = False,
) -> pd.DataFrame:
    """Per-participant QC table with ``excluded`` and ';'-joined ``exclusion_reasons``.

    Columns: natural and catch accuracy (argmax rating = true class, over answered trials), median
    trial RT, repeat reliability r and its n, share of all-zero ratings on natural images, share of
    missing (unanswered or too fast) trials, the longest run of identical responses as a share of
    the trials (:func:`identical_run_share`) and completion time (``duration_s`` of
    ``participants``).
    ``frame`` should be the cleaned frame of :func:`clean_ratings`. A rule whose metric is NaN (e.g.
    no catch trials) does not exclude anyone. Participants that ``participants`` (the export's
    table) does not analyse (``analysed`` false, :mod:`humanlike.analysis.sample`: left early,
    rejected, excluded) are excluded, with reason 'export: <analysed_reason>', unless
    ``respect_export_exclusions`` is false. ``validated``: ``frame`` is already checked (the output
    of :func:`clean_ratings` or :func:`validate_ratings`), so it is not checked again.
    """
    rules = as_rules(rules)
    frame = frame if validated else validate_ratings(frame)
    trials = trial_table(frame, validated=True)
    by = trials.groupby("participant")
    qc = pd.DataFrame(index=pd.Index(sorted(trials["participant"].unique()), name="participant"))
    qc["n_trials"] = by.size()
    qc["missing_share"] = 1.0 - by["answered"].mean()
    natural = trials[trials["kind"] == StimulusKind.NATURAL]
    qc["natural_accuracy"] = natural.groupby("participant")["correct"].mean()
    qc["n_natural"] = natural.groupby("participant")["correct"].count()
    catch = trials[trials["kind"] == StimulusKind.CATCH]
    qc["catch_accuracy"] = catch.groupby("participant")["correct"].mean()
    qc["median_rt_ms"] = by["rt_ms"].median()
    qc["all_zero_share"] = natural.groupby("participant")["all_zero"].mean()
    qc["identical_run_share"] = identical_run_share(frame, trials)
    rel = repeat_reliability(frame)
    qc["repeat_r"] = rel["r"]
    qc["repeat_n"] = rel["n"]
    qc["completion_s"] = np.nan
    if participants is not None and "duration_s" in participants.columns:
        people = participants.assign(participant=participants["participant"].astype(str))
        duration = people.drop_duplicates("participant").set_index("participant")["duration_s"]
        qc["completion_s"] = pd.to_numeric(duration, errors="coerce").reindex(qc.index)
    qc["n_natural"] = qc["n_natural"].fillna(0).astype(int)
    qc["repeat_n"] = qc["repeat_n"].fillna(0).astype(int)

    reasons: pd.Series = pd.Series([[] for _ in range(len(qc))], index=qc.index, dtype=object)
    for rule, (column, op) in RULE_CHECKS.items():
        threshold = getattr(rules, rule)
        if threshold is None:
            continue
        value = qc[column]
        failed = value < threshold if op == "<" else value > threshold
        for participant in qc.index[failed.fillna(False).to_numpy(dtype=bool)]:
            reasons[participant].append(f"{column} {value[participant]:.4g} {op} {threshold:g}")
    if respect_export_exclusions and participants is not None and (
            {"excluded", "analysed"} & set(participants.columns)):
        from humanlike.analysis.sample import with_analysed

        marked = with_analysed(participants.assign(
            participant=participants["participant"].astype(str)))
        marked = marked[~marked["analysed"]]
        why = marked["analysed_reason"]
        for participant, text in zip(marked["participant"], why.astype(str)):
            if participant in reasons.index:
                reasons[participant].append(f"export: {text}" if text else "export")
    qc["excluded"] = reasons.map(bool)
    qc["exclusion_reasons"] = reasons.map(";".join)
    return qc.reset_index()
