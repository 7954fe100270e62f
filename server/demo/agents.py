"""Agents that answer a simulated participant's trials (``humanlike simulate --agent``), the
non-humans the authenticity screen (docs/authenticity.md) must tell from a human visual system.

Every agent answers each entry of the participant's timeline (``answer``) and gives its reaction
time (``rt_ms``; ``None``: the noisy human's log-normal draw of ``SimulatedStudy.timing``); the
presented duration is computed from it as for the human. Internal trials (the debrief) and trial
types an agent has no rule for get the human's answer (the type's ``simulate``).

* ``human``: the noisy human of ``simulate.py`` (model probabilities plus rating noise, lapses,
  the MLDS observer, log-normal reaction times);
* ``model``: the observer model itself: every rating its probabilities rounded to the nearest
  rating level with no noise (catch trials too; a stimulus it has no response for: the true class
  at 1), every classification its most probable class with no lapse; triads and reaction times
  as the human's;
* ``replay``: a real human's responses and reaction times replayed, in their order, onto the
  trials of its own timeline (``load_recording``): the k-th answered trial gets the k-th recorded
  response and RT (cycling when the recording is shorter; every participant replays it from its
  start), whatever the stimulus. A response that is a study label stays itself; any other maps to
  ``labels[rank % len(labels)]``, its rank (0-based) among the recording's distinct responses
  sorted as text (``mapped_labels``). A classification takes the label, a rating rates it 1 and
  every other label 0, a triad chooses left for a label at an even position of the study's labels
  and right for an odd one (each type's ``label_answer``). A recorded timeout (``na``, its
  RT missing) replays as a timeout on a classification trial (``na``, no RT, as the browser sends
  it) and elsewhere as its mapped label at the recording's median RT. Without a recording: a
  noisy human answers the participant's timeline in memory (its own seed-derived draws, nothing
  sent) and its answers and RTs are replayed shuffled within each trial type, so each lands on
  another trial;
* ``lazy``: a fixed key: every classification the first label, every rating the first label at 1
  and the others at 0, every triad left; reaction times 450 ms plus uniform jitter in [-5, 5] ms;
* ``scripted``: a browser agent (``server/demo/scripted_agent.py``, Playwright) that takes part
  through the task page and reads the study's model probabilities itself; nothing here answers
  for it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from humanlike.server.trial_types.classification import NO_RESPONSE
from humanlike.server.trial_types.registry import TRIAL_TYPES

if TYPE_CHECKING:
    from humanlike.server.demo.simulate import SimulatedStudy

AGENTS = ("human", "model", "replay", "lazy", "scripted")
LAZY_RT_MS = 450.0
LAZY_JITTER_MS = 5.0
MVH_COLUMNS = ("subj", "trial", "rt", "object_response")
EXPORT_COLUMNS = ("participant", "trial_index", "rt_ms")


def simulated_answer(observer: SimulatedStudy, entry: dict[str, Any],
                     fails_catch: bool) -> dict[str, Any]:
    """The noisy human's response to one entry: its type's ``simulate`` (ValueError for none)."""
    name = entry.get("type")
    trial_type = TRIAL_TYPES.get(str(name))
    if trial_type is None or trial_type.simulate is None:
        raise ValueError(f"no simulated answer for trial type {name!r}")
    return trial_type.simulate(observer, entry, fails_catch)


def is_internal(entry: dict[str, Any]) -> bool:
    """Whether the entry is an internal trial (the debrief: no timing, no agent rule)."""
    trial_type = TRIAL_TYPES.get(str(entry.get("type")))
    return trial_type is not None and trial_type.internal


class HumanAgent:
    """The noisy human: each type's ``simulate``, log-normal reaction times (``timing``)."""

    def __init__(self, study: SimulatedStudy) -> None:
        self.study = study

    def begin(self, number: int, entries: list[dict[str, Any]]) -> None:
        """Prepare for participant ``number``, whose timeline is ``entries``."""

    def answer(self, entry: dict[str, Any], fails_catch: bool) -> dict[str, Any]:
        """The response to one timeline entry (what the browser sends as ``response``)."""
        return simulated_answer(self.study, entry, fails_catch)

    def rt_ms(self, entry: dict[str, Any]) -> float | None:
        """The entry's reaction time in ms; ``None``: the human's log-normal draw; NaN: none."""
        return None


class ModelAgent(HumanAgent):
    """The observer model: its probabilities on the rating scale, its argmax class, no noise (each
    type's ``model_answer``)."""

    def answer(self, entry: dict[str, Any], fails_catch: bool) -> dict[str, Any]:
        trial_type = TRIAL_TYPES.get(str(entry.get("type")))
        if trial_type is None or trial_type.model_answer is None:
            return super().answer(entry, fails_catch)
        return trial_type.model_answer(self.study.labels, self.study.model_p(str(entry["stimulus"])))


