"""Who calls the researcher API: the Bearer token, its login, and what the call needs in the study
it names (one decorator, ``needs``, on every route but the document)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from flask import current_app, g, request

from humanlike.server.errors import api_abort
from humanlike.server.extensions import db
from humanlike.server.lab.access import (
    AccessDenied,
    Permission,
    require,
    token_owner,
    token_scopes,
)
from humanlike.server.tables.api_tokens import ApiToken
from humanlike.server.tables.core import AdminUser, Experiment, utcnow

PUBLIC = frozenset({"research_api.openapi"})


def bearer() -> str | None:
    """The token of the ``Authorization: Bearer`` header, if any."""
    header = request.headers.get("Authorization", "")
    scheme, _, secret = header.partition(" ")
    return secret.strip() if scheme.lower() == "bearer" and secret.strip() else None


def rate_key() -> str:
    """The rate limit's key: the token (its digest's head), or the address without one."""
    secret = bearer()
    if secret is None:
        return f"addr:{request.remote_addr}"
    return "token:" + hashlib.sha256(secret.encode()).hexdigest()[:24]


def rate_limit() -> str:
    """Requests per token (config ``RESEARCH_API_RATE_LIMIT``)."""
    return str(current_app.config.get("RESEARCH_API_RATE_LIMIT", "300/minute"))


def authenticate() -> tuple[ApiToken, AdminUser]:
    """The caller's live token and login, or a 401 (missing, unknown, revoked or expired token:
    one answer, so a guess learns nothing)."""
    if "token" in g:
        return g.token, g.user
    secret = bearer()
    found = token_owner(secret) if secret else None
    if found is None:
        api_abort(401, "unauthorized", "send 'Authorization: Bearer <token>' with a live personal "
                                       "token (unknown, revoked and expired tokens are refused)")
    token, user = found
    token.last_used_at = utcnow()
    db.session.commit()
    g.token, g.user = token, user
    return token, user


def allowed(permission: Permission, exp: Experiment) -> bool:
    """The caller's token has the scope and its login the permission in ``exp``."""
    token, user = authenticate()
    if permission not in token_scopes(token):
        return False
    try:
        require(user, permission, exp)
    except AccessDenied:
        return False
    return True


def needs(permission: Permission | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The route needs a live token; with a ``slug`` in its URL, also ``permission`` in that
    study: 404 when the study does not exist or is not the login's (the same answer), 403 when
    the token's scope or the login's membership lacks the permission."""

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            token, user = authenticate()
            if "slug" in kwargs and permission is not None:
                exp = db.session.execute(sa.select(Experiment).where(
                    Experiment.slug == kwargs["slug"])).scalar_one_or_none()
                if exp is None:
                    api_abort(404, "not_found", f"no experiment {kwargs['slug']!r}")
                try:
                    require(user, Permission.VIEW, exp)
                except AccessDenied:
                    api_abort(404, "not_found", f"no experiment {kwargs['slug']!r}")
                if permission not in token_scopes(token):
                    api_abort(403, "forbidden", f"this token lacks the '{permission.value}' scope "
                                                "(nothing was changed)")
                try:
                    require(user, permission, exp)
                except AccessDenied as exc:
                    api_abort(403, "forbidden", f"{exc} (nothing was changed)")
                g.experiment = exp
            return view(*args, **kwargs)

        wrapper.access = permission  # type: ignore[attr-defined]
        return wrapper

    return decorate


def actor() -> str:
    """The audit log's name for the caller: ``token:<login>/<token id>``."""
    token, user = authenticate()
    return f"token:{user.username}/{token.id}"
