"""Resume policies (spec ``[resume]`` and a block's ``resume``): what a participant who comes back
through the study link or a resume code gets: ``resume`` where they stopped, ``restart_block`` (the
current block again from its first trial; the answers given in it so far are kept in the
``resume_policy`` event, so nothing is lost), or ``refuse``; and past ``max_age_minutes`` since
their last stored trial, a polite refusal whatever the block's policy. Every decision is an event
(exported in ``events``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa
from flask_babel import gettext, lazy_gettext

from humanlike.server.extensions import db
from humanlike.server.participants import trial_store
from humanlike.server.study import experiments
from humanlike.server.tables.core import Event, Participant, Trial, utcnow

EVENT = "resume_policy"
"""The event type recording each decision (value: a ``Decision`` plus the restarted answers)."""
STALE_EVENT = "stale_trial"
"""The event type keeping a trial answered before its block restarted, sent afterwards (value: the
trial as sent, its ``attempt`` and the participant's ``current_attempt``)."""


@dataclass(frozen=True)
class Decision:
    """What happens to a returning participant, and why."""

    action: str
    """``resume``, ``restart_block`` or ``refuse``."""
    policy: str
    """The policy of the block the participant stopped in."""
    block: str | None
    age_minutes: float
    max_age_minutes: int | None
    reason: str
    """``policy`` (the block's policy decided), ``max_age`` (away too long) or ``unset`` (the spec
    sets no policy: resume, nothing recorded)."""


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def last_activity(participant: Participant) -> dt.datetime:
    """When the participant last did something: the last stored trial, else consent or arrival."""
    last = db.session.execute(sa.select(sa.func.max(Trial.server_time))
                              .where(Trial.participant_id == participant.id)).scalar_one()
    stamps = [t for t in (last, participant.started_at, participant.consented_at,
                          participant.created_at) if t is not None]
    return max(_aware(t) for t in stamps)


def current_block(participant: Participant) -> tuple[str | None, list[int]]:
    """The block of the first trial not stored yet, and the stored trial indices in that block."""
    stored = set(db.session.execute(sa.select(Trial.trial_index)
                                    .where(Trial.participant_id == participant.id)).scalars())
    trials: list[dict[str, Any]] = participant.timeline.get("trials", [])
    nxt = next((t for t in trials if t["index"] not in stored), None)
    if nxt is None:
        return None, []
    block = nxt.get("block")
    return block, sorted(t["index"] for t in trials
                         if t.get("block") == block and t["index"] in stored)


def decide(participant: Participant, now: dt.datetime) -> Decision:
    """The decision for a participant coming back at ``now`` under their spec version's policies."""
    loaded = experiments.for_participant(participant)
    spec = loaded.spec if loaded is not None else None
    if spec is None or (spec.resume is None and all(b.resume is None for b in spec.blocks)):
        return Decision("resume", "resume", None, 0.0, None, "unset")
    block, _ = current_block(participant)
    policy = spec.resume_policy(block) if spec is not None else "resume"
    max_age = spec.resume.max_age_minutes if spec is not None and spec.resume else None
    age = (_aware(now) - last_activity(participant)).total_seconds() / 60
    if max_age is not None and age > max_age:
        return Decision("refuse", policy, block, round(age, 2), max_age, "max_age")
    return Decision(policy, policy, block, round(age, 2), max_age, "policy")


def _restart(participant: Participant, indices: list[int]) -> list[dict[str, Any]]:
    """Remove the block's stored trials so they are asked again; returns them (for the event)."""
    rows = trial_store.remove(participant.id, indices)
    kept = [{"trial_index": r.trial_index, "response": r.response, "rt_ms": r.rt_ms,
             "first_rt_ms": r.first_rt_ms, "presented_ms": r.presented_ms, "frames": r.frames,
             "client_time": r.client_time, "server_time": _aware(r.server_time).isoformat()}
            for r in sorted(rows, key=lambda r: r.trial_index)]
    return kept


def lock(participant_id: int) -> None:
    """Serialise on the participant until the session commits: its row locked FOR UPDATE on
    PostgreSQL (a trial insert takes FOR KEY SHARE on it, so it waits and then sees the new
    attempt), on SQLite the database's write lock taken by a no-op update (trial inserts and other
    writers wait). The session's copy of the participant is read again under the lock."""
    if db.session.get_bind().dialect.name == "sqlite":
        db.session.execute(sa.update(Participant).where(Participant.id == participant_id)
                           .values(attempt=Participant.attempt)
                           .execution_options(synchronize_session=False))
    db.session.execute(sa.select(Participant).where(Participant.id == participant_id)
                       .with_for_update().execution_options(populate_existing=True)).scalar_one()


def on_return(participant: Participant, via: str, now: dt.datetime | None = None) -> Decision:
    """Decide, act (restart the block's trials) and record the decision as an event; committed.
    Decided and acted on under the participant's lock, so a trial insert or another return of the
    same participant comes wholly before or wholly after."""
    now = now or utcnow()
    if decide(participant, now).reason == "unset":
        return Decision("resume", "resume", None, 0.0, None, "unset")
    lock(participant.id)
    decision = decide(participant, now)
    value: dict[str, Any] = {**asdict(decision), "via": via}
    if decision.action == "restart_block":
        _, indices = current_block(participant)
        value["restarted"] = _restart(participant, indices)
        participant.attempt += 1  # trials still queued in the browser are now from an old attempt
        value["attempt"] = participant.attempt
    db.session.add(Event(participant_id=participant.id, type=EVENT, value=value, server_time=now))
    db.session.commit()
    return decision


def restarted_block(participant: Participant) -> str | None:
    """The block the participant's last return restarted, while none of its trials is stored
    again (the page then says the part starts again), else None."""
    if not participant.attempt:
        return None
    value = db.session.execute(sa.select(Event.value).where(
        Event.participant_id == participant.id, Event.type == EVENT)
        .order_by(Event.id.desc()).limit(1)).scalar_one_or_none()
    if not isinstance(value, dict) or value.get("action") != "restart_block":
        return None
    block, stored = current_block(participant)
    return block if block == value.get("block") and not stored else None


def keep_stale(participant_id: int, sent: dict[str, Any], current_attempt: int) -> None:
    """Keep a trial answered in an earlier attempt of a restarted block (sent after the restart)
    as a ``stale_trial`` event, once however often the browser sends it (checked and written
    under the participant's lock, so copies sent at once are kept once); committed."""
    value = {**sent, "current_attempt": current_attempt}
    lock(participant_id)
    known = db.session.execute(sa.select(Event.value).where(
        Event.participant_id == participant_id, Event.type == STALE_EVENT)).scalars()
    if all(v != value for v in known):
        db.session.add(Event(participant_id=participant_id, type=STALE_EVENT, value=value,
                             server_time=utcnow()))
    db.session.commit()


def refusal_of(participant: Participant) -> Decision | None:
    """The participant's refusal, when their last recorded decision refused them."""
    value = db.session.execute(sa.select(Event.value).where(
        Event.participant_id == participant.id, Event.type == EVENT)
        .order_by(Event.id.desc()).limit(1)).scalar_one_or_none()
    if not isinstance(value, dict) or value.get("action") != "refuse":
        return None
    max_age = value.get("max_age_minutes")
    return Decision("refuse", str(value.get("policy")), value.get("block"),
                    float(value.get("age_minutes") or 0.0),
                    int(max_age) if max_age is not None else None, str(value.get("reason")))


def refusals(experiment_id: int) -> list[dict[str, Any]]:
    """Participants refused on their return (for the dashboard's payment note), each once, from
    their latest refusal: public id, status, trials stored, when, why, how long they had been away,
    and how many times they were refused. Two queries, whatever the number of rows."""
    rows = db.session.execute(
        sa.select(Participant.public_id, Participant.status, Participant.n_trials, Event.value,
                  Event.server_time, Participant.id)
        .join(Participant, Event.participant_id == Participant.id)
        .where(Participant.experiment_id == experiment_id, Event.type == EVENT)
        .order_by(Event.server_time, Event.id)).all()
    latest: dict[int, dict[str, Any]] = {}
    for pid, status, n_trials, value, time, ident in rows:
        if not isinstance(value, dict) or value.get("action") != "refuse":
            continue
        times = latest[ident]["times"] + 1 if ident in latest else 1
        latest[ident] = {"participant": pid, "status": status, "n_trials": n_trials,
                         "refused_at": time, "reason": value.get("reason"),
                         "age_minutes": value.get("age_minutes"), "policy": value.get("policy"),
                         "block": value.get("block"),
                         "max_age_minutes": value.get("max_age_minutes"), "times": times}
    stored = dict(db.session.execute(
        sa.select(Trial.participant_id, sa.func.count()).where(Trial.participant_id.in_(latest))
        .group_by(Trial.participant_id)).all()) if latest else {}
    return [{**row, "n_stored": int(stored.get(ident, 0))} for ident, row in latest.items()]


REFUSED_TITLE = lazy_gettext("This study cannot be continued")


def refusal_message(decision: Decision, platform: str, to_platform: bool = False) -> str:
    """The polite refusal, in plain words, with what it means for payment (``to_platform``: the
    page's link takes the participant back to the platform with the refusal's code), in the
    page's language (``server/web/i18n.py``)."""
    if decision.reason == "max_age":
        why = gettext("You were away for longer than this study allows (%(minutes)s minutes), so it "
                      "cannot be continued.", minutes=decision.max_age_minutes)
    else:
        why = gettext("This part of the study cannot be continued once it has been left.")
    kept = gettext("Your answers so far are kept (you can still withdraw them).")
    if to_platform:
        return " ".join([why, kept, gettext("\u201cBack to the recruitment site\u201d below takes "
                                            "you there with this study's code for it.")])
    pay = (gettext("Please return the study on Prolific; the researcher sees how far you got and "
                   "decides about payment for the part you completed.") if platform == "prolific"
           else gettext("The researcher sees how far you got and decides about payment for the "
                        "part you completed."))
    return " ".join([why, kept, pay])