class LazyAgent(HumanAgent):
    """A fixed key: the first label (rated 1), triads left, 450 ms +- 5 ms uniform."""

    def __init__(self, study: SimulatedStudy) -> None:
        super().__init__(study)
        self.rts: dict[int, float] = {}

    def begin(self, number: int, entries: list[dict[str, Any]]) -> None:
        rng = np.random.default_rng([self.study.settings.seed, number])
        jitter = rng.uniform(-LAZY_JITTER_MS, LAZY_JITTER_MS, len(entries))
        self.rts = dict(zip((int(e["index"]) for e in entries), (LAZY_RT_MS + jitter).tolist(),
                            strict=True))

    def answer(self, entry: dict[str, Any], fails_catch: bool) -> dict[str, Any]:
        trial_type = TRIAL_TYPES.get(str(entry.get("type")))
        if trial_type is None or trial_type.label_answer is None:
            return super().answer(entry, fails_catch)
        return trial_type.label_answer(self.study.labels, self.study.labels[0])

    def rt_ms(self, entry: dict[str, Any]) -> float | None:
        return float(self.rts[int(entry["index"])])


@dataclass(frozen=True)
class Recording:
    """One participant's responses and reaction times (ms; NaN: a timeout's), in order."""

    responses: np.ndarray
    rt_ms: np.ndarray
    source: str


def _read_table(path: Path) -> pd.DataFrame:
    """The replay source as text columns (``na`` kept as text); unreadable: ValueError naming it."""
    if not path.is_file():
        raise ValueError(f"{path}: no such replay source file (--replay-source)")
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{path}: cannot read the replay source as CSV: {exc}") from exc
    table.columns = [str(c).strip().lower() for c in table.columns]  # published files say 'Session'
    return table


