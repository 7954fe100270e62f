"""Personal tokens for the researcher API (issue 40), on the dashboard: each login makes its own
(a name, scopes, an expiry), sees the token once, lists and revokes them; an owner sees and
revokes everyone's. Only the sha256 of a token is stored (``access.issue_token``)."""

from __future__ import annotations

import sqlalchemy as sa
from flask import abort, flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from wtforms import IntegerField, SelectMultipleField, StringField
from wtforms.validators import DataRequired, Length, NumberRange

from humanlike.server import audit
from humanlike.server.admin.auth import actor
from humanlike.server.admin.blueprint import bp
from humanlike.server.admin.permissions import person, signed_in
from humanlike.server.extensions import db
from humanlike.server.lab.access import (
    DEFAULT_TOKEN_DAYS,
    MAX_TOKEN_DAYS,
    Permission,
    Role,
    issue_token,
)
from humanlike.server.tables.api_tokens import ApiToken
from humanlike.server.tables.core import AdminUser, utcnow


class TokenForm(FlaskForm):
    """A new token: what it is for, its scopes, how many days it lives."""

    name = StringField("Name", validators=[DataRequired(), Length(max=80)])
    scopes = SelectMultipleField("Scopes", choices=[p.value for p in Permission],
                                 default=[Permission.VIEW.value])
    days = IntegerField("Days", default=DEFAULT_TOKEN_DAYS,
                        validators=[NumberRange(1, MAX_TOKEN_DAYS)])


class RevokeForm(FlaskForm):
    """CSRF token only."""


def _page(form: TokenForm | None = None, secret: str | None = None, status: int = 200):
    user = person()
    assert user is not None
    stmt = (sa.select(ApiToken, AdminUser.username)
            .join(AdminUser, AdminUser.id == ApiToken.user_id).order_by(ApiToken.id.desc()))
    if user.role != Role.OWNER:
        stmt = stmt.where(ApiToken.user_id == user.id)
    rows = db.session.execute(stmt).all()
    return render_template("admin/tokens.html", rows=rows, form=form or TokenForm(),
                           revoke=RevokeForm(), secret=secret, now=utcnow()), status


@bp.get("/tokens")
@signed_in
def tokens():
    """Your API tokens (an owner: everyone's), and a form for a new one."""
    return _page()


@bp.post("/tokens")
@signed_in
def create_token():
    """Make a token for the logged-in login; the page that answers shows it once."""
    form = TokenForm()
    if not form.validate_on_submit():
        return _page(form, status=400)
    user = person()
    assert user is not None
    try:
        row, secret = issue_token(user, str(form.name.data), form.scopes.data or [],
                                  int(form.days.data or DEFAULT_TOKEN_DAYS))
    except ValueError as exc:
        form.scopes.errors = [str(exc)]
        return _page(form, status=400)
    db.session.flush()
    audit.record(actor(), "token_create", target=f"token:{row.id}",
                 detail={"name": row.name, "scopes": row.scopes,
                         "expires_at": row.expires_at.isoformat()})
    db.session.commit()
    return _page(secret=secret)


@bp.post("/tokens/<token_id>/revoke")
@signed_in
def revoke_token(token_id: str):
    """Revoke a token (your own; an owner: anyone's): it is refused from the next request on."""
    user = person()
    row = db.session.get(ApiToken, int(token_id)) if token_id.isdigit() and len(token_id) < 10 \
        else None
    if row is None or user is None or (row.user_id != user.id and user.role != Role.OWNER):
        abort(404)  # another login's token does not exist for you
    if not RevokeForm().validate_on_submit():
        abort(400)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        audit.record(actor(), "token_revoke", target=f"token:{row.id}", detail={"name": row.name})
        db.session.commit()
    flash(f"token {row.prefix}… ({row.name}) revoked")
    return redirect(url_for("admin.tokens"))
