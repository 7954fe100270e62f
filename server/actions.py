"""What a researcher does to participants: approve, reject, bonus, exclude / include from analysis.

One implementation serves the dashboard and the ``humanlike recruit`` CLI. Each action checks the
participant's state, calls the experiment's recruitment platform when one is registered
(``register_recruiter``; without one the action changes local state only and says so), then moves
the participant along ``lifecycle`` and writes one audit row (who, what, result, platform reply).
Bonuses are written to ``payment`` before any money moves and claimed atomically, so a double click,
a retry after a time-out or a crash between a platform's steps never pays twice."""

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
from humanlike.server.models import Experiment, Participant, Payment, utcnow
from humanlike.server.platforms import Platform

MIN_REJECTION_MESSAGE = 100
"""Prolific requires a rejection message of at least 100 characters (its API refuses shorter)."""
PROLIFIC_REJECTION_CATEGORIES = (
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
)
"""The ``rejection_category`` values Prolific's submission transition accepts."""
CLAIM_TIMEOUT = dt.timedelta(minutes=5)
"""A payment claimed longer ago than this is taken to have died mid-call and may be claimed again
(the platform call is idempotent on the payment's key or its stored platform reference)."""


class PaymentStatus:
    """Where a bonus stands: written (pending), being paid (paying), created on the platform but not
    yet paid (created, Prolific's first step), paid, failed (may be retried), or recorded locally
    only (no platform client: nothing moved)."""

    PENDING = "pending"
    PAYING = "paying"
    CREATED = "created"
    PAID = "paid"
    FAILED = "failed"
    RECORDED = "recorded"


RETRYABLE = (PaymentStatus.PENDING, PaymentStatus.CREATED, PaymentStatus.FAILED)
SETTLED = (PaymentStatus.PAID, PaymentStatus.RECORDED)


class ActionError(ValueError):
    """An action refused before anything changed; ``field`` names the input that is wrong."""

    def __init__(self, message: str, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.field = field
        self.status = status


class PlatformError(RuntimeError):
    """The platform refused or failed a call; ``reply`` holds what it answered."""

    def __init__(self, message: str, reply: dict[str, Any] | None = None):
        super().__init__(message)
        self.reply = reply or {}


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
            return _finish(actor, participant, ActionResult(
                participant.public_id, transition.name, False, str(exc), participant.status,
                reply=exc.reply, detail=detail))
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
    if not _claim(payment):
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", False, "this bonus is being paid by another request",
            participant.status, detail={**detail, "duplicate": True}))
    recruiter = recruiter_for(participant.experiment)
    if recruiter is None:
        payment.status, payment.paid_at = PaymentStatus.RECORDED, utcnow()
        participant.bonus = (Decimal(str(participant.bonus or 0)) + value)  # type: ignore[assignment]
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", True,
            _local_note(participant) + "; recorded, no money moved", participant.status,
            local_only=True, detail=detail))
    try:
        reply = recruiter.pay_bonus(participant, payment, db.session.commit)
    except PlatformError as exc:
        payment.status = (PaymentStatus.CREATED if payment.platform_ref else PaymentStatus.FAILED)
        payment.reply = exc.reply
        return _finish(actor, participant, ActionResult(
            participant.public_id, "bonus", False, f"not paid: {exc}", participant.status,
            reply=exc.reply, detail=detail))
    payment.status, payment.paid_at, payment.reply = PaymentStatus.PAID, utcnow(), reply
    participant.bonus = (Decimal(str(participant.bonus or 0)) + value)  # type: ignore[assignment]
    return _finish(actor, participant, ActionResult(
        participant.public_id, "bonus", True, "paid", participant.status, reply=reply,
        detail=detail))


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
