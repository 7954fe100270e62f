"""The canonical tidy export (DESIGN.md): trials, one table per trial type (ratings, triads,
classifications, debrief answers), participants, stimuli and events, as CSV and Parquet with a
codebook. Each trial's design is read from ``trial.design``."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from humanlike.analysis.exclusions import ExclusionRules
from humanlike.server import codebook as book
from humanlike.server.experiments import version_hashes
from humanlike.server.extensions import db
from humanlike.server.models import Event, Experiment, Participant, Stimulus, Trial
from humanlike.server.pseudonyms import pseudonymise_codebook, pseudonymise_frame
from humanlike.server.trial_types import TRIAL_TYPES, ExportInput

TRIAL_COLUMNS = list(book.TRIAL_COLUMNS)


def _experiment(slug: str) -> Experiment:
    exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == slug)).scalar_one_or_none()
    if exp is None:
        known = db.session.execute(sa.select(Experiment.slug)).scalars().all()
        raise LookupError(f"no experiment {slug!r} in the database (known: {known})")
    return exp


def trial_frame(exp: Experiment) -> pd.DataFrame:
    """One row per stored trial, with participant and stimulus columns (plus response and design)."""
    rows = db.session.execute(
        sa.select(
            Participant.public_id.label("participant"), Participant.platform_id,
            Participant.condition, Trial.trial_index, Trial.trial_type,
            Trial.block, Stimulus.key.label("stimulus"), Stimulus.kind.label("stimulus_kind"),
            Trial.is_repeat, Trial.repeat_of, Trial.rt_ms, Trial.first_rt_ms, Trial.presented_ms,
            Trial.frames, Trial.client_time, Trial.server_time, Trial.response, Trial.design,
        )
        .join(Participant, Trial.participant_id == Participant.id)
        .outerjoin(Stimulus, Trial.stimulus_id == Stimulus.id)
        .where(Participant.experiment_id == exp.id)
        .order_by(Participant.public_id, Trial.trial_index)
    ).mappings().all()
    frame = pd.DataFrame([dict(r) for r in rows])
    if frame.empty:
        return pd.DataFrame(columns=[*TRIAL_COLUMNS, "response", "design"])
    frame["practice"] = [bool(d.get("practice")) for d in frame["design"]]
    frame["experiment"] = exp.slug
    frame["server_time"] = pd.to_datetime(frame["server_time"], utc=True).dt.strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )
    frame["repeat_of"] = frame["repeat_of"].astype("Int64")
    frame["frames"] = frame["frames"].astype("Int64")
    return frame[[*TRIAL_COLUMNS, "response", "design"]]


def stimulus_frame(exp: Experiment) -> pd.DataFrame:
    """One row per stimulus with its manifest metadata."""
    rows = db.session.execute(
        sa.select(Stimulus).where(Stimulus.experiment_id == exp.id).order_by(Stimulus.key)
    ).scalars().all()
    return pd.DataFrame(
        [{"stimulus": s.key, "kind": s.kind, "true_class": s.true_class, "sha256": s.sha256,
          **(s.meta or {})} for s in rows]
    )


def rating_qc(ratings: pd.DataFrame, stimuli: pd.DataFrame, participants: pd.DataFrame,
              rules: ExclusionRules) -> pd.DataFrame:
    """Per-participant QC and exclusions, computed by the analysis package (one implementation)."""
    from humanlike.analysis.ratings.data import attach_stimuli, clean_ratings, participant_qc

    main = ratings[~ratings["practice"]].drop(columns=["stimulus_kind"])
    frame = attach_stimuli(main, stimuli)
    frame = clean_ratings(frame, rules.min_trial_rt_ms)
    qc = participant_qc(frame, participants, rules, respect_export_exclusions=False)
    return qc.rename(columns={"repeat_r": "repeat_reliability", "n_trials": "n_rating_trials"})


def participant_frame(exp: Experiment, trials: pd.DataFrame, ratings: pd.DataFrame,
                      stimuli: pd.DataFrame) -> pd.DataFrame:
    """One row per participant with status, timing, QC columns and exclusion reasons."""
    rows = db.session.execute(
        sa.select(Participant).where(Participant.experiment_id == exp.id).order_by(Participant.id)
    ).scalars().all()
    versions = version_hashes(exp.id)
    frame = pd.DataFrame([
        {"experiment": exp.slug, "participant": p.public_id, "platform": p.platform,
         "platform_id": p.platform_id, "study_id": p.study_id or p.hit_id,
         "session_id": p.session_id or p.assignment_id, "condition": p.condition,
         "spec_version": versions.get(p.spec_version_id) if p.spec_version_id else None,
         "status": p.status, "seed": p.seed, "created_at": p.created_at,
         "started_at": p.started_at, "completed_at": p.completed_at,
         "refresh_hz": p.refresh_hz, "user_agent": p.user_agent, "n_trials": p.n_trials,
         "completion_code": p.completion_code,
         "bonus": float(p.bonus) if p.bonus is not None else None}
        for p in rows
    ])
    if frame.empty:
        return frame
    for col in ("created_at", "started_at", "completed_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    frame["duration_s"] = (frame["completed_at"] - frame["created_at"]).dt.total_seconds()
    stored = trials.groupby("participant").size() if not trials.empty else pd.Series(dtype=int)
    frame["n_stored"] = frame["participant"].map(stored).fillna(0).astype(int)
    frame["excluded"], frame["exclusion_reasons"] = False, ""
    if not ratings.empty:
        rules = ExclusionRules.from_mapping(exp.spec.get("exclusion", {}))
        qc = rating_qc(ratings, stimuli, frame, rules)
        frame = frame.drop(columns=["excluded", "exclusion_reasons"]).merge(
            qc, on="participant", how="left")
        frame["excluded"] = frame["excluded"].fillna(False).astype(bool)
        frame["exclusion_reasons"] = frame["exclusion_reasons"].fillna("")
    for col in ("created_at", "started_at", "completed_at"):
        frame[col] = frame[col].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return frame


def event_frame(exp: Experiment) -> pd.DataFrame:
    """One row per logged browser event."""
    rows = db.session.execute(
        sa.select(Participant.public_id, Event.type, Event.value, Event.client_time, Event.server_time)
        .join(Participant, Event.participant_id == Participant.id)
        .where(Participant.experiment_id == exp.id)
        .order_by(Event.id)
    ).all()
    frame = pd.DataFrame(rows, columns=["participant", "type", "value", "client_time", "server_time"])
    frame.insert(0, "experiment", exp.slug)
    frame["value"] = [json.dumps(v) if v is not None else None for v in frame["value"]]
    frame["server_time"] = pd.to_datetime(frame["server_time"], utc=True).dt.strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )
    return frame


def export_frames(slug: str) -> dict[str, pd.DataFrame]:
    """All export tables of an experiment as DataFrames (inside an app context)."""
    exp = _experiment(slug)
    labels = [c["label"] for c in exp.spec.get("categories", [])]
    trials = trial_frame(exp)
    stimuli = stimulus_frame(exp)
    typed = {
        t.table: t.frame(ExportInput(trials[trials["trial_type"] == t.name], TRIAL_COLUMNS,
                                     labels, stimuli))
        for t in TRIAL_TYPES.values()
    }
    internal = [t.name for t in TRIAL_TYPES.values() if t.internal]
    frames = {"trials": trials[~trials["trial_type"].isin(internal)][TRIAL_COLUMNS]}
    frames.update({t.table: typed[t.table] for t in TRIAL_TYPES.values() if not t.internal})
    frames["participants"] = participant_frame(exp, trials, typed["ratings"], stimuli)
    frames["stimuli"] = stimuli
    frames["events"] = event_frame(exp)
    frames.update({t.table: typed[t.table] for t in TRIAL_TYPES.values() if t.internal})
    return frames


def write_export(slug: str, out: Path, pseudonym_key: bytes | None = None) -> dict[str, int]:
    """Write every table as CSV and Parquet plus codebook.json into ``out``; return row counts.

    With ``pseudonym_key`` the platform, study and session ids are replaced by pseudonyms."""
    out.mkdir(parents=True, exist_ok=True)
    frames = export_frames(slug)
    for name, frame in frames.items():
        frame = frame.reset_index(drop=True)
        if pseudonym_key is not None:
            frame = pseudonymise_frame(frame, pseudonym_key, slug)
        frame.to_csv(out / f"{name}.csv", index=False)
        frame.to_parquet(out / f"{name}.parquet", index=False)
    codebook = book.codebook()
    if pseudonym_key is not None:
        codebook = pseudonymise_codebook(codebook)
    (out / "codebook.json").write_text(json.dumps(codebook, indent=2))
    return {name: len(frame) for name, frame in frames.items()}
