"""What a published dataset discloses of a study: the spec by an allow-list (URLs in it without their
query, fragment or user info), and times coarsened so that no row can be linked back to a
recruitment platform's submission list by when it arrived or how long it took."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

PUBLISHED_SPEC: Mapping[str, Any] = {
    "slug": None, "title": None, "language": None, "consent": None, "instructions": None, "manifest": None,
    "platform": {"preset": None, "completion": None, "resume": None, "sessions": None},
    "categories": {"label": None, "key": None},
    "key_mapping": None, "presentation": None, "blocks": None, "conditions": None,
    "completion": {"mturk_sandbox": None},
    "debrief": None, "exclusion": None, "allow_mobile": None, "fullscreen": None,
    "break_every": None, "exclude_participants_from": None, "allocation_cutoff_minutes": None,
    "timeout_minutes": None, "panel": None, "stopping": None, "adaptive": None, "display": None,
    "resume": None, "replication": None,
}
"""The spec's keys a dataset publishes: ``None`` publishes the value (every URL in it cut to scheme,
host and path), a mapping only the keys it lists (of a table, or of each table of a list). A key not
listed is never published, whatever its name: see :data:`WITHHELD_SPEC`."""

WITHHELD_SPEC = frozenset({
    "platform.participant_param", "platform.session_param", "platform.study_param",
    "platform.completion_url", "platform.server_completion_url", "platform.completion_code",
    "platform.id_pattern", "completion.prolific_code", "completion.exits", "recruitment", "privacy",
    "breaker",
})
"""The spec's keys deliberately left out: completion URLs (SONA's carry its credit token),
completion codes (the exits' codes and redirect URLs too), the platform's URL parameters and id
pattern, and the deployment tables."""

_URL = re.compile(r"https?://[^\s\"'<>()\[\]]*[^\s\"'<>()\[\].,;:!?]")
"""A URL in text, without the punctuation that ends its sentence."""


def _public_url(match: re.Match[str]) -> str:
    parts = urlsplit(match.group(0))
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def scrub(value: Any) -> Any:
    """``value`` with every URL in its strings cut to scheme, host and path (no query, fragment or
    user info, where tokens travel), at any depth."""
    if isinstance(value, str):
        return _URL.sub(_public_url, value)
    if isinstance(value, Mapping):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def public_spec(spec: Any, allowed: Mapping[str, Any] | None = PUBLISHED_SPEC) -> Any:
    """The part of ``spec`` that :data:`PUBLISHED_SPEC` lists, scrubbed (:func:`scrub`)."""
    if allowed is None:
        return scrub(spec)
    if isinstance(spec, Mapping):
        return {k: public_spec(v, allowed[k]) for k, v in spec.items() if k in allowed}
    if isinstance(spec, list):
        return [public_spec(v, allowed) for v in spec]
    return scrub(spec)  # a table's short form (``platform = "sona"``)


TIME_POLICIES = ("day", "offsets", "exact")
"""How ``humanlike publish --times`` publishes times: the UTC day (default), seconds from the
participant's own start, or as exported."""
EPOCH_MS_COLUMNS = ("client_time",)
"""Time columns written as milliseconds since the Unix epoch (the browser's clock)."""
DURATION_COLUMNS = ("duration_s", "completion_s")
"""Durations in seconds (arrival to completion): whole minutes under ``day``."""
_ISO_TIME = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"


def iso_time_columns(frame: pd.DataFrame) -> list[str]:
    """Columns whose every value is an ISO 8601 date and time (found by content, not by name)."""
    found = []
    for column in frame.columns:
        values = frame[column].dropna()
        if pd.api.types.is_datetime64_any_dtype(values) or (
                len(values) and values.map(lambda v: isinstance(v, str)).all()
                and values.str.match(_ISO_TIME).all()):
            found.append(column)
    return found


def coarse_durations(seconds: pd.Series, rules: Mapping[str, Any] | None) -> pd.Series:
    """Seconds rounded to whole minutes; where rounding would cross a completion-time rule's
    threshold (``min_completion_s``, ``max_completion_s``), the threshold's side is kept (the
    threshold itself, or a minute beyond it), so the published table excludes whom the study did."""
    exact = pd.to_numeric(seconds, errors="coerce").to_numpy(dtype=float)
    coarse = np.round(exact / 60.0) * 60.0
    low, high = ((rules or {}).get(k) for k in ("min_completion_s", "max_completion_s"))
    if low is not None:
        coarse = np.where((exact >= low) & (coarse < low), low, coarse)
        coarse = np.where((exact < low) & (coarse >= low), max(low - 60.0, 0.0), coarse)
    if high is not None:
        coarse = np.where((exact <= high) & (coarse > high), high, coarse)
        coarse = np.where((exact > high) & (coarse <= high), high + 60.0, coarse)
    return pd.Series(coarse, index=seconds.index, name=seconds.name)


def _origins(frames: Mapping[str, pd.DataFrame]) -> tuple[pd.Series, pd.Series]:
    """Each participant's arrival (server clock, from ``participants``) and first browser time
    (``client_time`` of ``trials``), the origins of ``offsets``."""
    people = frames.get("participants", pd.DataFrame(columns=["participant", "created_at"]))
    people = people.drop_duplicates("participant").set_index("participant")
    arrival = pd.to_datetime(people["created_at"], utc=True, format="ISO8601")
    trials = frames.get("trials", pd.DataFrame(columns=["participant", "client_time"]))
    first = pd.to_numeric(trials["client_time"], errors="coerce").groupby(
        trials["participant"]).min()
    return arrival, first


def coarsen_times(frames: Mapping[str, pd.DataFrame], policy: str,
                  rules: Mapping[str, Any] | None = None
                  ) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """The tables with their times published under ``policy`` (:data:`TIME_POLICIES`) and, per
    changed column, a note for its description. ``day``: dates and times as the UTC date
    (YYYY-MM-DD), durations in whole minutes (:func:`coarse_durations`); ``offsets``: seconds since
    the participant's arrival (server times) or first trial (browser times), the day in a table
    without a participant column; ``exact``: unchanged."""
    if policy not in TIME_POLICIES:
        raise ValueError(f"times must be one of {', '.join(TIME_POLICIES)}, not {policy!r}")
    if policy == "exact":
        return dict(frames), {}
    notes: dict[str, str] = {}
    arrival, first = _origins(frames) if policy == "offsets" else (None, None)
    out = {}
    day = "published as its UTC date (YYYY-MM-DD) only"
    for name, frame in frames.items():
        frame = frame.copy()
        offsets = policy == "offsets" and "participant" in frame.columns  # else: the day
        for column in iso_time_columns(frame):
            stamps = pd.to_datetime(frame[column], utc=True, format="ISO8601")
            if offsets:
                assert arrival is not None  # _origins' for the offsets policy
                origin = frame["participant"].map(arrival)
                frame[column] = ((stamps - origin).dt.total_seconds()).round(3)
                notes[column] = "published as seconds since the participant's arrival"
            else:
                frame[column] = stamps.dt.strftime("%Y-%m-%d")
                notes[column] = day
        for column in (c for c in EPOCH_MS_COLUMNS if c in frame.columns):
            millis = pd.to_numeric(frame[column], errors="coerce")
            if offsets:
                assert first is not None
                frame[column] = ((millis - frame["participant"].map(first)) / 1000.0).round(3)
                notes[column] = "published as seconds since the participant's first trial " \
                                "(browser clock)"
            else:
                frame[column] = pd.to_datetime(millis, unit="ms", utc=True).dt.strftime("%Y-%m-%d")
                notes[column] = day
        if policy == "day":
            for column in (c for c in DURATION_COLUMNS if c in frame.columns):
                frame[column] = coarse_durations(frame[column], rules)
                notes[column] = "published in whole minutes (kept on its side of the spec's " \
                                "completion-time rules)"
        out[name] = frame
    return out, notes