def _need(path: Path, table: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    """ValueError naming the file and the columns of ``columns`` it lacks."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(repr(c) for c in missing)} ({what} has "
                         f"{', '.join(columns)}; the file has {', '.join(table.columns)})")


def _one_participant(path: Path, table: pd.DataFrame, columns: tuple[str, ...],
                     participant: str | None) -> pd.DataFrame:
    """The rows of ``participant`` (matched in any of ``columns``), or of the only one there is."""
    if participant is not None:
        for column in columns:
            if column in table.columns and (table[column] == participant).any():
                return table[table[column] == participant]
        raise ValueError(f"{path}: no participant {participant!r} in column "
                         f"{' or '.join(repr(c) for c in columns if c in table.columns)} "
                         "(--replay-participant)")
    ids = list(dict.fromkeys(table[columns[0]]))
    if len(ids) > 1:
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise ValueError(f"{path}: {len(ids)} participants in column {columns[0]!r} ({shown}): "
                         "choose one with --replay-participant")
    return table


def _ordered(path: Path, rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """``rows`` sorted by their trial number ``column`` (kept as ``_order``)."""
    order = pd.to_numeric(rows[column], errors="coerce")
    if order.isna().any():
        raise ValueError(f"{path}: column {column!r}: {rows[column][order.isna()].iloc[0]!r} is "
                         "not a trial number")
    return rows.assign(_order=order).sort_values("_order", kind="stable")


def load_recording(path: str | Path, participant: str | None = None) -> Recording:
    """One participant's trials of a replay source in trial order; ValueError naming file and field.

    Either a model-vs-human raw file (``subj, trial, rt`` in seconds, ``object_response``) or a
    humanlike export table with ``participant, trial_index, rt_ms`` and either ``response``
    (classifications.csv, decisions.csv) or ``category, rating`` (ratings.csv: a trial's response
    is its highest rated category, the first on a tie). Only a timeout (``na``) may lack its RT."""
    path = Path(path)
    table = _read_table(path)
    if "object_response" in table.columns or "subj" in table.columns:
        _need(path, table, MVH_COLUMNS, "a model-vs-human raw file")
        rows = _ordered(path, _one_participant(path, table, ("subj",), participant), "trial")
        responses, rt_column, scale = rows["object_response"], "rt", 1000.0
    else:
        _need(path, table, EXPORT_COLUMNS, "a humanlike export table")
        rows = _one_participant(path, table, ("participant", "platform_id"), participant)
        rows = _ordered(path, rows, "trial_index")
        if "response" not in rows.columns:
            _need(path, table, ("category", "rating"),
                  "a humanlike export table without 'response' (ratings.csv)")
            rating = pd.to_numeric(rows["rating"], errors="coerce").fillna(-np.inf)
            rows = (rows.assign(_rating=rating)
                    .sort_values(["_order", "_rating"], ascending=[True, False], kind="stable")
                    .drop_duplicates("_order"))
            responses = rows["category"]
        else:
            responses = rows["response"]
        rt_column, scale = "rt_ms", 1.0
    if rows.empty:
        raise ValueError(f"{path}: no trials to replay")
    text = responses.astype(str).str.strip().to_numpy(dtype=object)
    if (text == "").any():
        raise ValueError(f"{path}: column {responses.name!r}: an empty response")
    rt = pd.to_numeric(rows[rt_column], errors="coerce").to_numpy(dtype=float) * scale
    bad = (np.isnan(rt) & (text != NO_RESPONSE)) | np.isinf(rt) | (rt <= 0)
    if bad.any():
        raise ValueError(f"{path}: column {rt_column!r}: {rows[rt_column].to_numpy()[bad][0]!r} is "
                         "not a reaction time (a model's file has none: replay a human's)")
    return Recording(text, rt, str(path))


def mapped_labels(responses: np.ndarray, labels: list[str]) -> np.ndarray:
    """Each response as a study label: itself if a label, else ``labels[rank % len(labels)]``."""
    _, rank = np.unique(responses.astype(str), return_inverse=True)
    out = np.asarray(labels, dtype=object)[rank % len(labels)]
    known = np.isin(responses, labels)
    out[known] = responses[known]
    return out


class ReplayAgent(HumanAgent):
    """A recording (or a hidden noisy human, shuffled) replayed trial by trial, blind to the stimuli."""

    def __init__(self, study: SimulatedStudy) -> None:
        super().__init__(study)
        s = study.settings
        self.recording = (load_recording(s.replay_source, s.replay_participant)
                          if s.replay_source else None)
        self.queue: list[tuple[str, str, float]] = []
        self.position = 0
        self.median_rt = float("nan")
        self.given: dict[int, float] = {}

    def begin(self, number: int, entries: list[dict[str, Any]]) -> None:
        recording = self.recording or self.hidden_human(
            number, [e for e in entries if not is_internal(e)])
        mapped = mapped_labels(recording.responses, self.study.labels)
        self.queue = list(zip(recording.responses.tolist(), mapped.tolist(),
                              recording.rt_ms.tolist(), strict=True))
        self.median_rt = float(np.nanmedian(recording.rt_ms))
        self.position = 0
        self.given = {}

    def hidden_human(self, number: int, entries: list[dict[str, Any]]) -> Recording:
        """A noisy human's answers (a label or left/right) and RTs to ``entries`` in memory,
        shuffled within each trial type."""
        study, s = self.study, self.study.settings
        rng = np.random.default_rng([s.seed, number, 1])
        hidden = copy.copy(study)
        hidden.settings = replace(s, agent="human", replay_source=None, replay_participant=None)
        hidden.rng = rng
        hidden.agent = HumanAgent(hidden)
        answers = [hidden.answer(e, False) for e in entries]
        responses = np.array([a["choice"] if "choice" in a else
                              max(a["ratings"], key=a["ratings"].get) for a in answers], dtype=object)
        rt = s.rt_median_ms * np.exp(rng.normal(0.0, s.rt_log_sd, len(entries)))
        types = np.array([str(e.get("type")) for e in entries], dtype=object)
        order = np.arange(len(entries))
        for kind in dict.fromkeys(types.tolist()):
            where = np.flatnonzero(types == kind)
            order[where] = rng.permutation(where)
        return Recording(responses[order], rt[order], f"a hidden noisy human ({number})")

    def answer(self, entry: dict[str, Any], fails_catch: bool) -> dict[str, Any]:
        if is_internal(entry):
            return super().answer(entry, fails_catch)
        trial_type = TRIAL_TYPES.get(str(entry.get("type")))
        if trial_type is None or trial_type.label_answer is None:
            return super().answer(entry, fails_catch)
        response, label, rt = self.queue[self.position % len(self.queue)]
        self.position += 1
        timeout = response == NO_RESPONSE and np.isnan(rt)
        if timeout and trial_type.timeout_answer is not None:  # too late here too: no RT
            self.given[int(entry["index"])] = rt
            return dict(trial_type.timeout_answer)
        self.given[int(entry["index"])] = self.median_rt if timeout else rt
        return trial_type.label_answer(self.study.labels, label)

    def rt_ms(self, entry: dict[str, Any]) -> float | None:
        return self.given.get(int(entry["index"]))


def make_agent(study: SimulatedStudy) -> HumanAgent:
    """The agent ``study.settings.agent`` names (a recording to replay is read here)."""
    kinds: dict[str, type[HumanAgent]] = {"human": HumanAgent, "model": ModelAgent,
                                           "replay": ReplayAgent, "lazy": LazyAgent,
                                           "scripted": HumanAgent}
    return kinds[study.settings.agent](study)
