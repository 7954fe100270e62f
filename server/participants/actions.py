"""What a researcher does to participants: approve, reject, bonus, exclude / include from analysis.

One implementation serves the dashboard and the ``humanlike recruit`` CLI. Each action checks the
participant's state, calls the experiment's recruitment platform when one is registered
(``register_recruiter``; without one the action changes local state only and says so), then moves
the participant along ``lifecycle`` and writes one audit row (who, what, result, platform reply).
Bonuses are written to ``payment`` before any money moves and claimed atomically, so a double click,
a retry after a time-out or a crash between a platform's steps never pays twice. A pay call that ends
without an answer (a 5xx, a time-out, a dropped connection) leaves the bonus ``unknown``: before it is
sent again the platform is asked whether it was paid (``Recruiter.bonus_paid``) and the local record
is settled from the answer. The participant's bonus total is added to in SQL, never read-modify-write."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.lifecycle import APPROVE, REJECT, Transition
from humanlike.server.platforms import Platform
from humanlike.server.tables.core import Experiment, Participant, Payment, utcnow

MIN_REJECTION_MESSAGE = 100
"""Prolific requires a rejection message of at least 100 characters (its API refuses shorter)."""
PROLIFIC_REJECTION_CATEGORIES = (
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
)
"""The ``rejection_category`` values Prolific's submission transition accepts."""
CLAIM_TIMEOUT = dt.timedelta(minutes=10)
"""A payment claimed longer ago than this is taken to have died mid-call and may be claimed again
(it is then treated as ``unknown``: the platform is asked before anything is sent again)."""
SETTLE_WAIT = CLAIM_TIMEOUT
"""Prolific pays a bonus asynchronously, "in the following minutes"
(https://docs.prolific.com/api-reference/bonuses/pay-bonus-payments): an unknown pay attempt that
Prolific does not yet show as paid is not sent again until this long after it."""


class PaymentStatus:
    """Where a bonus stands: written (pending), being paid (paying), created on the platform but not
    yet paid (created, Prolific's first step; its pay step was refused), sent without an answer
    (unknown: it may have been paid), paid, failed (nothing paid; may be retried), or recorded
    locally only (no platform client: nothing moved)."""

    PENDING = "pending"
    PAYING = "paying"
    CREATED = "created"
    UNKNOWN = "unknown"
    PAID = "paid"
    FAILED = "failed"
    RECORDED = "recorded"


RETRYABLE = (PaymentStatus.PENDING, PaymentStatus.CREATED, PaymentStatus.FAILED,
             PaymentStatus.UNKNOWN)
SETTLED = (PaymentStatus.PAID, PaymentStatus.RECORDED)


