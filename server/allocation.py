"""Who may take part, and allocation: duplicates, exclusions, device, condition, timeline, token."""

from __future__ import annotations

import re
import secrets

import sqlalchemy as sa

from humanlike.server.experiments import LoadedExperiment
from humanlike.server.extensions import db
from humanlike.server.lifecycle import FILLED, ParticipantStatus
from humanlike.server.models import Experiment, Participant, Stimulus
from humanlike.server.platforms import Entry
from humanlike.server.timeline import generate_timeline
from humanlike.server.tokens import hash_token, new_token

MOBILE_UA = re.compile(r"Mobi|Android|iPhone|iPad|iPod|Windows Phone|Opera Mini", re.IGNORECASE)


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
            .where(Participant.experiment_id == exp.id, Participant.status.in_(FILLED))
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
    token = new_token()
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
        spec_version_id=loaded.version_id,
        token_hash=hash_token(token),
        seed=seed,
        timeline=timeline,
        n_trials=len(timeline["trials"]),
        status=ParticipantStatus.ALLOCATED.value,
        user_agent=(user_agent or "")[:1000],
    )
    db.session.add(participant)
    return participant, token
