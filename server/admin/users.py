"""Logins and study members (issue 40), for owners: the users page (invite with a one-time
password, change a role, deactivate or reactivate, reset a password) and each study's members page
(add a login with its permissions, change them, remove it). Every change is a CSRF-protected,
audited POST; the last active owner cannot be demoted or deactivated."""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from flask import abort, flash, redirect, render_template, request, url_for
from flask_wtf import FlaskForm
from wtforms import BooleanField, SelectField, StringField
from wtforms.validators import DataRequired, Length, Optional, Regexp

from humanlike.server import audit
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.experiments import experiment_or_404
from humanlike.server.admin.permissions import owner_only, person, refuse, requires
from humanlike.server.extensions import db
from humanlike.server.lab.access import GRANTABLE, Permission, Role
from humanlike.server.tables.access import StudyMember
from humanlike.server.tables.core import AdminUser, Experiment

ROLES = [r.value for r in Role]
USERNAME = Regexp(r"^[A-Za-z0-9_.@-]+$", message="letters, digits and _ . @ - only")


class InviteForm(FlaskForm):
    """A new login: name and role (a one-time password is made for it)."""

    username = StringField("Username", validators=[DataRequired(), Length(max=80), USERNAME])
    role = SelectField("Role", choices=ROLES, default=Role.VIEWER.value)
    email = StringField("Email (optional: for sign-in with the lab's provider)",
                        validators=[Optional(), Length(max=254), Regexp(
                            r"^[^@\s]+@[^@\s]+\.[^@\s]+$", message="not an email address")])


class RoleForm(FlaskForm):
    """A login's new role."""

    role = SelectField("Role", choices=ROLES, validators=[DataRequired()])


class ConfirmForm(FlaskForm):
    """CSRF token only (deactivate, reactivate, reset, remove)."""


class MemberForm(FlaskForm):
    """A login's membership of the study and its permissions."""

    username = StringField("Login", validators=[DataRequired(), Length(max=80)])
    can_act = BooleanField("act on participants")
    can_spend = BooleanField("spend money")
    can_reveal = BooleanField("reveal platform ids")
    can_delete = BooleanField("delete data")


def one_time_password() -> str:
    """A password to hand over once (96 random bits); it only opens the change-password form."""
    return secrets.token_urlsafe(12)


def _user_or_404(user_id: str) -> AdminUser:
    user = db.session.get(AdminUser, int(user_id)) if user_id.isdigit() and len(user_id) < 10 \
        else None
    if user is None:
        abort(404)
    return user


def _active_owners() -> int:
    return db.session.execute(sa.select(sa.func.count()).select_from(AdminUser).where(
        AdminUser.role == Role.OWNER.value, AdminUser.active)).scalar_one()


def _last_owner(user: AdminUser) -> bool:
    return user.role == Role.OWNER and user.active and _active_owners() <= 1


def _users_page(shown_password: tuple[str, str] | None = None, invite: InviteForm | None = None,
                status: int = 200):
    users = db.session.execute(sa.select(AdminUser).order_by(AdminUser.username)).scalars().all()
    studies: dict[int, list[str]] = {}
    for user_id, slug in db.session.execute(
            sa.select(StudyMember.user_id, Experiment.slug)
            .join(Experiment, Experiment.id == StudyMember.experiment_id)
            .order_by(Experiment.slug)):
        studies.setdefault(user_id, []).append(slug)
    return render_template(
        "admin/users.html", users=users, studies=studies, invite=invite or InviteForm(),
        role_forms={u.id: RoleForm(formdata=None, role=u.role) for u in users},
        confirm=ConfirmForm(), shown_password=shown_password), status


@bp.get("/users")
@owner_only
def users():
    """Every login: role, active, the studies it is a member of; invite, role, deactivate."""
    return _users_page()


@bp.post("/users")
@owner_only
def invite_user():
    """Create a login with a one-time password, shown once on the page that answers."""
    form = InviteForm()
    if not form.validate_on_submit():
        return _users_page(invite=form, status=400)
    name = str(form.username.data)
    if db.session.execute(sa.select(AdminUser.id).where(AdminUser.username == name)
                          ).scalar_one_or_none() is not None:
        form.username.errors = [f"a login called {name!r} exists already"]
        return _users_page(invite=form, status=409)
    email = str(form.email.data or "").strip() or None
    if email and db.session.execute(sa.select(AdminUser.id).where(
            sa.func.lower(AdminUser.email) == email.lower())).scalar_one_or_none() is not None:
        form.email.errors = [f"a login with the email {email!r} exists already"]
        return _users_page(invite=form, status=409)
    password = one_time_password()
    user = AdminUser(username=name, role=form.role.data, must_change_password=True, email=email)
    user.set_password(password)
    db.session.add(user)
    audit.record(actor(), "user_invite", target=f"user:{name}", detail={"role": user.role, "email": email})
    db.session.commit()
    return _users_page(shown_password=(name, password))