class ActionError(ValueError):
    """An action refused before anything changed; ``field`` names the input that is wrong."""

    def __init__(self, message: str, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.field = field
        self.status = status


class PlatformError(RuntimeError):
    """The platform refused or failed a call; ``reply`` holds what it answered. ``unknown``: the
    call may have been carried out (a 5xx, a time-out or a dropped connection after sending)."""

    def __init__(self, message: str, reply: dict[str, Any] | None = None, unknown: bool = False):
        super().__init__(message)
        self.reply = reply or {}
        self.unknown = unknown


class Recruiter(Protocol):
    """A recruitment platform's side of the actions (``humanlike.deploy`` implements Prolific and
    MTurk). Each method returns the platform's reply as JSON-able data or raises PlatformError."""

    def approve(self, participant: Participant) -> dict[str, Any]: ...

    def reject(self, participant: Participant, message: str,
               category: str | None) -> dict[str, Any]: ...

    def pay_bonus(self, participant: Participant, payment: Payment,
                  save: Callable[[], None]) -> dict[str, Any]:
        """Pay ``payment`` (amount, reason, ``idempotency_key``). A two-step platform stores its
        bonus id in ``payment.platform_ref`` and calls ``save()`` between the steps, so a retry
        after a crash pays the bonus already created instead of creating another."""
        ...


class CheckingRecruiter(Recruiter, Protocol):
    """A platform whose pay step is not idempotent (Prolific) says whether a bonus it was sent was
    paid, so an ``unknown`` one is settled instead of paid again."""

    def bonus_paid(self, participant: Participant, payment: Payment) -> bool:
        """True when the platform shows ``payment`` as paid to ``participant``."""
        ...


RecruiterFactory = Callable[[Experiment], "Recruiter | None"]
_RECRUITERS: dict[str, RecruiterFactory] = {}


def register_recruiter(platform: str, factory: RecruiterFactory) -> None:
    """Let ``factory(experiment)`` build the recruiter for experiments on ``platform``."""
    _RECRUITERS[platform] = factory


def recruiter_for(experiment: Experiment) -> Recruiter | None:
    """The experiment's platform client, or None (local experiments; no client configured)."""
    factory = _RECRUITERS.get(experiment.platform)
    return factory(experiment) if factory is not None else None


@dataclass
class ActionResult:
    """What one action did to one participant, as shown to the researcher and written to the audit."""

    participant: str
    action: str
    ok: bool
    message: str
    status: str
    local_only: bool = False
    reply: dict[str, Any] | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (dashboard responses, CLI output)."""
        return {"participant": self.participant, "action": self.action, "ok": self.ok,
                "message": self.message, "status": self.status, "local_only": self.local_only,
                "reply": self.reply, **self.detail}


def _local_note(participant: Participant) -> str:
    if participant.platform == Platform.LOCAL.value:
        return "local participant: no platform to tell"
    return f"local status only: no {participant.platform} client is configured"


def _finish(actor: str, participant: Participant, result: ActionResult) -> ActionResult:
    """Write the audit row for ``result`` and commit it with the change it records."""
    audit.record(actor, result.action, experiment=participant.experiment.slug,
                 target=participant.public_id,
                 detail={"ok": result.ok, "message": result.message, "status": result.status,
                         "local_only": result.local_only, "reply": result.reply, **result.detail})
    db.session.commit()
    return result


def _transition(participant: Participant, actor: str, transition: Transition,
                call: Callable[[Recruiter], dict[str, Any]], detail: dict[str, Any]) -> ActionResult:
    """Check the transition, tell the platform (if any), then move the participant and audit it."""
    if not transition.allows(participant.status):
        raise ActionError(f"cannot {transition.name} a participant who is {participant.status} "
                          f"(only {', '.join(sorted(transition.sources))})", "status", 409)
    recruiter = recruiter_for(participant.experiment)
    reply = None
    if recruiter is not None:
        try:
            reply = call(recruiter)
        except PlatformError as exc:
            message = str(exc)
            if exc.unknown:
                message = (f"state unknown: {participant.platform} did not answer ({exc}); it may "
                           f"have acted. Run {transition.name} again: the submission's status is "
                           "read first")
            return _finish(actor, participant, ActionResult(
                participant.public_id, transition.name, False, message, participant.status,
                reply=exc.reply, detail={**detail, "unknown": exc.unknown}))
    transition.apply(participant, utcnow())
    message = "done" if recruiter is not None else _local_note(participant)
    return _finish(actor, participant, ActionResult(
        participant.public_id, transition.name, True, message, participant.status,
        local_only=recruiter is None, reply=reply, detail=detail))


def approve(participant: Participant, actor: str) -> ActionResult:
    """Approve a completed (or submitted) participant's work."""
    return _transition(participant, actor, APPROVE, lambda r: r.approve(participant), {})


def validate_rejection(message: str, category: str | None, platform: str) -> None:
    """Refuse, before any request, a rejection the platform would refuse."""
    if len((message or "").strip()) < MIN_REJECTION_MESSAGE:
        raise ActionError(f"a rejection message needs at least {MIN_REJECTION_MESSAGE} characters "
                          f"(got {len((message or '').strip())}): say what was wrong", "message")
    if platform == Platform.PROLIFIC.value and category not in PROLIFIC_REJECTION_CATEGORIES:
        raise ActionError(f"rejection category {category!r} is not one of Prolific's: "
                          + ", ".join(PROLIFIC_REJECTION_CATEGORIES), "category")


def reject(participant: Participant, actor: str, message: str,
           category: str | None = None) -> ActionResult:
    """Reject a completed participant's work with the reason the platform will show them."""
    validate_rejection(message, category, participant.platform)
    return _transition(participant, actor, REJECT,
                       lambda r: r.reject(participant, message.strip(), category),
                       {"message_text": message.strip(), "category": category})


def set_analysis_override(participant: Participant, actor: str, decision: str | None,
                          reason: str) -> ActionResult:
    """Exclude (``exclude``) or include (``include``) a participant in analysis whatever the QC
    rules say, or clear the override (None); the reason is kept and audited."""
    if decision not in ("exclude", "include", None):
        raise ActionError(f"decision must be exclude, include or none, not {decision!r}", "decision")
    if decision is not None and not (reason or "").strip():
        raise ActionError("say why (a reason is required)", "reason")
    participant.analysis_override = decision
    participant.analysis_override_reason = reason.strip() if decision is not None else None
    return _finish(actor, participant, ActionResult(
        participant.public_id, decision or "clear_override", True, "analysis override saved",
        participant.status, detail={"reason": reason.strip()}))


def _amount(amount: Any) -> Decimal:
    try:
        value = Decimal(str(amount)).quantize(Decimal("0.01"))
    except (InvalidOperation, ValueError) as exc:
        raise ActionError(f"bonus amount {amount!r} is not a number", "amount") from exc
    if not value.is_finite() or value <= 0 or value > Decimal("1000"):
        raise ActionError(f"bonus amount {amount!r} must be above 0 and at most 1000", "amount")
    return value


def _payment_row(participant: Participant, amount: Decimal, reason: str, actor: str) -> Payment:
    """The payment for (participant, reason): the existing one, or a new pending one committed now
    (before any call), whichever of two racing requests wins the unique constraint."""
    query = sa.select(Payment).where(Payment.participant_id == participant.id,
                                     Payment.reason == reason)
    existing = db.session.execute(query).scalar_one_or_none()
    if existing is not None:
        return existing
    payment = Payment(participant_id=participant.id, reason=reason, amount=amount, actor=actor[:120],
                      idempotency_key=uuid.uuid4().hex, status=PaymentStatus.PENDING,
                      created_at=utcnow())
    db.session.add(payment)
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        return db.session.execute(query).scalar_one()
    return payment


def _add_bonus(participant: Participant, value: Decimal) -> None:
    """Add ``value`` to the participant's bonus total in one SQL statement (concurrent bonuses for
    one participant each add theirs; a Python read-modify-write lost updates on PostgreSQL)."""
    db.session.execute(
        sa.update(Participant).where(Participant.id == participant.id)
        .values(bonus=sa.func.coalesce(Participant.bonus, 0) + value)
        .execution_options(synchronize_session=False))
    db.session.expire(participant, ["bonus"])


def _aware(when: dt.datetime | None) -> dt.datetime | None:
    return when.replace(tzinfo=dt.UTC) if when is not None and when.tzinfo is None else when


def _claim(payment: Payment) -> bool:
    """Atomically take the right to pay ``payment`` (one request at a time, across processes)."""
    now = utcnow()
    claimable = sa.or_(Payment.status.in_(RETRYABLE),
                       sa.and_(Payment.status == PaymentStatus.PAYING,
                               Payment.claimed_at < now - CLAIM_TIMEOUT))
    result = db.session.execute(
        sa.update(Payment).where(Payment.id == payment.id, claimable)
        .values(status=PaymentStatus.PAYING, claimed_at=now)
        .execution_options(synchronize_session=False))
    db.session.commit()
    db.session.refresh(payment)
    return bool(getattr(result, "rowcount", 0) == 1)


def pay_bonus(participant: Participant, actor: str, amount: Any, reason: str) -> ActionResult:
    """Pay ``amount`` to ``participant`` for ``reason`` at most once, however often it is asked."""
    value = _amount(amount)
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("say what the bonus is for (a reason is required)", "reason")
    if len(reason) > 200:
        raise ActionError("the bonus reason is longer than 200 characters", "reason")
    payment = _payment_row(participant, value, reason, actor)
    detail = {"amount": str(payment.amount), "reason": reason, "payment": payment.idempotency_key}
    if Decimal(str(payment.amount)) != value:
        raise ActionError(f"a bonus for {reason!r} of {payment.amount} already exists for this "
                          "participant; use another reason for a further bonus", "amount", 409)
    if payment.status in SETTLED:
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", True, f"already {payment.status}: nothing paid again",
            participant.status, local_only=payment.status == PaymentStatus.RECORDED,
            reply=payment.reply, detail={**detail, "duplicate": True}))
    previous, attempted = payment.status, _aware(payment.claimed_at)
    if not _claim(payment):
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", False, "this bonus is being paid by another request",
            participant.status, detail={**detail, "duplicate": True}))
    recruiter = recruiter_for(participant.experiment)
    if recruiter is None:
        payment.status, payment.paid_at = PaymentStatus.RECORDED, utcnow()
        _add_bonus(participant, value)
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", True,
            _local_note(participant) + "; recorded, no money moved", participant.status,
            local_only=True, detail=detail))
    checked = ""
    if payment.platform_ref and previous != PaymentStatus.PENDING and hasattr(recruiter,
                                                                              "bonus_paid"):
        settled = _settle(participant, payment, recruiter, actor, detail, previous, attempted)
        if settled is not None:
            return settled
        checked = f"checked {participant.platform.capitalize()}: not paid; "
    try:
        reply = recruiter.pay_bonus(participant, payment, db.session.commit)
    except PlatformError as exc:
        payment.reply = exc.reply
        if exc.unknown and payment.platform_ref:
            payment.status = PaymentStatus.UNKNOWN  # claimed_at stays: when it was sent
            message = (f"state unknown: {exc}. It may have been paid: run the same bonus again "
                       f"and {participant.platform} is asked first; it is paid only if it was not")
        else:
            payment.status = (PaymentStatus.CREATED if payment.platform_ref
                              else PaymentStatus.FAILED)
            message = f"not paid: {exc}"
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", False, checked + message, participant.status,
            reply=exc.reply, detail={**detail, "unknown": payment.status == PaymentStatus.UNKNOWN}))
    payment.status, payment.paid_at, payment.reply = PaymentStatus.PAID, utcnow(), reply
    _add_bonus(participant, value)
    return _finish(actor, participant, ActionResult(
        participant.public_id, "bonus", True, checked + "paid", participant.status, reply=reply,
        detail={**detail, **({"checked": "not paid"} if checked else {})}))


