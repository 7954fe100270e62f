"""The withdrawal ledger: one row per participant deleted at their request (or by an admin), kept
as keyed hashes only, so a later arrival with the same platform id is refused, a restored backup
has them deleted again, and a finished participant's pay is settled after their data are gone."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import utcnow


class Withdrawal(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One deleted participant: HMACs of its public, platform and session ids under the server's
    key (``pseudonyms.keyed_hash``), what it was, and whether its pay is still owed."""

    __tablename__ = "withdrawal"
    __table_args__ = (sa.UniqueConstraint("experiment", "public_id_hmac",
                                          name="uq_withdrawal_public_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment: Mapped[str] = mapped_column(sa.String(64), index=True)
    action: Mapped[str] = mapped_column(sa.String(32))
    """``withdraw`` (the participant's own) or ``delete_participant`` (an admin's)."""
    platform: Mapped[str] = mapped_column(sa.String(16))
    public_id_hmac: Mapped[str] = mapped_column(sa.String(64))
    platform_id_hmac: Mapped[str | None] = mapped_column(sa.String(64), nullable=True, index=True)
    session_id_hmac: Mapped[str | None] = mapped_column(sa.String(64), nullable=True, index=True)
    phase: Mapped[str | None] = mapped_column(sa.String(32), nullable=True)
    status: Mapped[str] = mapped_column(sa.String(16))
    """The participant's status when deleted."""
    owed: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    """Finished and not yet approved or rejected: the submission is still to be paid."""
    settled_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                           nullable=True)
    settlement: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    """How the owed submission ended (``approved``, or the platform's status when found settled)."""
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
