"""Adaptive allocation's table: one row per set of weights the panel worker computed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import utcnow

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


class AdaptiveDesign(db.Model):  # type: ignore[name-defined]  # dynamic base
    """Design ``version`` of an experiment: each stimulus' weight, their hash, the pairs still
    undecided and the analysed participants it was computed from."""

    __tablename__ = "adaptive_design"
    __table_args__ = (sa.UniqueConstraint("experiment_id", "version"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(sa.ForeignKey("experiment.id"), index=True)
    version: Mapped[int] = mapped_column(sa.Integer)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    weights: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """{stimulus key: weight}, summing to one."""
    weights_hash: Mapped[str] = mapped_column(sa.String(64))
    undecided: Mapped[list[Any]] = mapped_column(JSONType)
    """[[model a, model b], ...]: the comparisons still undecided."""
    n_participants: Mapped[int] = mapped_column(sa.Integer)
