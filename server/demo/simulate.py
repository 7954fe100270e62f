"""Simulated participants who take part through the real HTTP API, with known ground truth.

Each one arrives (``GET /start/<slug>`` with Prolific-style ids), consents, reports its screen
(an ``environment`` event with a refresh rate), answers every trial of its stored timeline and
completes, exactly as the browser does, with httpx: against a running server (``base_url``) or
in-process through :class:`httpx.WSGITransport` around an app; one code path either way.

How they answer (all randomness from one seed, recorded with the ground truth):

* rating trials: the observer model's probabilities plus Gaussian rating noise (``noise``),
  rounded to the nearest of the five levels; catch trials: the true class rated 100% and nothing
  else, except by participants made to fail catch trials, who rate a wrong class;
* triads: an MLDS observer with a known standard scale psi_k = ((k - 1) / (N - 1)) ** gamma per
  sequence (gamma drawn per sequence) and decision noise ``sigma`` (Maloney & Yang 2003; drawn by
  :func:`humanlike.analysis.mlds.simulate.simulate_responses`);
* classification trials: the observer model's most probable class, replaced with probability
  ``lapse`` by a uniformly drawn class;
* reaction times: log-normal, median ``rt_median_ms``, log-sd ``rt_log_sd``; presentation
  durations: the intended duration rounded to whole frames of the participant's refresh rate,
  one frame longer on ``late_frame_share`` of the trials.

Each trial type's answer is its registry entry's ``simulate`` (``trial_types.py``); internal
trials (the debrief) report no timing. Other agents (``settings.agent``: a model, a replayed
recording, a fixed key) answer instead through ``agents.py``, to test the authenticity screen.

The client sends the study's rehearsal key (``server.rehearsal``; ``api_client(rehearsal_key=)``)
with every request, so the server records each arrival as simulated; an arrival the server does not
record so stops the run (its participants would otherwise count as real ones).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import pandas as pd

from humanlike.server.demo.agents import AGENTS, HumanAgent, make_agent
from humanlike.server.participants.display import frames_for
from humanlike.server.participants.rehearsal import REHEARSAL_HEADER, SIMULATED_HEADER
from humanlike.server.trial_types.registry import TRIAL_TYPES
from humanlike.vocabulary import StimulusKind

REFRESH_RATES = (60.0, 75.0, 120.0, 144.0)


def default_fail_catch(n_participants: int) -> int:
    """Participants made to fail catch trials by default: two, but at most a third of them."""
    return min(2, n_participants // 3)


MODEL_SUFFIXES = (".csv", ".parquet")


def find_model_responses(spec_path: str | Path) -> tuple[list[Path], str]:
    """The model-response files a rehearsal answers with, and where they were found: the spec's
    ``[panel] model_responses``, else the ``models/`` folder beside the spec, else
    ``model_responses.csv`` beside the manifest; none: ``[]``."""
    from humanlike.server.study.spec import load_spec

    spec_path = Path(spec_path)
    spec = load_spec(spec_path)
    root = spec_path.parent
    named = list(spec.panel.model_responses) if spec.panel is not None else []
    if named:
        return [root / n for n in named], "the spec's [panel] model_responses"
    folder = root / "models"
    found = sorted(f for f in folder.glob("*") if f.suffix.lower() in MODEL_SUFFIXES) \
        if folder.is_dir() else []
    if found:
        return found, f"{folder}/"
    beside = (root / spec.manifest).parent / "model_responses.csv"
    if beside.is_file():
        return [beside], "beside the manifest"
    return [], ""


def load_responses(paths: list[Path]) -> pd.DataFrame | None:
    """The model responses of ``paths`` in one frame (``None`` for no paths); a directory stands
    for its .csv and .parquet files."""
    from humanlike.analysis.ratings.scores import load_model_responses

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(f for f in path.glob("*") if f.suffix.lower() in MODEL_SUFFIXES)
            if not inside:
                raise ValueError(f"{path}: no .csv or .parquet model responses in this folder")
            files.extend(inside)
        else:
            files.append(path)
    if not files:
        return None
    return pd.concat([load_model_responses(f) for f in files], ignore_index=True)


@dataclass(frozen=True)
class SimulationSettings:
    """What the simulated participants do; every field is written with the ground truth."""

    n_participants: int = 12
    observer: str | None = None
    """The model whose responses the participants answer with; default the first model in the
    responses (none: the true class, :meth:`SimulatedStudy.observer_description`)."""
    noise: float = 0.15
    lapse: float = 0.05
    fail_catch: int | None = None
    """Participants made to fail the catch trials; default ``default_fail_catch(n_participants)``."""
    mlds_sigma: float = 0.15
    gamma_range: tuple[float, float] = (0.5, 2.0)
    rt_median_ms: float = 1200.0
    rt_log_sd: float = 0.35
    late_frame_share: float = 0.05
    seed: int = 0
    id_prefix: str = "sim"
    study_id: str | None = None
    """The STUDY_ID sent (a study on a fake or staging Prolific); default ``<id_prefix>-study``."""
    sessions: tuple[tuple[str, str], ...] = ()
    """(PROLIFIC_PID, SESSION_ID) per participant, as the platform handed them out, so a whole
    study can be rehearsed end to end; default generated ids."""
    agent: str = "human"
    """Who answers (``agents.AGENTS``): the noisy human, the model, a replay, a fixed key, a browser."""
    replay_source: str | None = None
    """The recording the ``replay`` agent replays (``agents.load_recording``); None: a hidden human."""
    replay_participant: str | None = None
    """Whose trials of ``replay_source`` are replayed when it holds several participants."""

    def __post_init__(self) -> None:
        if self.n_participants < 1:
            raise ValueError("participants must be at least 1")
        if self.agent not in AGENTS:
            raise ValueError(f"unknown agent {self.agent!r}; the agents are {', '.join(AGENTS)}")
        if self.agent != "replay" and (self.replay_source or self.replay_participant):
            raise ValueError("a replay source is for the replay agent only (--agent replay)")
        if self.replay_participant and not self.replay_source:
            raise ValueError("a replay participant names one in a replay source: give the source")
        if self.fail_catch is None:
            object.__setattr__(self, "fail_catch", default_fail_catch(self.n_participants)
                               if self.agent == "human" else 0)
        if self.fail_catch and self.agent != "human":
            raise ValueError(f"the {self.agent} agent answers catch trials its own way: "
                             "fail_catch is for the human agent")
        if self.sessions and len(self.sessions) != self.n_participants:
            raise ValueError(f"{len(self.sessions)} sessions given for {self.n_participants} "
                             "participants: give one (participant id, session id) per participant")
        if not 0 <= int(self.fail_catch or 0) <= self.n_participants:
            raise ValueError(f"fail_catch must be between 0 and {self.n_participants}")
        for name in ("noise", "mlds_sigma", "rt_log_sd"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.mlds_sigma == 0:
            raise ValueError("mlds_sigma must be positive (a noiseless observer has no MLDS scale)")
        if not 0 <= self.lapse <= 1:
            raise ValueError("lapse must lie in [0, 1]")


@dataclass
class GroundTruth:
    """What generated the data: settings, each sequence's psi, each participant's traits."""

    settings: SimulationSettings
    psi: dict[str, list[float]] = field(default_factory=dict)
    participants: list[dict[str, Any]] = field(default_factory=list)

    def save(self, folder: str | Path) -> list[Path]:
        """Write ``truth.json`` (settings and psi per sequence) and ``truth_participants.csv``."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        record = {"settings": asdict(self.settings), "psi": self.psi,
                  "mlds_sigma": self.settings.mlds_sigma}
        (out / "truth.json").write_text(json.dumps(record, indent=2) + "\n")
        pd.DataFrame(self.participants).to_csv(out / "truth_participants.csv", index=False)
        return [out / "truth.json", out / "truth_participants.csv"]


