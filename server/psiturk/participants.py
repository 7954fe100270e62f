"""psiTurk participants as humanlike ``participant`` rows: the experiment row of a project, the
psiTurk status codes and their humanlike statuses, the balanced condition choice, and creation."""

from __future__ import annotations

import datetime as dt
import secrets
from collections import Counter
from typing import Any

import sqlalchemy as sa
from flask import current_app

from humanlike.server.extensions import db
from humanlike.server.lifecycle import ExperimentStatus, ParticipantStatus
from humanlike.server.participants.tokens import hash_token, new_token
from humanlike.server.platforms import Platform
from humanlike.server.psiturk.modes import MTURK_MODES
from humanlike.server.psiturk.project import PsiturkProject
from humanlike.server.tables.core import Experiment, Participant, utcnow
from humanlike.server.tables.psiturk import PsiturkAssignment
from humanlike.server.trial_types.registry import PSITURK_KIND

# psiTurk's status codes (psiturk_statuses.py)
NOT_ACCEPTED, ALLOCATED, STARTED, COMPLETED, SUBMITTED, CREDITED, QUITEARLY, BONUSED = range(8)

_S = ParticipantStatus
#: psiTurk status code -> humanlike status
TO_STATUS: dict[int, ParticipantStatus] = {
    NOT_ACCEPTED: _S.ALLOCATED, ALLOCATED: _S.ALLOCATED, STARTED: _S.STARTED,
    COMPLETED: _S.COMPLETED, SUBMITTED: _S.SUBMITTED, CREDITED: _S.APPROVED,
    QUITEARLY: _S.QUIT_EARLY, BONUSED: _S.APPROVED,
}
#: statuses psiTurk counts as filling a condition whatever their age
FINISHED_CODES = (COMPLETED, SUBMITTED, CREDITED, BONUSED)


@sa.event.listens_for(PsiturkAssignment.status, "set")
def _mirror_status(target: PsiturkAssignment, value: int, _old: Any, _initiator: Any) -> None:
    """Every psiTurk status change (ours or a custom.py's) is mirrored onto the participant row."""
    participant = target.participant
    if participant is None or value is None:
        return
    status = TO_STATUS.get(int(value))
    if status is None:
        return
    participant.status = status.value
    now = utcnow()
    if status == _S.STARTED and participant.started_at is None:
        participant.started_at = now
    if status == _S.COMPLETED and participant.completed_at is None:
        participant.completed_at = now


def project_experiment(project: PsiturkProject) -> Experiment:
    """The ``experiment`` row of a psiTurk project (created on first use; its spec records the
    project's config so the dashboard and export can show it)."""
    spec: dict[str, Any] = {
        "slug": project.slug, "title": project.title or project.root.name, "kind": PSITURK_KIND,
        "psiturk": {"root": str(project.root), "code_version": project.code_version,
                    "num_conds": project.num_conds, "num_counters": project.num_counters,
                    "cutoff_minutes": project.cutoff_minutes,
                    "allow_repeats": project.allow_repeats},
    }
    if project.prolific_completion_code:
        spec["completion"] = {"prolific_code": project.prolific_completion_code}
    return experiment_row(project.slug, spec, str(project.root))


def experiment_row(slug: str, spec: dict[str, Any], root: str) -> Experiment:
    """Get or create the experiment row ``slug`` for psiTurk data; the spec is refreshed."""
    import hashlib
    import json

    from sqlalchemy.exc import IntegrityError

    select = sa.select(Experiment).where(Experiment.slug == slug)
    exp = db.session.execute(select).scalar_one_or_none()
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    if exp is None:
        db.session.add(Experiment(slug=slug, title=str(spec.get("title") or slug)[:200], spec=spec,
                                  spec_hash=digest, root=root, status=ExperimentStatus.LIVE.value,
                                  platform=Platform.MTURK.value))
        try:
            db.session.commit()
        except IntegrityError:  # another process's first arrival inserted it meanwhile: use theirs
            db.session.rollback()
        return db.session.execute(select).scalar_one()
    if exp.spec_hash != digest:
        exp.spec, exp.spec_hash, exp.root = spec, digest, root
        db.session.commit()
    return exp


