"""Who may take part, and allocation: platform ids, duplicates, exclusions, condition, timeline, token."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import sqlalchemy as sa
from flask import Request

from humanlike.server.experiments import LoadedExperiment
from humanlike.server.extensions import db
from humanlike.server.models import Experiment, Participant, Stimulus
from humanlike.server.timeline import generate_timeline

MOBILE_UA = re.compile(r"Mobi|Android|iPhone|iPad|iPod|Windows Phone|Opera Mini", re.IGNORECASE)
FILLED_STATUSES = ("started", "completed", "submitted", "approved")
ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


@dataclass(frozen=True)
class Entry:
    """The recruitment parameters a participant arrives with."""

    platform: str
    platform_id: str | None
    study_id: str | None = None
    session_id: str | None = None
    assignment_id: str | None = None
    hit_id: str | None = None
    turk_submit_to: str | None = None
    preview: bool = False


class EntryError(ValueError):
    """Recruitment parameters that are malformed."""


def _clean(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not ID_PATTERN.match(value):
        raise EntryError(f"parameter {name} has an unexpected format")
    return value


def parse_entry(request: Request) -> Entry:
    """Read Prolific (PROLIFIC_PID...), MTurk (workerId...) or no parameters (local link)."""
    args = request.args
    if "PROLIFIC_PID" in args:
        pid = _clean(args.get("PROLIFIC_PID"), "PROLIFIC_PID")
        if pid is None:
            raise EntryError("PROLIFIC_PID is empty")
        return Entry("prolific", pid, _clean(args.get("STUDY_ID"), "STUDY_ID"),
                     _clean(args.get("SESSION_ID"), "SESSION_ID"))
    if "assignmentId" in args or "workerId" in args:
        assignment = args.get("assignmentId", "")
        if assignment == "ASSIGNMENT_ID_NOT_AVAILABLE":
            return Entry("mturk", None, preview=True)
        worker = _clean(args.get("workerId"), "workerId")
        if worker is None:
            raise EntryError("workerId is missing")
        submit_to = args.get("turkSubmitTo") or None
        if submit_to and submit_to not in (
            "https://workersandbox.mturk.com", "https://www.mturk.com"
        ):
            raise EntryError("turkSubmitTo must be MTurk's live or sandbox host")
        return Entry("mturk", worker, assignment_id=_clean(assignment, "assignmentId"),
                     hit_id=_clean(args.get("hitId"), "hitId"), turk_submit_to=submit_to)
    return Entry("local", None)


def is_mobile(user_agent: str | None) -> bool:
    """A phone or tablet, judged from the User-Agent header."""
    return bool(user_agent and MOBILE_UA.search(user_agent))


def existing_participant(exp: Experiment, entry: Entry) -> Participant | None:
    """The participant with this platform id in this experiment, if any."""
    if entry.platform_id is None:
        return None
    return db.session.execute(
        sa.select(Participant).where(
            Participant.experiment_id == exp.id,
            Participant.platform == entry.platform,
            Participant.platform_id == entry.platform_id,
        )
    ).scalar_one_or_none()


def took_part_elsewhere(slugs: list[str], entry: Entry) -> bool:
    """True when this platform id took part in any of the listed (excluded) experiments."""
    if entry.platform_id is None or not slugs:
        return False
    hit = db.session.execute(
        sa.select(Participant.id)
        .join(Experiment)
        .where(
            Experiment.slug.in_(slugs),
            Participant.platform == entry.platform,
            Participant.platform_id == entry.platform_id,
        )
        .limit(1)
    ).first()
    return hit is not None


def least_filled_condition(exp: Experiment, loaded: LoadedExperiment) -> str:
    """The condition with the fewest started or completed participants (ties: spec order)."""
    counts = dict(
        db.session.execute(
            sa.select(Participant.condition, sa.func.count())
            .where(Participant.experiment_id == exp.id, Participant.status.in_(FILLED_STATUSES))
            .group_by(Participant.condition)
        ).all()
    )
    names = [c.name for c in loaded.spec.conditions]
    return min(names, key=lambda n: (counts.get(n, 0), names.index(n)))


def allocate(
    exp: Experiment, loaded: LoadedExperiment, entry: Entry, user_agent: str | None
) -> tuple[Participant, str]:
    """Create a participant with a condition, a seeded timeline and a fresh write token.

    Returns the row and the token in clear (only its hash is stored). The caller commits; a
    concurrent duplicate surfaces as an IntegrityError on the (experiment, platform, id) key."""
    from humanlike.server.api import hash_token

    token = secrets.token_urlsafe(32)
    public_id = secrets.token_hex(8)
    seed = secrets.randbits(62)
    condition = least_filled_condition(exp, loaded)
    timeline = generate_timeline(loaded.spec, list(loaded.stimuli), condition, seed)
    ids = dict(
        db.session.execute(
            sa.select(Stimulus.key, Stimulus.id).where(Stimulus.experiment_id == exp.id)
        ).all()
    )
    for trial in timeline["trials"]:
        if "stimulus" in trial:
            trial["stimulus_id"] = ids[trial["stimulus"]]
        elif "stimuli" in trial:
            trial["stimulus_id"] = ids[trial["stimuli"][1]]
    participant = Participant(
        public_id=public_id,
        experiment_id=exp.id,
        platform=entry.platform,
        platform_id=entry.platform_id or f"local-{public_id}",
        study_id=entry.study_id,
        session_id=entry.session_id,
        assignment_id=entry.assignment_id,
        hit_id=entry.hit_id,
        turk_submit_to=entry.turk_submit_to,
        condition=condition,
        token_hash=hash_token(token),
        seed=seed,
        timeline=timeline,
        n_trials=len(timeline["trials"]),
        status="allocated",
        user_agent=(user_agent or "")[:1000],
    )
    db.session.add(participant)
    return participant, token