def _settle(participant: Participant, payment: Payment, recruiter: Any, actor: str,
            detail: dict[str, Any], previous: str,
            attempted: dt.datetime | None) -> ActionResult | None:
    """Ask the platform whether a bonus already sent (unknown, created, or claimed by a request that
    died) was paid, and settle the local record: paid -> ``paid`` (nothing sent again); not paid
    but sent too recently to tell -> left ``unknown``; not paid -> None (the caller pays it)."""
    platform = participant.platform.capitalize()
    sent = previous in (PaymentStatus.UNKNOWN, PaymentStatus.PAYING)

    def keep(message: str, reply: dict[str, Any] | None = None,
             **more: Any) -> ActionResult:
        payment.status = PaymentStatus.UNKNOWN if sent else previous
        payment.claimed_at = attempted
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", False, message, participant.status, reply=reply,
            detail={**detail, "unknown": sent, **more}))

    try:
        paid = recruiter.bonus_paid(participant, payment)
    except PlatformError as exc:
        return keep(f"state unknown: could not check {platform}: {exc}; nothing sent again",
                    exc.reply, checked="failed")
    if paid:
        payment.status, payment.paid_at = PaymentStatus.PAID, utcnow()
        _add_bonus(participant, Decimal(str(payment.amount)))
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", True,
            f"state unknown: checked {platform}: paid; recorded as paid, nothing paid again",
            participant.status, detail={**detail, "checked": "paid"}))
    if sent and attempted is not None and attempted > utcnow() - SETTLE_WAIT:
        again = (attempted + SETTLE_WAIT).strftime("%H:%M UTC")
        return keep(f"state unknown: checked {platform}: not paid yet. {platform} pays bonuses "
                    f"asynchronously, so it is not sent again before {again}; run it again then, "
                    "or mark it paid after checking the submission on "
                    f"{platform}", checked="not paid yet")
    return None


