"""Admin login (CSRF-protected form; failed logins limited per account and address in the database,
a browser the admin has logged in from counted apart), logout, and the gate that sends every other
admin route to the login page when nobody is logged in."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import flash, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_user, logout_user
from flask_wtf import FlaskForm
from werkzeug.security import check_password_hash
from wtforms import PasswordField, StringField
from wtforms.validators import DataRequired, Length

from humanlike.server.admin.blueprint import bp
from humanlike.server.extensions import db, login_manager
from humanlike.server.security import (
    dummy_password_hash,
    give_device_cookie,
    login_wait,
    record_login_failure,
)
from humanlike.server.tables.core import AdminUser

PUBLIC_ENDPOINTS = frozenset({"admin.login"})
"""The only admin endpoints reachable without a login."""


class LoginForm(FlaskForm):
    """Username and password; Flask-WTF adds and checks the CSRF token."""

    username = StringField("Username", validators=[DataRequired(), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=200)])


class LogoutForm(FlaskForm):
    """An empty form: logging out is a CSRF-protected POST."""


@login_manager.user_loader
def _load_user(user_id: str) -> AdminUser | None:
    return db.session.get(AdminUser, int(user_id))


@bp.before_request
def _require_login():
    """Every admin route but the login page needs a logged-in admin (checked once, here, so a new
    route cannot forget it)."""
    if request.endpoint not in PUBLIC_ENDPOINTS and not current_user.is_authenticated:
        return login_manager.unauthorized()
    return None


def actor() -> str:
    """The audit log's name for the logged-in admin."""
    return f"admin:{current_user.username}"


_UNSAFE = re.compile(r"[\x00-\x20\\\x7f]")


def _safe_next(target: str | None) -> str:
    """Only same-host relative paths are followed after login (no scheme, host, backslash or
    whitespace/control characters, which browsers strip: ``/\t/evil.example`` is ``//evil.example``)."""
    if target and target.startswith("/") and not _UNSAFE.search(target):
        parts = urlsplit(target)
        if not target.startswith("//") and not parts.scheme and not parts.netloc:
            return target
    return url_for("admin.index")


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Show the login form; on a valid POST log the admin in. An attempt over the failed-login
    limits is refused before the password is checked (429, Retry-After)."""
    form = LoginForm()
    if form.validate_on_submit():
        name, address = str(form.username.data), request.remote_addr or "unknown"
        wait = login_wait(name, address)
        if wait:
            minutes = max(1, wait // 60)
            flash(f"Too many failed logins: try again in {minutes} minute(s).")
            page = make_response(render_template("admin/login.html", form=form), 429)
            page.headers["Retry-After"] = str(wait)
            return page
        user = db.session.execute(
            sa.select(AdminUser).where(AdminUser.username == name)).scalar_one_or_none()
        if user is None:  # costs one hash check too, so timing does not tell which usernames exist
            check_password_hash(dummy_password_hash(), form.password.data)
        elif user.check_password(form.password.data):
            login_user(user)
            response = redirect(_safe_next(request.args.get("next")))
            give_device_cookie(response, user.username)
            return response
        record_login_failure(name, address)
        db.session.commit()
        flash("Wrong username or password.")
    return render_template("admin/login.html", form=form), (401 if form.is_submitted() else 200)


@bp.post("/logout")
def logout():
    """Log out (POST with CSRF token)."""
    if LogoutForm().validate_on_submit():
        logout_user()
    return redirect(url_for("admin.login"))


@bp.context_processor
def _logout_form() -> dict[str, object]:
    return {"logout_form": LogoutForm()}
