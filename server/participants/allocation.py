"""Who may take part, and allocation: duplicates, exclusions, device, condition, timeline, token."""

from __future__ import annotations

import datetime as dt
import random
import re
import secrets
from typing import Any

import numpy as np
import sqlalchemy as sa
from flask import current_app

from humanlike.server.database import write_lock
from humanlike.server.extensions import db
from humanlike.server.lifecycle import HOLDS_PLACE, ParticipantStatus
from humanlike.server.participants import timeouts
from humanlike.server.participants.tokens import hash_token, new_token
from humanlike.server.platforms import Entry
from humanlike.server.study.experiments import LoadedExperiment
from humanlike.server.study.timeline import generate_timeline
from humanlike.server.tables.core import Experiment, Participant, Stimulus, utcnow

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


def place_counts(exp: Experiment, loaded: LoadedExperiment, now: dt.datetime) -> dict[str, int]:
    """Participants holding a place per condition: consented, started or finished (not returned,
    timed out or rejected), and those allocated within the spec's ``allocation_cutoff_minutes``."""
    cutoff = now - dt.timedelta(minutes=loaded.spec.allocation_cutoff_minutes)
    allocated = ParticipantStatus.ALLOCATED
    holds = sa.or_(
        Participant.status.in_(HOLDS_PLACE - {allocated}),
        sa.and_(Participant.status == allocated, Participant.created_at >= cutoff),
    )
    counts = dict(
        db.session.execute(
            sa.select(Participant.condition, sa.func.count())
            .where(Participant.experiment_id == exp.id, holds)
            .group_by(Participant.condition)
        ).all()
    )
    return {c.name: int(counts.get(c.name, 0)) for c in loaded.spec.conditions}


def choose_condition(counts: dict[str, int], seed: int | None) -> str:
    """The least-filled condition; a tie is drawn by ``random.Random(seed).choice(tied)``, with
    ``tied`` in spec order, so the recorded (counts, seed) reproduce the choice (no seed: the
    first tied condition)."""
    fewest = min(counts.values())
    tied = [name for name, n in counts.items() if n == fewest]
    return tied[0] if seed is None else random.Random(seed).choice(tied)


def least_filled_condition(exp: Experiment, loaded: LoadedExperiment) -> tuple[str, dict[str, Any]]:
    """A least-filled condition and its allocation record ``{counts, seed, condition}``.

    Ties are drawn at random unless the app's ``ALLOCATION_RANDOM_TIES`` is False (then spec order,
    for deterministic tests and demos; the record's seed is then None); with ``ALLOCATION_SEED``
    set the draw's seed derives from it and the arrival's number (``derived_seeds``)."""
    counts = place_counts(exp, loaded, utcnow())
    seed = None
    if current_app.config.get("ALLOCATION_RANDOM_TIES", True):
        derived = derived_seeds(exp, 3)
        seed = secrets.randbits(62) if derived is None else derived[2]
    condition = choose_condition(counts, seed)
    return condition, {"counts": counts, "seed": seed, "condition": condition}


def _lock_experiment(exp: Experiment) -> None:
    """On PostgreSQL, hold the experiment's row lock until the commit: allocations queue on it."""
    if db.session.get_bind().dialect.name == "postgresql":
        db.session.execute(sa.select(Experiment.id).where(Experiment.id == exp.id).with_for_update())


def allocate(
    exp: Experiment, loaded: LoadedExperiment, entry: Entry, user_agent: str | None,
    simulated: bool = False,
) -> tuple[Participant, str]:
    """Create a participant with a condition, a seeded timeline and a fresh write token;
    ``simulated`` (a rehearsal or a preview, ``server.rehearsal``) is written in the same insert.

    Returns the row and the token in clear (only its hash is stored). Counting the places and
    inserting the row is one transaction, committed here, under the experiment's row lock
    (PostgreSQL) or the write lock (SQLite), so simultaneous arrivals in any process see each
    other. A concurrent duplicate surfaces as an IntegrityError on the (experiment, platform, id)
    key, after a rollback."""
    with write_lock():
        try:
            _lock_experiment(exp)
            timeouts.sweep_experiment(exp)
            participant, token = _new_participant(exp, loaded, entry, user_agent, simulated)
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise
    return participant, token


def derived_seeds(exp: Experiment, n: int) -> list[int] | None:
    """``n`` 62-bit seeds from the app's ``ALLOCATION_SEED`` and the arrival's number (the
    participants so far), or None when it is not set."""
    base = current_app.config.get("ALLOCATION_SEED")
    if base is None:
        return None
    arrivals = db.session.execute(
        sa.select(sa.func.count()).where(Participant.experiment_id == exp.id)).scalar_one()
    state = np.random.SeedSequence([int(base), int(arrivals)]).generate_state(n, np.uint64)
    return [int(v >> np.uint64(2)) for v in state]


def participant_seeds(exp: Experiment) -> tuple[int, int]:
    """The timeline's and the adaptive draw's seeds: random, or with the app's
    ``ALLOCATION_SEED`` set (rehearsals, tests) derived from it and the arrival's number, so the
    same study run twice allocates identically."""
    derived = derived_seeds(exp, 2)
    if derived is None:
        return secrets.randbits(62), secrets.randbits(62)
    return derived[0], derived[1]


def _adaptive_draw(exp: Experiment, loaded: LoadedExperiment, seed: int) -> dict[str, Any]:
    """The ``[adaptive]`` block's stimuli from the latest stored weights (read, not computed)."""
    from humanlike.server.study import adaptive

    by_kind: dict[str, list[str]] = {}
    for rec in loaded.stimuli:
        by_kind.setdefault(rec.kind, []).append(rec.key)
    pool = adaptive.pool_keys(loaded.spec, by_kind,
                              {r.key: r.meta.get("block") for r in loaded.stimuli})
    return adaptive.draw(loaded.spec, pool, adaptive.current_design(exp.id), seed)


def _new_participant(
    exp: Experiment, loaded: LoadedExperiment, entry: Entry, user_agent: str | None,
    simulated: bool = False,
) -> tuple[Participant, str]:
    token = new_token()
    public_id = secrets.token_hex(8)
    seed, draw_seed = participant_seeds(exp)
    condition, record = least_filled_condition(exp, loaded)
    drawn = None
    if loaded.spec.adaptive is not None:
        record["adaptive"] = _adaptive_draw(exp, loaded, draw_seed)
        drawn = {record["adaptive"]["block"]: record["adaptive"]["random"]
                 + record["adaptive"]["weighted"]}
    timeline = generate_timeline(loaded.spec, list(loaded.stimuli), condition, seed, drawn)
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
        allocation=record,
        timeline=timeline,
        n_trials=len(timeline["trials"]),
        status=ParticipantStatus.ALLOCATED.value,
        user_agent=(user_agent or "")[:1000],
        simulated=simulated,
    )
    db.session.add(participant)
    return participant, token
