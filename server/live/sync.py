"""Bring participants' statuses in line with what the recruitment platform says (``recruit sync``
and the dashboard's "Sync now", one implementation: ``sync_listing``).

Idempotent: a participant already where the platform says is left alone, a change the lifecycle
does not allow is reported (never forced), and each change is audited; safe to run on a schedule.
A submission of a participant who finished and then withdrew (their rows are gone; the withdrawal
ledger knows them by keyed hash) is approved once Prolific has it, as a finished study is; a
submission nobody here knows is reported and kept for the dashboard's list.
A Prolific sync also reads the study (status, places, reward) and counts the webhook deliveries
Prolific reports as failed, for the dashboard's listing panel."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.lifecycle import ParticipantStatus, Transition
from humanlike.server.platforms import Exit
from humanlike.server.tables.core import Experiment, Participant, utcnow


@dataclass
class PlatformRecord:
    """One submission (Prolific) or assignment (MTurk) as the platform reports it."""

    platform_id: str
    status: str
    transition: Transition | None
    ref: str | None = None


@dataclass
class SyncReport:
    """What a sync saw and did."""

    seen: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    changed: list[dict[str, str]] = field(default_factory=list)
    unchanged: int = 0
    unknown: list[str] = field(default_factory=list)
    conflicts: list[dict[str, str]] = field(default_factory=list)
    exits: list[dict[str, str]] = field(default_factory=list)
    """Participants who left by a declared exit (``participant.outcome``) and whose submission the
    platform holds under that exit's code: expected, so neither a change nor a conflict."""
    unknown_submissions: list[dict[str, Any]] = field(default_factory=list)
    """Each unknown record as the platform reports it (participant, submission, status)."""
    withdrawn: list[dict[str, Any]] = field(default_factory=list)
    """Records of participants deleted here (the withdrawal ledger), by ledger row, never by id:
    what settling their pay did (``withdrawal_ledger.settle``)."""

    @property
    def withdrawn_approved(self) -> int:
        """Withdrawn participants' submissions this sync approved."""
        return sum(1 for w in self.withdrawn if w.get("now") and w.get("settled") == ParticipantStatus.APPROVED)

    def as_dict(self) -> dict[str, Any]:
        return {"seen": self.seen, "by_status": dict(self.by_status), "changed": self.changed,
                "unchanged": self.unchanged, "unknown": self.unknown, "conflicts": self.conflicts,
                "exits": self.exits, "unknown_submissions": self.unknown_submissions, "withdrawn": self.withdrawn}


def _withdrawn(experiment: Experiment, record: PlatformRecord,
               approve: Callable[[PlatformRecord], Any] | None, actor: str) -> dict[str, Any] | None:
    """Settle the pay of a participant deleted here whose submission this is (None: not one)."""
    from humanlike.server.rights import ledger as withdrawal_ledger

    row = withdrawal_ledger.withdrawn_submission(experiment.slug, record.platform_id, record.ref)
    if row is None:
        return None
    before = row.settled_at
    done = withdrawal_ledger.settle(
        row, record.status, (lambda: approve(record)) if approve is not None else None, actor)
    return {**done, "now": before is None and row.settled_at is not None}


