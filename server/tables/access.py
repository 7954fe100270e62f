"""Who may do what in which study: a login's membership of a study with its permissions
(``humanlike.server.lab.access`` reads them)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import utcnow


class StudyMember(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A login's membership of one experiment; the four permissions are separate because they
    matter separately (a research assistant may approve but not pay). A viewer's flags are
    ignored: viewers only read."""

    __tablename__ = "study_member"
    __table_args__ = (sa.UniqueConstraint("user_id", "experiment_id", name="uq_study_member"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("admin_user.id"), index=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    can_act: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    """Approve, reject, exclude / include, message; switch the study's status."""
    can_spend: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    """Bonuses, publishing / resuming recruitment, more places."""
    can_reveal: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    """See platform ids (and export them unpseudonymised)."""
    can_delete: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    """Delete a participant's data."""
    added_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)