BONUS_BATCH = 100
"""Bonuses per platform request in ``pay_bonuses`` (Prolific's bulk bonus takes one CSV row per
participant; its docs set no limit and advise bulk calls for payments, which contend for the
workspace's wallet: https://docs.prolific.com/documentation/core-concepts/managing-high-loads)."""


class BatchRecruiter(CheckingRecruiter, Protocol):
    """A platform that pays many bonuses in one request (Prolific's bulk bonus payment)."""

    def bonus_batch_key(self, participant: Participant) -> str:
        """Bonuses with the same key may share one request (Prolific: the same study)."""
        ...

    def pay_bonuses(self, pairs: list[tuple[Participant, Payment]],
                    save: Callable[[], None]) -> dict[str, Any]:
        """Create one bonus for every pair (its id stored on each payment, ``save()``d), then pay it
        once; the reply for the whole batch."""
        ...


def pay_bonuses(participants: list[Participant], actor: str, amount: Any, reason: str,
                batch: int = BONUS_BATCH) -> list[ActionResult]:
    """``pay_bonus`` for many participants with one platform request per ``batch`` of them, with its
    guarantees: each (participant, reason) paid at most once. A batch whose pay reply is lost leaves
    every payment in it ``unknown``; run again, each is checked on the platform first (``_settle``)
    and those not paid go into a new batch, never the old one paid again (it would pay all of it)."""
    value = _amount(amount)
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("say what the bonus is for (a reason is required)", "reason")
    if len(reason) > 200:
        raise ActionError("the bonus reason is longer than 200 characters", "reason")
    if batch < 1:
        raise ActionError(f"a bonus batch holds at least one participant (got {batch})", "batch")
    if not participants:
        return []
    found = recruiter_for(participants[0].experiment)
    if found is None or not hasattr(found, "pay_bonuses") or len(participants) == 1:
        return bulk(participants, lambda p: pay_bonus(p, actor, value, reason))
    recruiter: Any = found
    done: dict[str, ActionResult] = {}
    due: list[tuple[Participant, Payment, dict[str, Any]]] = []
    for participant in participants:
        payment = _payment_row(participant, value, reason, actor)
        detail = {"amount": str(payment.amount), "reason": reason,
                  "payment": payment.idempotency_key}
        key = participant.public_id
        if Decimal(str(payment.amount)) != value:
            done[key] = ActionResult(key, "refused", False, f"a bonus for {reason!r} of "
                                     f"{payment.amount} already exists for this participant; use "
                                     "another reason for a further bonus", participant.status,
                                     detail={"field": "amount"})
            continue
        if payment.status in SETTLED:
            done[key] = _finish(actor, participant, ActionResult(
                key, "bonus", True, f"already {payment.status}: nothing paid again",
                participant.status, local_only=payment.status == PaymentStatus.RECORDED,
                reply=payment.reply, detail={**detail, "duplicate": True}))
            continue
        if payment.platform_ref and not shares_platform_ref(payment):
            done[key] = pay_bonus(participant, actor, value, reason)  # its own created bonus
            continue
        previous, attempted = payment.status, _aware(payment.claimed_at)
        if not _claim(payment):
            done[key] = _finish(actor, participant, ActionResult(
                key, "bonus", False, "this bonus is being paid by another request",
                participant.status, detail={**detail, "duplicate": True}))
            continue
        if payment.platform_ref and previous != PaymentStatus.PENDING:
            settled = _settle(participant, payment, recruiter, actor, detail, previous, attempted)
            if settled is not None:
                done[key] = settled
                continue
            detail = {**detail, "checked": "not paid", "abandoned": payment.platform_ref}
        due.append((participant, payment, detail))
    groups: dict[str, list[tuple[Participant, Payment, dict[str, Any]]]] = {}
    for item in due:
        groups.setdefault(recruiter.bonus_batch_key(item[0]), []).append(item)
    for items in groups.values():
        for start in range(0, len(items), batch):
            for result in _pay_batch(recruiter, items[start:start + batch], actor):
                done[result.participant] = result
    return [done[p.public_id] for p in participants]