def apply(experiment: Experiment, records: Iterable[PlatformRecord], actor: str = "sync",
          approve: Callable[[PlatformRecord], Any] | None = None) -> SyncReport:
    """Move each known participant along the transition its platform status implies; settle the
    submissions of participants who finished and withdrew (``approve`` is the platform's call)."""
    report = SyncReport()
    now = utcnow()
    for record in records:
        report.seen += 1
        report.by_status[record.status] += 1
        participant = db.session.execute(sa.select(Participant).where(
            Participant.experiment_id == experiment.id,
            Participant.platform == experiment.platform,
            Participant.platform_id == record.platform_id)).scalar_one_or_none()
        if participant is None:
            withdrawn = _withdrawn(experiment, record, approve, actor)
            if withdrawn is not None:
                report.withdrawn.append(withdrawn)
                continue
            report.unknown.append(record.platform_id)
            report.unknown_submissions.append({"participant": record.platform_id,
                                               "submission": record.ref, "status": record.status})
            continue
        transition = record.transition
        if transition is None or participant.status == transition.target:
            report.unchanged += 1
            continue
        before = participant.status
        if not transition.apply(participant, now):
            if participant.outcome not in (None, Exit.COMPLETED):  # left by a declared exit
                report.exits.append({"participant": participant.public_id, "local": before,
                                     "outcome": participant.outcome, "platform": record.status})
                continue
            report.conflicts.append({"participant": participant.public_id, "local": before,
                                     "platform": record.status})
            continue
        if record.ref and not participant.session_id and experiment.platform == "prolific":
            participant.session_id = record.ref
        change = {"participant": participant.public_id, "from": before,
                  "to": participant.status, "platform": record.status}
        report.changed.append(change)
        audit.record(actor, f"sync_{transition.name}", experiment=experiment.slug,
                     target=participant.public_id, detail=change)
    meta = dict(experiment.recruitment_meta or {})
    meta["synced_at"] = now.isoformat()
    meta["last_sync"] = {"seen": report.seen, "changed": len(report.changed),
                         "conflicts": len(report.conflicts), "exits": len(report.exits),
                         "unknown": len(report.unknown),
                         "withdrawn": len(report.withdrawn),
                         "withdrawn_approved": report.withdrawn_approved}
    meta["unknown_submissions"] = report.unknown_submissions  # listed on the dashboard
    from humanlike.server.rights.ledger import forget_late_events

    forget_late_events()  # webhooks about a withdrawn participant's submission, since
    experiment.recruitment_meta = meta
    db.session.commit()
    return report


def platform_records(platform: str, client: Any, ref: str) -> Iterator[PlatformRecord]:
    """The platform's submissions / assignments as ``PlatformRecord`` rows."""
    if platform == "prolific":
        from humanlike.server.sources.prolific import STATUS_TRANSITIONS

        for sub in client.submissions(ref):
            status = sub.get("status", "")
            yield PlatformRecord(sub.get("participant_id") or sub.get("participant") or "",
                                 status, STATUS_TRANSITIONS.get(status), sub.get("id"))
        return
    from humanlike.server.sources.mturk import STATUS_TRANSITIONS as MTURK

    for a in client.assignments(ref):
        status = a.get("AssignmentStatus", "")
        yield PlatformRecord(a.get("WorkerId", ""), status, MTURK.get(status),
                             a.get("AssignmentId"))


STUDY_FIELDS = ("status", "places_taken", "total_available_places", "reward",
                "estimated_completion_time")
"""What the listing panel shows of Prolific's study object."""


def sync_listing(experiment: Experiment, client: Any, actor: str = "sync") -> SyncReport:
    """Apply the platform's statuses to the participants, then (Prolific) note the study's status,
    places and reward and the number of failed webhook deliveries on the experiment."""
    ref = experiment.recruitment_ref
    if not ref:
        raise ValueError(f"{experiment.slug} has no listing on {experiment.platform} yet")
    approve = ((lambda record: client.approve_submission(record.ref))
               if experiment.platform == "prolific" else None)
    report = apply(experiment, platform_records(experiment.platform, client, ref), actor, approve)
    if experiment.platform == "prolific":
        study = client.get_study(ref) or {}
        meta = dict(experiment.recruitment_meta or {})
        meta.update({f"study_{k}": study.get(k) for k in STUDY_FIELDS if k in study})
        if "status" in study:
            meta["platform_status"] = study["status"]
        subscriptions = (meta.get("hooks") or {}).get("subscriptions") or {}
        meta["failed_deliveries"] = sum(len(client.failed_deliveries(sid))
                                        for sid in subscriptions.values())
        experiment.recruitment_meta = meta
        db.session.commit()
    return report