def choose_condition(project: PsiturkProject, exp_id: int, mode: str) -> tuple[int, int]:
    """psiTurk's balanced assignment: the least-filled (condition, counterbalance) among this code
    version and mode, counting finished participants and those who began within the cutoff time;
    ties broken at random."""
    since = utcnow() - dt.timedelta(minutes=project.cutoff_minutes)
    a = PsiturkAssignment
    rows = db.session.execute(
        sa.select(a.cond, a.counterbalance).where(
            a.experiment_id == exp_id, a.codeversion == project.code_version, a.mode == mode,
            sa.or_(a.status.in_(FINISHED_CODES), a.beginhit > since))
    ).all()
    counts: Counter[tuple[int, int]] = Counter(
        {(c, k): 0 for c in range(project.num_conds) for k in range(project.num_counters)})
    for cond, counter in rows:
        key = (int(cond or 0), int(counter or 0))
        if cond is not None and counter is not None and key in counts:
            counts[key] += 1
    fewest = min(counts.values())
    return secrets.choice([key for key, n in counts.items() if n == fewest])


def platform_of(mode: str, hit_id: str, prolific: bool) -> Platform:
    """Prolific when entered with Prolific's parameters; MTurk in sandbox/live; local otherwise."""
    if prolific:
        return Platform.PROLIFIC
    if mode in MTURK_MODES and not hit_id.startswith("debug"):
        return Platform.MTURK
    return Platform.LOCAL


def create_assignment(exp: Experiment, *, hit_id: str, assignment_id: str, worker_id: str,
                      mode: str, cond: int, counterbalance: int, code_version: str,
                      platform: Platform, client: dict[str, str | None]) -> tuple[PsiturkAssignment, str]:
    """Insert the participant row and its psiTurk assignment (not committed); returns the write token."""
    token = new_token()
    public_id = secrets.token_hex(8)
    uniqueid = f"{worker_id}:{assignment_id}"
    taken = db.session.execute(sa.select(Participant.id).where(
        Participant.experiment_id == exp.id, Participant.platform == platform.value,
        Participant.platform_id == worker_id)).first()
    participant = Participant(
        public_id=public_id, experiment_id=exp.id, platform=platform.value,
        # a repeat by the same worker (allow_repeats) is told apart by its uniqueId
        platform_id=(uniqueid if taken else worker_id)[:128],
        study_id=hit_id if platform == Platform.PROLIFIC else None,
        session_id=assignment_id if platform == Platform.PROLIFIC else None,
        assignment_id=assignment_id, hit_id=hit_id,
        turk_submit_to=None, condition=f"{cond}/{counterbalance}", token_hash=hash_token(token),
        seed=0, allocation={"psiturk": {"cond": cond, "counterbalance": counterbalance}},
        timeline={"psiturk": True, "trials": []}, n_trials=0,
        status=ParticipantStatus.ALLOCATED.value, user_agent=client.get("user_agent"),
    )
    db.session.add(participant)
    db.session.flush()
    assignment = PsiturkAssignment(
        participant_id=participant.id, experiment_id=exp.id, uniqueid=uniqueid,
        assignmentid=assignment_id, workerid=worker_id, hitid=hit_id,
        ipaddress=client.get("ip"), browser=client.get("browser"),
        platform=client.get("platform"), language=client.get("language"),
        cond=cond, counterbalance=counterbalance, codeversion=code_version,
        beginhit=utcnow(), status=ALLOCATED, mode=mode, bonus=0,
        trials_seen=0, events_seen=0,
    )
    assignment.participant = participant
    db.session.add(assignment)
    db.session.flush()
    current_app.logger.info("psiturk: %s allocated to condition %s/%s", uniqueid, cond, counterbalance)
    return assignment, token
