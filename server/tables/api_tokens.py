"""The researcher API's personal tokens and the idempotency keys of its actions
(``server/research_api``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from humanlike.server.extensions import db
from humanlike.server.tables.core import JSONType, utcnow


class ApiToken(db.Model):  # type: ignore[name-defined]  # dynamic base
    """A personal token for the researcher API (``server/research_api``): only the sha256 of the
    token is stored (it carries 256 random bits, so a fast hash suffices and can be looked up by
    index); its scopes cap what the login's permissions allow."""

    __tablename__ = "api_token"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("admin_user.id"), index=True)
    name: Mapped[str] = mapped_column(sa.String(80))
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    prefix: Mapped[str] = mapped_column(sa.String(12))
    """The token's first characters, to recognise it in lists (never enough to use it)."""
    scopes: Mapped[str] = mapped_column(sa.String(64))
    """Space-separated permissions (view act spend reveal delete)."""
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                           nullable=True)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(sa.DateTime(timezone=True),
                                                             nullable=True)


class ApiIdempotency(db.Model):  # type: ignore[name-defined]  # dynamic base
    """One ``Idempotency-Key`` of a token: the request it was first used for and, once done, the
    answer, replayed for a repeat; the unique (token, key) lets one of many concurrent repeats act."""

    __tablename__ = "api_idempotency"
    __table_args__ = (sa.UniqueConstraint("token_id", "key", name="uq_api_idempotency"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    token_id: Mapped[int] = mapped_column(sa.ForeignKey("api_token.id"), index=True)
    key: Mapped[str] = mapped_column(sa.String(128))
    request_hash: Mapped[str] = mapped_column(sa.String(64))
    """sha256 of method, path and body: the same key with another request is refused (422)."""
    status: Mapped[int | None] = mapped_column(sa.Integer, nullable=True)
    """The answer's HTTP status; None while the first request is still working."""
    body: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(sa.DateTime(timezone=True), default=utcnow)
