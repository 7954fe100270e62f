"""Roles and per-study permissions (issue 40): who may see and do what in which experiment. One
answer for the dashboard (``server/admin/permissions.py``), the researcher API and the CLI.

- owner: every permission on every study, and the users page;
- researcher: on the studies they are a member of, ``view`` plus the permissions of their
  membership (act, spend, reveal, delete);
- viewer: ``view`` only, on the studies they are a member of.
A deactivated login has no permission at all."""

from __future__ import annotations

from enum import StrEnum

import sqlalchemy as sa

from humanlike.server import audit
from humanlike.server.extensions import db
from humanlike.server.tables.access import StudyMember
from humanlike.server.tables.core import AdminUser, Experiment


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