BATCH_REF = "batch:"
"""``Payment.platform_ref`` of a bonus paid in a batch: this prefix and the batch's bonus id (one
participant's retry must never pay it: that would pay the whole batch again)."""


def shares_platform_ref(payment: Payment) -> bool:
    """Whether the payment's platform bonus is a batch's, shared with other payments."""
    return bool(payment.platform_ref and payment.platform_ref.startswith(BATCH_REF))


def _pay_batch(recruiter: Any, items: list[tuple[Participant, Payment, dict[str, Any]]],
               actor: str) -> list[ActionResult]:
    """One platform request for these claimed payments, then each settled alike and audited."""
    pairs = [(p, pay) for p, pay, _ in items]
    size = len(items)
    for _, payment in pairs:  # a new bonus: an earlier batch's (not paid) is never paid again
        payment.platform_ref = None
    try:
        reply = recruiter.pay_bonuses(pairs, db.session.commit)
    except PlatformError as exc:
        created = any(pay.platform_ref for _, pay in pairs)
        unknown = exc.unknown and created
        results = []
        for participant, payment, detail in items:
            payment.reply = exc.reply
            if unknown:
                payment.status = PaymentStatus.UNKNOWN  # claimed_at stays: when it was sent
                message = (f"state unknown: {exc}. It may have been paid (a batch of {size}): "
                           f"run the same bonus again and {participant.platform} is asked first "
                           "for each participant; it is paid only if it was not")
            else:
                payment.status = (PaymentStatus.CREATED if payment.platform_ref
                                  else PaymentStatus.FAILED)
                message = f"not paid: {exc}"
            checked = (f"checked {participant.platform.capitalize()}: not paid; "
                       if detail.get("checked") else "")
            results.append(_finish(actor, participant, ActionResult(
                participant.public_id, "bonus", False, checked + message, participant.status,
                reply=exc.reply, detail={**detail, "unknown": unknown, "batch": size})))
        return results
    results = []
    total = sum((Decimal(str(pay.amount)) for _, pay in pairs), Decimal(0))
    for participant, payment, detail in items:
        share = Decimal(str(payment.amount)) / total if total else Decimal(0)
        payment.status, payment.paid_at = PaymentStatus.PAID, utcnow()
        payment.reply = _share(reply, share)
        _add_bonus(participant, Decimal(str(payment.amount)))
        checked = (f"checked {participant.platform.capitalize()}: not paid; "
                   if detail.get("checked") else "")
        results.append(_finish(actor, participant, ActionResult(
            participant.public_id, "bonus", True, checked + f"paid (a batch of {size})",
            participant.status, reply=payment.reply, detail={**detail, "batch": size})))
    return results