def observer_psi(n_levels: int, gamma: float) -> np.ndarray:
    """The standard scale psi_k = ((k - 1) / (N - 1)) ** gamma (psi_1 = 0, psi_N = 1)."""
    return (np.arange(n_levels) / (n_levels - 1)) ** gamma


class SimulatedStudy:
    """Answers for one experiment: the observer model's probabilities and decisions, the true
    classes, the sequences' generating scales."""

    def __init__(self, spec_path: str | Path, settings: SimulationSettings,
                 model_responses: pd.DataFrame | None = None) -> None:
        from humanlike.server.study.experiments import load_experiment

        loaded = load_experiment(spec_path)
        self.settings = settings
        self.slug = loaded.spec.slug
        self.labels = [c.label for c in loaded.spec.categories]
        self.true_class = {r.key: r.true_class for r in loaded.stimuli}
        self.rng = np.random.default_rng(settings.seed)
        levels: dict[str, int] = {}
        for r in loaded.stimuli:
            if r.kind == StimulusKind.MLDS and "sequence" in r.meta:
                seq = str(r.meta["sequence"])
                levels[seq] = max(levels.get(seq, 0), int(r.meta["level"]))
        low, high = settings.gamma_range
        self.gamma = {seq: float(g) for seq, g in
                      zip(sorted(levels), self.rng.uniform(low, high, len(levels)), strict=True)}
        self.psi = {seq: observer_psi(levels[seq], self.gamma[seq]) for seq in sorted(levels)}
        self.agent: HumanAgent = make_agent(self)
        self.probabilities: pd.DataFrame | None = None
        self.observer: str | None = None
        """The model answering (``None``: the true class)."""
        answerable = {r.key for r in loaded.stimuli
                      if r.kind not in (StimulusKind.MLDS, StimulusKind.CATCH)}
        self.n_answerable = len(answerable)
        self.n_covered = 0
        if model_responses is None:
            if settings.observer is not None:
                raise ValueError(f"observer {settings.observer!r} asked for, but no model responses "
                                 "were found: give them with --models, [panel] model_responses or "
                                 "a models/ folder beside the spec")
            return
        names = list(dict.fromkeys(model_responses["model"].astype(str)))
        self.observer = names[0] if settings.observer is None else settings.observer
        chosen = model_responses[model_responses["model"].astype(str) == self.observer]
        if chosen.empty:
            raise ValueError(f"no responses of model {self.observer!r}; the models are "
                             f"{', '.join(sorted(names))}")
        wide = chosen.pivot_table(index="stimulus", columns="category", values="probability")
        wide.columns = wide.columns.astype(str)
        self.probabilities = wide.reindex(columns=self.labels).fillna(0.0)
        self.n_covered = len(answerable & set(wide.index.astype(str)))

    def observer_description(self) -> str:
        """Which observer answers, in words (the model and how many stimuli it covers)."""
        if self.observer is None:
            return ("observer: the true class (no model responses: every rating and "
                    "classification answers the stimulus' true class)")
        rest = self.n_answerable - self.n_covered
        tail = f"; the other {rest} answered with their true class" if rest else ""
        return (f"observer: model {self.observer!r} ({self.n_covered} of {self.n_answerable} "
                f"rated or classified stimuli{tail})")

    def truth(self) -> GroundTruth:
        settings = replace(self.settings, observer=self.observer)
        return GroundTruth(settings, {k: v.tolist() for k, v in self.psi.items()})

    def model_p(self, stimulus: str) -> np.ndarray:
        """The observer model's probability of each label for ``stimulus`` (spec order)."""
        if self.probabilities is None or stimulus not in self.probabilities.index:
            # no model answer for this stimulus: a confident observer that knows the true class
            p = np.zeros(len(self.labels))
            truth = self.true_class.get(stimulus)
            if truth in self.labels:
                p[self.labels.index(truth)] = 1.0
            return p
        return self.probabilities.loc[stimulus].to_numpy(dtype=float)

    def answer(self, entry: dict[str, Any], fails_catch: bool) -> dict[str, Any]:
        """The response to one timeline entry (what the browser would send as ``response``):
        the agent's (the human's: its type's ``simulate``; ValueError for a type that has none)."""
        return self.agent.answer(entry, fails_catch)

    def timing(self, entry: dict[str, Any], refresh_hz: float,
               presentation: dict[str, Any] | None = None) -> dict[str, Any]:
        """Reaction time (the agent's, else log-normal; NaN: none, a timeout) and the presented
        duration in whole frames (rounded half up, ``display.frames_for``): the trial's own
        ``duration_ms`` (a classification block), else the participant's ``presentation`` in
        ``"duration"`` mode, else the reaction time (shown until the response)."""
        rng = self.rng
        rt = self.agent.rt_ms(entry)
        if rt is None:
            rt = float(self.settings.rt_median_ms * np.exp(rng.normal(0.0, self.settings.rt_log_sd)))
        pres = presentation or {}
        intended = entry.get("duration_ms") or (
            pres.get("duration_ms") if pres.get("mode") == "duration" else None)
        frame_ms = 1000.0 / refresh_hz
        if intended is None:  # shown until the response: on screen for the reaction time
            frames = int(frames_for(rt, frame_ms))
        else:
            frames = int(frames_for(float(intended), frame_ms))
            frames += int(rng.random() < self.settings.late_frame_share)
        return {"rt_ms": None if np.isnan(rt) else round(rt, 1),
                "presented_ms": round(frames * 1000 / refresh_hz, 2),
                "frames": frames}


