"""The researcher's admin area behind Flask-Login: login (CSRF-protected form), experiment overview."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_required, login_user, logout_user
from flask_wtf import FlaskForm
from werkzeug.security import check_password_hash
from wtforms import PasswordField, StringField
from wtforms.validators import DataRequired, Length

from humanlike.server.extensions import db, login_manager
from humanlike.server.lifecycle import ParticipantStatus
from humanlike.server.models import AdminUser, Experiment, Participant
from humanlike.server.security import dummy_password_hash, limiter, login_limit

bp = Blueprint("admin", __name__, url_prefix="/admin")


class LoginForm(FlaskForm):
    """Username and password; Flask-WTF adds and checks the CSRF token."""

    username = StringField("Username", validators=[DataRequired(), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=200)])


class LogoutForm(FlaskForm):
    """An empty form: logging out is a CSRF-protected POST."""


@login_manager.user_loader
def _load_user(user_id: str) -> AdminUser | None:
    return db.session.get(AdminUser, int(user_id))


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
@limiter.limit(login_limit, methods=["POST"])
def login():
    """Show the login form; on a valid POST log the admin in."""
    form = LoginForm()
    if form.validate_on_submit():
        user = db.session.execute(
            sa.select(AdminUser).where(AdminUser.username == form.username.data)
        ).scalar_one_or_none()
        if user is None:  # costs one hash check too, so timing does not tell which usernames exist
            check_password_hash(dummy_password_hash(), form.password.data)
        elif user.check_password(form.password.data):
            login_user(user)
            return redirect(_safe_next(request.args.get("next")))
        flash("Wrong username or password.")
    return render_template("admin/login.html", form=form), (401 if form.is_submitted() else 200)


@bp.post("/logout")
@login_required
def logout():
    """Log out (POST with CSRF token)."""
    if LogoutForm().validate_on_submit():
        logout_user()
    return redirect(url_for("admin.login"))


@bp.get("/")
@login_required
def index():
    """Experiments with participant counts by status."""
    rows = db.session.execute(
        sa.select(Participant.experiment_id, Participant.status, sa.func.count())
        .group_by(Participant.experiment_id, Participant.status)
    ).all()
    counts: dict[int, dict[str, int]] = {}
    for exp_id, status, n in rows:
        counts.setdefault(exp_id, {})[status] = n
    experiments = db.session.execute(sa.select(Experiment).order_by(Experiment.slug)).scalars().all()
    return render_template(
        "admin/index.html",
        experiments=experiments,
        counts=counts,
        statuses=[status.value for status in ParticipantStatus],
        user=current_user,
        logout_form=LogoutForm(),
    )