def _share(reply: dict[str, Any], share: Decimal) -> dict[str, Any]:
    """A batch's reply as one payment keeps it: the set-up's amounts (minor units) scaled to this
    payment's share, so that summing the payments' fees gives the batch's fees once."""
    created = reply.get("created")
    if not isinstance(created, dict):
        return dict(reply)
    scaled = {k: (round(float(Decimal(str(v)) * share), 4) if k in ("amount", "fees",
                                                                      "total_amount", "vat")
                  and isinstance(v, int | float) else v) for k, v in created.items()}
    return {**reply, "created": {**scaled, "batch_share": float(share)}}


def mark_bonus_paid(participant: Participant, actor: str, reason: str) -> ActionResult:
    """Record a bonus whose state is unknown as paid after the researcher checked the platform
    (Prolific's submissions page shows the bonuses paid); audited, nothing sent."""
    reason = (reason or "").strip()
    payment = db.session.execute(sa.select(Payment).where(
        Payment.participant_id == participant.id, Payment.reason == reason)).scalar_one_or_none()
    if payment is None:
        raise ActionError(f"no bonus for {reason!r} for this participant", "reason", 404)
    if payment.status not in (PaymentStatus.UNKNOWN, PaymentStatus.CREATED,
                              PaymentStatus.FAILED, PaymentStatus.PAYING):
        raise ActionError(f"the bonus for {reason!r} is {payment.status}: only a bonus whose state "
                          "is unknown can be marked paid", "reason", 409)
    before = payment.status
    done = db.session.execute(
        sa.update(Payment).where(Payment.id == payment.id, Payment.status == before)
        .values(status=PaymentStatus.PAID, paid_at=utcnow())
        .execution_options(synchronize_session=False))
    if getattr(done, "rowcount", 0) != 1:
        db.session.rollback()
        raise ActionError("the bonus changed meanwhile: look again", "reason", 409)
    _add_bonus(participant, Decimal(str(payment.amount)))
    db.session.expire(payment)
    return _finish(actor, participant, ActionResult(
        participant.public_id, "mark_paid_after_checking", True,
        f"marked paid after checking (was {before}); nothing sent", participant.status,
        detail={"amount": str(payment.amount), "reason": reason, "was": before,
                "payment": payment.idempotency_key}))