@bp.post("/users/<user_id>/role")
@owner_only
def set_role(user_id: str):
    """Change a login's role (the last active owner stays an owner)."""
    user = _user_or_404(user_id)
    form = RoleForm()
    if not form.validate_on_submit():
        return refuse(f"role must be one of {', '.join(ROLES)}", 400)
    if form.role.data != Role.OWNER and _last_owner(user):
        return refuse("this is the last active owner: make another owner first", 409)
    old, user.role = user.role, str(form.role.data)
    audit.record(actor(), "user_role", target=f"user:{user.username}",
                 detail={"from": old, "to": user.role})
    db.session.commit()
    flash(f"{user.username}: role {old} -> {user.role}")
    return redirect(url_for("admin.users"))


@bp.post("/users/<user_id>/active")
@owner_only
def set_active(user_id: str):
    """Deactivate (``active=0``: the login is refused and its sessions end) or reactivate."""
    user = _user_or_404(user_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    on = request.form.get("active") == "1"
    if not on and _last_owner(user):
        return refuse("this is the last active owner: make another owner first", 409)
    user.active = on
    audit.record(actor(), "user_active", target=f"user:{user.username}", detail={"active": on})
    db.session.commit()
    flash(f"{user.username}: {'reactivated' if on else 'deactivated'}")
    return redirect(url_for("admin.users"))


@bp.post("/users/<user_id>/reset")
@owner_only
def reset_password(user_id: str):
    """A new one-time password for the login (shown once); its old password stops working."""
    user = _user_or_404(user_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    password = one_time_password()
    user.set_password(password)
    user.must_change_password = True
    audit.record(actor(), "user_password_reset", target=f"user:{user.username}")
    db.session.commit()
    return _users_page(shown_password=(user.username, password))


def _members_page(exp: Experiment, form: MemberForm | None = None, status: int = 200):
    rows = db.session.execute(
        sa.select(StudyMember, AdminUser).join(AdminUser, AdminUser.id == StudyMember.user_id)
        .where(StudyMember.experiment_id == exp.id).order_by(AdminUser.username)).all()
    owners = db.session.execute(sa.select(AdminUser.username).where(
        AdminUser.role == Role.OWNER.value, AdminUser.active).order_by(AdminUser.username)
    ).scalars().all()
    user = person()
    return render_template(
        "admin/members.html", exp=exp, rows=rows, owners=owners, form=form or MemberForm(),
        confirm=ConfirmForm(), grantable=[p.value for p in GRANTABLE],
        manage=user is not None and user.role == Role.OWNER), status


@bp.get("/experiments/<slug>/members")
@requires(Permission.VIEW)
def members(slug: str):
    """The study's members and their permissions (owners change them)."""
    return _members_page(experiment_or_404(slug))


@bp.post("/experiments/<slug>/members")
@owner_only
def set_member(slug: str):
    """Add a login to the study, or change its permissions there."""
    exp = experiment_or_404(slug)
    form = MemberForm()
    if not form.validate_on_submit():
        return _members_page(exp, form, 400)
    user = db.session.execute(sa.select(AdminUser).where(
        AdminUser.username == form.username.data)).scalar_one_or_none()
    if user is None:
        form.username.errors = [f"no login called {form.username.data!r} (invite it first)"]
        return _members_page(exp, form, 400)
    member = db.session.execute(sa.select(StudyMember).where(
        StudyMember.user_id == user.id, StudyMember.experiment_id == exp.id)).scalar_one_or_none()
    if member is None:
        member = StudyMember(user_id=user.id, experiment_id=exp.id)
        db.session.add(member)
    flags = {f"can_{p.value}": bool(getattr(form, f"can_{p.value}").data) for p in GRANTABLE}
    for name, value in flags.items():
        setattr(member, name, value)
    audit.record(actor(), "member_set", experiment=exp.slug, target=f"user:{user.username}",
                 detail={"role": user.role, **flags})
    db.session.commit()
    flash(f"{user.username} is a member of {exp.slug}"
          + (" (a viewer: only reads, whatever is ticked)" if user.role == Role.VIEWER else ""))
    return redirect(url_for("admin.members", slug=exp.slug))


@bp.post("/experiments/<slug>/members/<user_id>/remove")
@owner_only
def remove_member(slug: str, user_id: str):
    """Take a login off the study."""
    exp = experiment_or_404(slug)
    user = _user_or_404(user_id)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    member = db.session.execute(sa.select(StudyMember).where(
        StudyMember.user_id == user.id, StudyMember.experiment_id == exp.id)).scalar_one_or_none()
    if member is None:
        abort(404)
    db.session.delete(member)
    audit.record(actor(), "member_remove", experiment=exp.slug, target=f"user:{user.username}")
    db.session.commit()
    flash(f"{user.username} is no longer a member of {exp.slug}")
    return redirect(url_for("admin.members", slug=exp.slug))
