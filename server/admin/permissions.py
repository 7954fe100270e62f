"""Who may use which dashboard route (issue 40): each view declares what it needs with one of the
decorators here, and a gate refuses every admin route that declares nothing, so a new route
cannot skip the check. The rules themselves live in ``humanlike.server.lab.access``.

A refusal changes nothing: 404 when the study does not exist *or* the login is not a member of
it (the same answer, so guessing names or ids tells nothing about other studies), 403 (a page, or
JSON for a JSON route) when the login is a member but lacks the permission."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from flask import abort, current_app, g, jsonify, render_template, request
from flask_login import current_user

from humanlike.server.admin.blueprint import bp
from humanlike.server.extensions import db
from humanlike.server.lab.access import AccessDenied, Permission, Role, granted, require
from humanlike.server.tables.core import AdminUser, Experiment, Participant
from humanlike.server.tables.jobs import ActionJob

Need = Permission | Callable[[], Permission]
"""A permission, or a function of the request that says which one (a bonus needs ``spend``, an
approval ``act``)."""

OPEN = frozenset({"admin.login", "admin.logout", "admin.change_password", "admin.oidc_login",
                  "admin.oidc_callback"})
"""Routes any login may use (the login page needs none)."""
ACCESS = "access"
"""The attribute a decorated view carries: ``("study", need)``, ``("owner", None)`` or
``("signed_in", None)``."""


def person() -> AdminUser | None:
    """The logged-in login (None when nobody is)."""
    return current_user._get_current_object() if current_user.is_authenticated else None  # type: ignore[attr-defined]


def experiment_of(kwargs: dict[str, Any]) -> Experiment | None:
    """The experiment a route's arguments name (``slug``, a participant's ``public_id`` or a
    ``job_id``); None when it names none that exists."""
    if "slug" in kwargs:
        return db.session.execute(sa.select(Experiment).where(
            Experiment.slug == kwargs["slug"])).scalar_one_or_none()
    if "public_id" in kwargs:
        p = db.session.execute(sa.select(Participant).where(
            Participant.public_id == kwargs["public_id"])).scalar_one_or_none()
        return p.experiment if p is not None else None
    if "job_id" in kwargs:
        job_id = str(kwargs["job_id"])
        job = db.session.get(ActionJob, int(job_id)) if job_id.isdigit() and len(job_id) < 10 \
            else None
        return db.session.get(Experiment, job.experiment_id) if job is not None else None
    return None


def refuse(message: str, status: int = 403):
    """The refusal: JSON for a JSON route, else a page saying why (nothing was changed)."""
    if request.path.endswith(".json") or request.accept_mimetypes.best == "application/json":
        return jsonify(error="forbidden" if status == 403 else "not_found", detail=message), status
    return render_template("message.html", title="Not allowed" if status == 403 else "Not found",
                           message=message + " (nothing was changed)"), status


def requires(need: Need) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The view acts on one study (named by its URL) and needs ``need`` there."""

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            exp = experiment_of(kwargs)
            if exp is None:
                abort(404)
            permission = need if isinstance(need, Permission) else need()
            try:
                require(person(), permission, exp)
            except AccessDenied as exc:
                if exc.status == 404:
                    abort(404)
                return refuse(str(exc), exc.status)
            g.experiment = exp
            return view(*args, **kwargs)

        setattr(wrapper, ACCESS, ("study", need))
        return wrapper

    return decorate


def owner_only(view: Callable[..., Any]) -> Callable[..., Any]:
    """The view manages logins or memberships: owners only."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        user = person()
        if user is None or user.role != Role.OWNER:
            return refuse("only an owner manages logins and study members")
        return view(*args, **kwargs)

    setattr(wrapper, ACCESS, ("owner", None))
    return wrapper


def signed_in(view: Callable[..., Any]) -> Callable[..., Any]:
    """Any login may use the view; it shows only the studies the login may see
    (``access.visible_experiment_ids``)."""
    setattr(view, ACCESS, ("signed_in", None))
    return view


def declared(endpoint: str | None) -> bool:
    """True when the endpoint's view carries one of the decorators above (or is open)."""
    if endpoint in OPEN:
        return True
    view = current_app.view_functions.get(endpoint or "")
    return view is not None and hasattr(view, ACCESS)


@bp.before_request
def _only_declared_routes():
    """Fail closed: an admin route that declares no permission is refused for everyone."""
    if request.endpoint and not declared(request.endpoint):
        return refuse("this page declares no permission, so nobody may use it")
    return None


def from_action(field: str, spend: frozenset[str]) -> Callable[[], Permission]:
    """``spend`` when the form's ``field`` is one of ``spend`` (money moves), else ``act``."""
    return lambda: Permission.SPEND if request.form.get(field, "") in spend else Permission.ACT


@bp.app_template_global("can")
def can(permission: str, exp: Any) -> bool:
    """Templates hide what the login may not do: ``{% if can('act', exp) %}``."""
    experiment_id = getattr(exp, "id", None)
    if experiment_id is None:
        return False
    cache: dict[int, frozenset[Permission]] = g.setdefault("granted", {})
    if experiment_id not in cache:  # one query per study and request, however many rows ask
        cache[experiment_id] = granted(person(), experiment_id)
    return Permission(permission) in cache[experiment_id]


@bp.app_template_global("is_owner")
def is_owner() -> bool:
    """True for an owner (the users link)."""
    user = person()
    return user is not None and user.active and user.role == Role.OWNER