MAX_MESSAGE = 5000


def send_message(participants: list[Participant], actor: str, body: str) -> list[ActionResult]:
    """Send one message to these participants through their platform (Prolific's bulk message:
    one request per study), then one audit row each with the text. Refused before any request
    when the text is empty or the platform has no client (nothing is sent)."""
    body = (body or "").strip()
    if not body:
        raise ActionError("write the message (it is empty)", "message_body")
    if len(body) > MAX_MESSAGE:
        raise ActionError(f"the message is longer than {MAX_MESSAGE} characters", "message_body")
    if not participants:
        return []
    recruiter = recruiter_for(participants[0].experiment)
    if recruiter is None or not hasattr(recruiter, "message"):
        raise ActionError(_local_note(participants[0]) + ": no message can be sent", "platform",
                          409)
    try:
        reply = recruiter.message(participants, body)
        ok, note = True, f"message sent ({len(participants)} recipient(s))"
    except PlatformError as exc:
        reply, ok, note = exc.reply, False, f"not sent: {exc}"
    results = []
    for p in participants:
        result = ActionResult(p.public_id, "message", ok, note, p.status, reply=reply,
                              detail={"message_text": body})
        audit.record(actor, "message", experiment=p.experiment.slug, target=p.public_id,
                     detail={"ok": ok, "message": note, "message_text": body, "reply": reply})
        results.append(result)
    db.session.commit()
    return results


def bulk(participants: Iterable[Participant],
         action: Callable[[Participant], ActionResult]) -> list[ActionResult]:
    """Apply ``action`` to each participant; a refusal for one is reported and the rest go on."""
    results = []
    for participant in participants:
        try:
            results.append(action(participant))
        except ActionError as exc:
            db.session.rollback()
            results.append(ActionResult(participant.public_id, "refused", False, str(exc),
                                        participant.status, detail={"field": exc.field}))
    return results


BULK_ACTIONS = ("approve", "reject", "bonus", "mark_paid", "exclude", "include", "clear")
"""The actions a background job (``server/participants/jobs.py``) applies one participant at a time."""


def action_runner(action: str, inputs: dict[str, str],
                  actor: str) -> Callable[[Participant], ActionResult]:
    """The function that applies ``action`` with the dashboard's ``inputs`` to one participant on
    behalf of ``actor`` (the dashboard's bulk form and its background job share it)."""
    if action == "approve":
        return lambda p: approve(p, actor)
    if action == "reject":
        def reject_one(p: Participant) -> ActionResult:
            result = reject(p, actor, inputs["message"], inputs.get("category") or None)
            if result.ok and inputs.get("exclude_too") != "0":
                set_analysis_override(
                    p, actor, "exclude", f"rejected ({inputs.get('category') or 'no category'}): "
                    + inputs["message"][:120])
                result.message += "; excluded from the analysis"
            return result
        return reject_one
    if action == "bonus":
        return lambda p: pay_bonus(p, actor, inputs["amount"], inputs["reason"])
    if action == "mark_paid":
        return lambda p: mark_bonus_paid(p, actor, inputs["reason"])
    if action not in ("exclude", "include", "clear"):
        raise ActionError(f"unknown action {action!r}", "action")
    decision = None if action == "clear" else action
    return lambda p: set_analysis_override(p, actor, decision, inputs["reason"])
