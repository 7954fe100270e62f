"""Database models (DESIGN.md, Storage): experiments, stimuli, participants, trials, events, admins."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from flask_login import UserMixin
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column, relationship
from werkzeug.security import check_password_hash, generate_password_hash

from humanlike.server.extensions import db
from humanlike.server.lifecycle import ExperimentStatus, ParticipantStatus
from humanlike.server.platforms import Platform

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")

def utcnow() -> dt.datetime:
    """Timezone-aware current UTC time (stored as such on PostgreSQL, naive UTC on SQLite)."""
    return dt.datetime.now(dt.UTC)


class Experiment(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One experiment: its validated spec (JSON), the spec's hash and where its files live."""

    __tablename__ = "experiment"
    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(sa.String(64), unique=True, index=True)
    title: Mapped[str] = mapped_column(sa.String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType)
    spec_hash: Mapped[str] = mapped_column(sa.String(64))
    root: Mapped[str] = mapped_column(sa.Text)
    status: Mapped[str] = mapped_column(sa.String(16), default=ExperimentStatus.LIVE.value)
    platform: Mapped[str] = mapped_column(sa.String(16), default=Platform.LOCAL.value)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    recruitment_ref: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    """The platform's id of the listing: Prolific study id or MTurk HIT id (``humanlike recruit``)."""
    recruitment_meta: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """What the platform last said about the listing: sandbox or live, status, last sync."""

    stimuli: Mapped[list[Stimulus]] = relationship(back_populates="experiment")
    participants: Mapped[list[Participant]] = relationship(back_populates="experiment")