def _check(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code >= 400:
        raise RuntimeError(f"{what}: HTTP {response.status_code}: {response.text[:300]}")
    return response


def run_participant(client: httpx.Client, study: SimulatedStudy, number: int,
                    fails_catch: bool) -> dict[str, Any]:
    """One simulated participant from entry to completion; returns its ground-truth record."""
    s = study.settings
    platform_id, session_id = (s.sessions[number] if s.sessions else
                               (f"{s.id_prefix}{s.seed}-{number:04d}", ""))
    start = _check(client.get(f"/start/{study.slug}", params={
        "PROLIFIC_PID": platform_id, "STUDY_ID": s.study_id or f"{s.id_prefix}-study",
        "SESSION_ID": session_id or f"{platform_id}-session"}), "entry")
    if REHEARSAL_HEADER in client.headers and start.headers.get(SIMULATED_HEADER) != "1":
        raise RuntimeError(
            f"the server did not recognise the rehearsal key: {platform_id} arrived as a real "
            "participant (status allocated, never consented; not analysed). Give the server's "
            "key with --rehearsal-key (`humanlike simulate EXPERIMENT --print-key` where the "
            "server's SECRET_KEY is set)")
    location = start.headers.get("location", "")
    path, _, fragment = location.partition("#")
    if not fragment.startswith("token="):
        raise RuntimeError(f"entry did not hand over a participant (status {start.status_code}, "
                           f"location {location!r})")
    pid = urlsplit(path).path.rstrip("/").split("/")[-1]
    headers = {"Authorization": f"Bearer {fragment.removeprefix('token=')}"}
    api = f"/api/v1/participants/{pid}"
    _check(client.post(f"{api}/consent", json={"agree": True}, headers=headers), "consent")
    refresh_hz = float(study.rng.choice(REFRESH_RATES))
    _check(client.post(f"{api}/events", headers=headers, json={
        "type": "environment", "value": {"refresh_hz": refresh_hz, "screen_width": 1920,
                                         "screen_height": 1080}}),
           "environment event")
    timeline = _check(client.get(f"{api}/timeline", headers=headers), "timeline").json()
    study.agent.begin(number, timeline["trials"])
    for entry in timeline["trials"]:
        body = {"trial_index": entry["index"], "trial_type": entry["type"],
                "response": study.answer(entry, fails_catch)}
        if not TRIAL_TYPES[entry["type"]].internal:  # the debrief records no timing
            body.update(study.timing(entry, refresh_hz, timeline.get("presentation")))
        _check(client.post(f"{api}/trials", json=body, headers=headers),
               f"trial {entry['index']}")
    _check(client.post(f"{api}/complete", headers=headers), "complete")
    return {"participant": pid, "platform_id": platform_id, "agent": s.agent,
            "fails_catch": fails_catch, "refresh_hz": refresh_hz,
            "n_trials": len(timeline["trials"])}


@contextmanager
def api_client(base_url: str | None = None, app: Any = None,
               rehearsal_key: str | None = None) -> Iterator[httpx.Client]:
    """An httpx client for a running server (``base_url``) or in-process for a WSGI ``app``;
    with ``rehearsal_key`` (``server.rehearsal.rehearsal_key``) its arrivals are rehearsals."""
    if (base_url is None) == (app is None):
        raise ValueError("give a server URL or an app, not both or neither")
    headers = {REHEARSAL_HEADER: rehearsal_key} if rehearsal_key else {}
    if base_url is not None:
        with httpx.Client(base_url=base_url, timeout=30.0, follow_redirects=False,
                          headers=headers) as client:
            yield client
    else:
        with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://simulate.local",
                          follow_redirects=False, headers=headers) as client:
            yield client


def simulate_participants(client: httpx.Client, study: SimulatedStudy,
                          progress: Callable[[int], object] | None = None) -> GroundTruth:
    """Send ``settings.n_participants`` participants through the API; the first ``fail_catch`` of
    a seeded random order fail the catch trials."""
    s = study.settings
    failing = set(study.rng.permutation(s.n_participants)[: s.fail_catch or 0].tolist())
    truth = study.truth()
    for number in range(s.n_participants):
        truth.participants.append(run_participant(client, study, number, number in failing))
        if progress is not None:
            progress(1)
    return truth
