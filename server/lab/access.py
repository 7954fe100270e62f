"""Roles and per-study permissions (issue 40): who may see and do what in which experiment, and
the researcher API's personal tokens (scopes that cap a login's permissions). One answer for the
dashboard (``server/admin/permissions.py``), the researcher API and the CLI.

- owner: every permission on every study, and the users page;
- researcher: on the studies they are a member of, ``view`` plus the permissions of their
  membership (act, spend, reveal, delete);
- viewer: ``view`` only, on the studies they are a member of.
A deactivated login has no permission at all."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from collections.abc import Iterable
from enum import StrEnum

import sqlalchemy as sa

from humanlike.server import audit
from humanlike.server.database import as_utc
from humanlike.server.extensions import db
from humanlike.server.tables.access import StudyMember
from humanlike.server.tables.api_tokens import ApiToken
from humanlike.server.tables.core import AdminUser, Experiment, utcnow


class Role(StrEnum):
    """A login's role."""

    OWNER = "owner"
    RESEARCHER = "researcher"
    VIEWER = "viewer"


class Permission(StrEnum):
    """What a member may do in a study (``view`` comes with membership)."""

    VIEW = "view"
    ACT = "act"
    """Approve, reject, exclude / include, message participants; switch the study's status."""
    SPEND = "spend"
    """Bonuses, publishing or resuming recruitment, more places."""
    REVEAL = "reveal"
    """Platform ids, on the pages and in an unpseudonymised export."""
    DELETE = "delete"
    """Delete a participant's data."""


GRANTABLE = (Permission.ACT, Permission.SPEND, Permission.REVEAL, Permission.DELETE)
"""The permissions a membership grants one by one (its ``can_<name>`` columns)."""
EVERYTHING = frozenset(Permission)


def granted(user: AdminUser | None, experiment_id: int) -> frozenset[Permission]:
    """The permissions ``user`` holds on the experiment (empty: not a member, or inactive)."""
    if user is None or not user.active:
        return frozenset()
    if user.role == Role.OWNER:
        return EVERYTHING
    member = db.session.execute(sa.select(StudyMember).where(
        StudyMember.user_id == user.id, StudyMember.experiment_id == experiment_id)
    ).scalar_one_or_none()
    if member is None:
        return frozenset()
    if user.role != Role.RESEARCHER:  # a viewer, or a role this version does not know
        return frozenset({Permission.VIEW})
    return frozenset({Permission.VIEW} | {p for p in GRANTABLE
                                         if getattr(member, f"can_{p.value}")})


def allows(user: AdminUser | None, permission: Permission, experiment_id: int) -> bool:
    """True when ``user`` holds ``permission`` on the experiment."""
    return permission in granted(user, experiment_id)


def visible_experiment_ids(user: AdminUser | None) -> set[int] | None:
    """The experiments ``user`` may see: None for every one (an owner), else their memberships."""
    if user is not None and user.active and user.role == Role.OWNER:
        return None
    if user is None or not user.active:
        return set()
    return set(db.session.execute(sa.select(StudyMember.experiment_id).where(
        StudyMember.user_id == user.id)).scalars())


class AccessDenied(Exception):
    """A person asked for what their role or membership does not allow (``status``: 403, or 404
    for a study they are not a member of, so that guessing names tells nothing)."""

    def __init__(self, message: str, status: int = 403):
        super().__init__(message)
        self.status = status


def require(user: AdminUser | None, permission: Permission, experiment: Experiment) -> None:
    """Raise ``AccessDenied`` unless ``user`` holds ``permission`` on ``experiment``."""
    held = granted(user, experiment.id)
    if not held:
        raise AccessDenied(f"no experiment {experiment.slug!r}", 404)
    if permission not in held:
        raise AccessDenied(f"your role does not allow '{permission.value}' in "
                           f"{experiment.slug!r} (ask an owner)")


def require_cli(permission: Permission, experiment: Experiment) -> None:
    """Check a CLI command acting on ``experiment`` for the ``--as`` login (``AccessDenied``
    naming what is missing). Without ``--as`` the command runs as the server's operator, who holds
    the database's password and so every permission already (docs/lab.md)."""
    name = audit.cli_user()
    if name is None:
        return
    user = db.session.execute(sa.select(AdminUser).where(AdminUser.username == name)
                              ).scalar_one_or_none()
    if user is None or not user.active:
        raise AccessDenied(f"--as {name}: no active login of that name")
    require(user, permission, experiment)


TOKEN_PREFIX = "hl_"
DEFAULT_TOKEN_DAYS = 90
MAX_TOKEN_DAYS = 366


def token_digest(secret: str) -> str:
    """sha256 of a personal token, hex: what is stored and looked up. A token carries 256 random
    bits, so nobody can search its preimage; scrypt's cost (right for passwords people choose)
    would buy nothing and cost every API request tens of milliseconds, and its salt would make
    the lookup by index impossible."""
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_scopes(scopes: Iterable[str]) -> str:
    """Scopes as stored (space-separated, in ``Permission`` order); ``ValueError`` naming an
    unknown one."""
    wanted = {s.strip() for s in scopes if s.strip()}
    unknown = wanted - {p.value for p in Permission}
    if unknown:
        raise ValueError(f"unknown scope(s) {', '.join(sorted(unknown))}: use "
                         f"{', '.join(p.value for p in Permission)}")
    if not wanted:
        raise ValueError("give at least one scope (view, to read)")
    return " ".join(p.value for p in Permission if p.value in wanted | {"view"})


def issue_token(user: AdminUser, name: str, scopes: Iterable[str],
                days: int = DEFAULT_TOKEN_DAYS) -> tuple[ApiToken, str]:
    """A new personal token of ``user`` (the row, added to the session, and the secret, to show
    once: only its digest is stored)."""
    if not 1 <= days <= MAX_TOKEN_DAYS:
        raise ValueError(f"expiry must be 1 to {MAX_TOKEN_DAYS} days, not {days}")
    if not name.strip() or len(name) > 80:
        raise ValueError("name the token (what it is for, at most 80 characters)")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(user_id=user.id, name=name.strip(), token_hash=token_digest(secret),
                   prefix=secret[:10], scopes=parse_scopes(scopes), created_at=utcnow(),
                   expires_at=utcnow() + dt.timedelta(days=days))
    db.session.add(row)
    return row, secret


def token_owner(secret: str) -> tuple[ApiToken, AdminUser] | None:
    """The live token for ``secret`` and its login: None when unknown, revoked, expired or its
    login is deactivated."""
    row = db.session.execute(sa.select(ApiToken).where(
        ApiToken.token_hash == token_digest(secret))).scalar_one_or_none()
    if row is None or row.revoked_at is not None:
        return None
    expires = as_utc(row.expires_at)
    if expires is None or expires <= utcnow():
        return None
    user = db.session.get(AdminUser, row.user_id)
    if user is None or not user.active:
        return None
    return row, user


def token_scopes(row: ApiToken) -> frozenset[Permission]:
    """The permissions a token may use (its login's permissions cap them further)."""
    return frozenset(Permission(s) for s in row.scopes.split())