class SpecVersion(db.Model):  # type: ignore[name-defined]  # dynamic base
    """An immutable snapshot of a validated spec: spec JSON, rendered consent/instructions texts and
    manifest rows; (experiment, hash) is unique, so the same hash is the same version.

    ``texts`` and ``stimuli`` are NULL only for versions backfilled by migration 0004."""

    __tablename__ = "spec_version"
    __table_args__ = (sa.UniqueConstraint("experiment_id", "hash", name="uq_spec_version_hash"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    hash: Mapped[str] = mapped_column(sa.String(64))
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType)
    texts: Mapped[dict[str, str] | None] = mapped_column(JSONType, nullable=True)
    stimuli: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONType, nullable=True)
    source: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class Stimulus(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One stimulus file of an experiment, identified by its path relative to the manifest."""

    __tablename__ = "stimulus"
    __table_args__ = (sa.UniqueConstraint("experiment_id", "key", name="uq_stimulus_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    key: Mapped[str] = mapped_column(sa.String(500))
    sha256: Mapped[str] = mapped_column(sa.String(64))
    kind: Mapped[str] = mapped_column(sa.String(16))
    true_class: Mapped[str | None] = mapped_column(sa.String(100), nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)

    experiment: Mapped[Experiment] = relationship(back_populates="stimuli")


class Participant(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One participant session in one experiment; (experiment, platform, platform_id) is unique."""

    __tablename__ = "participant"
    __table_args__ = (
        sa.UniqueConstraint(
            "experiment_id", "platform", "platform_id", name="uq_participant_platform_id"
        ),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    public_id: Mapped[str] = mapped_column(sa.String(32), unique=True, index=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    platform: Mapped[str] = mapped_column(sa.String(16))
    platform_id: Mapped[str] = mapped_column(sa.String(128))
    study_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    session_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    assignment_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    hit_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    turk_submit_to: Mapped[str | None] = mapped_column(sa.String(300), nullable=True)
    condition: Mapped[str] = mapped_column(sa.String(64))
    spec_version_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("spec_version.id"), nullable=True, index=True
    )
    token_hash: Mapped[str] = mapped_column(sa.String(64))
    seed: Mapped[int] = mapped_column(sa.BigInteger)
    allocation: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    timeline: Mapped[dict[str, Any]] = mapped_column(JSONType)
    n_trials: Mapped[int] = mapped_column(sa.Integer)
    status: Mapped[str] = mapped_column(
        sa.String(16), default=ParticipantStatus.ALLOCATED.value, index=True
    )
    user_agent: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    screen: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    refresh_hz: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    consented_at: Mapped[dt.datetime | None] = mapped_column(
        sa.DateTime(timezone=True), nullable=True
    )
    started_at: Mapped[dt.datetime | None] = mapped_column(
        sa.DateTime(timezone=True), nullable=True
    )
    completed_at: Mapped[dt.datetime | None] = mapped_column(
        sa.DateTime(timezone=True), nullable=True
    )
    completion_code: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    outcome: Mapped[str | None] = mapped_column(sa.String(24), nullable=True)
    """How the participant left the study (``humanlike.server.platforms.Exit``: completed,
    no_consent, display_unsuitable, failed_attention, refused_on_return); NULL while under way."""
    bonus: Mapped[float | None] = mapped_column(sa.Numeric(10, 2), nullable=True)
    analysis_override: Mapped[str | None] = mapped_column(sa.String(16), nullable=True)
    """``exclude`` or ``include``: a researcher's decision that overrides the QC rules, or NULL."""
    analysis_override_reason: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    attempt: Mapped[int] = mapped_column(sa.Integer, default=0, server_default="0")
    """How many times a block was restarted (resume policy ``restart_block``): each trial the
    browser sends carries the attempt it was answered in, and an older one is kept aside."""
    simulated: Mapped[bool] = mapped_column(sa.Boolean, default=False, server_default=sa.false())
    """A rehearsal participant: arrived with the researcher's rehearsal key (``server.rehearsal``,
    ``humanlike simulate``); out of the analysed set unless asked for."""

    experiment: Mapped[Experiment] = relationship(back_populates="participants")
    trials: Mapped[list[Trial]] = relationship(back_populates="participant")


def _practice_of_design(context: Any) -> bool:
    """An insert that names no ``practice`` gets its design's flag (``bool(design.get('practice'))``,
    the truthiness the readers used when they parsed it)."""
    design = context.get_current_parameters().get("design")
    return bool(design.get("practice")) if isinstance(design, dict) else False


class Trial(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One finished trial; (participant, trial_index) is the idempotency key.

    ``design`` is the timeline entry the trial answered (type, block, practice, stimuli, triad
    levels, repeat info ...), stored once; ``block``, ``stimuli``, ``is_repeat``, ``repeat_of`` and
    ``practice`` are copied from it as columns for queries. Written and read through
    ``humanlike.server.participants.trial_store``."""

    __tablename__ = "trial"
    __table_args__ = (
        sa.UniqueConstraint("participant_id", "trial_index", name="uq_trial_participant_index"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), index=True)
    trial_index: Mapped[int] = mapped_column(sa.Integer)
    trial_type: Mapped[str] = mapped_column(sa.String(32))
    design: Mapped[dict[str, Any]] = mapped_column(JSONType)
    block: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    stimulus_id: Mapped[int | None] = mapped_column(sa.ForeignKey("stimulus.id"), nullable=True)
    stimuli: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    response: Mapped[dict[str, Any]] = mapped_column(JSONType)
    rt_ms: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    first_rt_ms: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    presented_ms: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    frames: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    is_repeat: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    repeat_of: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    practice: Mapped[bool] = mapped_column(sa.Boolean, default=_practice_of_design,
                                           server_default=sa.false())
    """A practice trial (out of every analysis): the design's ``practice`` flag, stored as a column
    so readers need not parse ``design`` (migration 0011 backfilled it)."""
    client_time: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    server_time: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)

    participant: Mapped[Participant] = relationship(back_populates="trials")


class Event(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A browser event during the task: blur, focus, fullscreen_exit, resize, error, environment."""

    __tablename__ = "event"
    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), index=True)
    type: Mapped[str] = mapped_column(sa.String(32))
    value: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    client_time: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    server_time: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class AuditEntry(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One administrative action (who, what, on which record, why), kept for accountability."""

    __tablename__ = "audit_entry"
    id: Mapped[int] = mapped_column(primary_key=True)
    time: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(sa.String(120))
    action: Mapped[str] = mapped_column(sa.String(64), index=True)
    experiment: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    target: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)


class Payment(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A bonus owed to a participant, written before any money moves: (participant, reason) is
    unique, and ``idempotency_key`` is sent to the platform (MTurk's UniqueRequestToken), so a
    double click, a retry or a crash between Prolific's create and pay steps never pays twice."""

    __tablename__ = "payment"
    __table_args__ = (
        sa.UniqueConstraint("participant_id", "reason", name="uq_payment_participant_reason"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), index=True)
    reason: Mapped[str] = mapped_column(sa.String(200))
    amount: Mapped[float] = mapped_column(sa.Numeric(10, 2))
    idempotency_key: Mapped[str] = mapped_column(sa.String(64), unique=True)
    status: Mapped[str] = mapped_column(sa.String(16))
    platform_ref: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    """The platform's id of the bonus once created (Prolific's bonus payment id)."""
    reply: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    actor: Mapped[str] = mapped_column(sa.String(120))
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    claimed_at: Mapped[dt.datetime | None] = mapped_column(
        sa.DateTime(timezone=True), nullable=True
    )
    paid_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)


class AdminUser(UserMixin, db.Model):  # type: ignore[name-defined]  # dynamic base
    """A dashboard login; only a salted hash of the password is stored (werkzeug scrypt)."""

    __tablename__ = "admin_user"
    __table_args__ = (sa.UniqueConstraint("oidc_issuer", "oidc_subject", name="uq_admin_user_oidc"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(sa.String(80), unique=True)
    password_hash: Mapped[str] = mapped_column(sa.String(256))
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    role: Mapped[str] = mapped_column(sa.String(16), default="owner", server_default="owner")
    """owner (every study, the users page), researcher or viewer (``humanlike.server.lab.access``);
    a login made without a role is an owner, as every admin was before roles (migration 0026)."""
    active: Mapped[bool] = mapped_column(sa.Boolean, default=True, server_default=sa.true())
    """False once deactivated: the login is refused and an open session ends."""
    must_change_password: Mapped[bool] = mapped_column(sa.Boolean, default=False,
                                                       server_default=sa.false())
    """True after an invitation or reset: the one-time password only opens the change-password form."""
    email: Mapped[str | None] = mapped_column(sa.String(254), nullable=True)
    """The email an owner invited the login by; the first OpenID Connect sign-in with this email,
    verified by the provider, binds ``oidc_issuer`` + ``oidc_subject`` (``server.admin.oidc``)."""
    oidc_issuer: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    oidc_subject: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    """The provider's ``iss`` and ``sub`` of the person (OpenID Connect Core 1.0 §2: unique and
    never reassigned together); a sign-in is matched by this pair only (migration 0029)."""

    @property
    def is_active(self) -> bool:  # Flask-Login refuses to log in an inactive user
        return bool(self.active)

    def set_password(self, password: str) -> None:
        """Store a salted scrypt hash of ``password``."""
        self.password_hash = generate_password_hash(password)

    def check_password(self, password: str) -> bool:
        """True when ``password`` matches the stored hash."""
        return check_password_hash(self.password_hash, password)


class ParticipantQC(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A participant's QC summary for the dashboard (sorting and filtering at scale), recomputed by
    ``humanlike.server.live.qc.refresh_qc`` when the participant's stored trial count changes."""

    __tablename__ = "participant_qc"
    participant_id: Mapped[int] = mapped_column(sa.ForeignKey("participant.id"), primary_key=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    n_stored: Mapped[int] = mapped_column(sa.Integer)
    last_trial_at: Mapped[dt.datetime | None] = mapped_column(
        sa.DateTime(timezone=True), nullable=True)
    catch_accuracy: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    repeat_reliability: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    median_rt_ms: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    too_fast_share: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    n_blur: Mapped[int] = mapped_column(sa.Integer, default=0)
    n_fullscreen_exit: Mapped[int] = mapped_column(sa.Integer, default=0)
    qc_failed: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    qc_reasons: Mapped[str] = mapped_column(sa.Text, default="")
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """Every metric of the QC row (natural accuracy, all-zero share, ...) for the participant page."""
    computed_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)


class PanelResult(db.Model):  # type: ignore[name-defined]  # dynamic base
    """The live analysis panel of one experiment: the last result with the data version it was
    computed from, and a lease (owner, until) that one worker claims with an atomic UPDATE."""

    __tablename__ = "panel_result"
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), primary_key=True)
    data_version: Mapped[str | None] = mapped_column(sa.String(200), nullable=True)
    computed_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
    seconds: Mapped[float | None] = mapped_column(sa.Float, nullable=True)
    n_participants: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True), nullable=True)
