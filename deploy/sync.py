"""Bring participants' statuses in line with what the recruitment platform says (``recruit sync``).

Idempotent: a participant already where the platform says is left alone, a change the lifecycle
does not allow is reported (never forced), and each change is audited; safe to run on a schedule."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.lifecycle import Transition
from humanlike.server.models import Experiment, Participant, utcnow


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

    def as_dict(self) -> dict[str, Any]:
        return {"seen": self.seen, "by_status": dict(self.by_status), "changed": self.changed,
                "unchanged": self.unchanged, "unknown": self.unknown, "conflicts": self.conflicts}


def apply(experiment: Experiment, records: Iterable[PlatformRecord],
          actor: str = "sync") -> SyncReport:
    """Move each known participant along the transition its platform status implies."""
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
            report.unknown.append(record.platform_id)
            continue
        transition = record.transition
        if transition is None or participant.status == transition.target:
            report.unchanged += 1
            continue
        before = participant.status
        if not transition.apply(participant, now):
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
                         "conflicts": len(report.conflicts), "unknown": len(report.unknown)}
    experiment.recruitment_meta = meta
    db.session.commit()
    return report
