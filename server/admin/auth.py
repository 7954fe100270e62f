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
from wtforms.validators import DataRequired, EqualTo, Length

from humanlike.server import audit
from humanlike.server.admin.blueprint import bp
from humanlike.server.extensions import db, login_manager
from humanlike.server.security import (
    dummy_password_hash,
    give_device_cookie,
    login_wait,
    record_login_failure,
)
from humanlike.server.tables.core import AdminUser

PUBLIC_ENDPOINTS = frozenset({"admin.login", "admin.oidc_login", "admin.oidc_callback"})
"""The only admin endpoints reachable without a login."""
FIRST_STEP = frozenset({"admin.change_password", "admin.logout"})
"""What a login with a one-time password may use before choosing its own."""


class LoginForm(FlaskForm):
    """Username and password; Flask-WTF adds and checks the CSRF token."""

    username = StringField("Username", validators=[DataRequired(), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=200)])


class LogoutForm(FlaskForm):
    """An empty form: logging out is a CSRF-protected POST."""


class PasswordForm(FlaskForm):
    """Choose a new password (after an invitation or a reset, or at any time)."""

    current = PasswordField("Current password", validators=[DataRequired(), Length(max=200)])
    new = PasswordField("New password", validators=[DataRequired(), Length(min=8, max=200)])
    again = PasswordField("New password again", validators=[
        DataRequired(), EqualTo("new", message="the two new passwords differ")])


@login_manager.user_loader
def _load_user(user_id: str) -> AdminUser | None:
    """The session's login; a deactivated one is nobody (its open sessions end at once)."""
    user = db.session.get(AdminUser, int(user_id)) if user_id.isdigit() else None
    return user if user is not None and user.active else None


@bp.before_request
def _require_login():
    """Every admin route but the login page needs a logged-in admin (checked once, here, so a new
    route cannot forget it)."""
    if request.endpoint not in PUBLIC_ENDPOINTS and not current_user.is_authenticated:
        return login_manager.unauthorized()
    if (current_user.is_authenticated and current_user.must_change_password
            and request.endpoint not in FIRST_STEP | PUBLIC_ENDPOINTS):
        return redirect(url_for("admin.change_password"))
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
        elif not user.check_password(form.password.data):
            pass  # one hash check, as for an unknown name
        elif not user.active:
            flash("This login is deactivated: ask an owner.")
            return render_template("admin/login.html", form=form), 403
        else:
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


@bp.route("/password", methods=["GET", "POST"])
def change_password():
    """Choose a new password (the first page after logging in with a one-time password)."""
    form = PasswordForm()
    if form.validate_on_submit():
        if not current_user.check_password(form.current.data):
            form.current.errors = ["that is not your current password"]
        elif form.new.data == form.current.data:
            form.new.errors = ["choose a password other than the current one"]
        else:
            current_user.set_password(form.new.data)
            current_user.must_change_password = False
            audit.record(actor(), "password_change", target=f"user:{current_user.username}")
            db.session.commit()
            flash("Password changed.")
            return redirect(url_for("admin.index"))
    status = 400 if form.is_submitted() else 200
    return render_template("admin/password.html", form=form), status


@bp.context_processor
def _logout_form() -> dict[str, object]:
    return {"logout_form": LogoutForm()}
