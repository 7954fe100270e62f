"""The users page and a study's members page (issue 40): an invitation's one-time password opens
only the change-password form, roles change, the last owner stays, a deactivated login is
refused, members get exactly the permissions ticked, and the audit log names the person; the
migration makes every earlier admin an owner (both backends)."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from flask_migrate import upgrade as alembic_upgrade

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.lab.access import Permission, granted
from humanlike.server.tables.core import AdminUser, AuditEntry, Experiment
from tests.server.admin.dashboard_helpers import csrf_from, login

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_migration_0026_makes_every_earlier_admin_an_owner(database_url):
    application = create_app({"TESTING": True, "SECRET_KEY": "t",
                              "SQLALCHEMY_DATABASE_URI": database_url, "EXPERIMENT_PATHS": []})
    admin = sa.table("admin_user", *(sa.column(c) for c in (
        "id", "username", "password_hash", "created_at")))
    try:
        with application.app_context():
            alembic_upgrade(revision="0025")
            with db.engine.begin() as conn:
                conn.execute(sa.insert(admin).values(id=7, username="pi", password_hash="x",
                                                     created_at=sa.func.now()))
            alembic_upgrade(revision="0026")
            user = db.session.execute(sa.select(  # the columns 0026 made (later ones not yet there)
                AdminUser.role, AdminUser.active, AdminUser.must_change_password).where(
                AdminUser.id == 7)).one()
            assert tuple(user) == ("owner", True, False)
            assert db.session.execute(sa.text("SELECT count(*) FROM study_member")).scalar() == 0
    finally:
        database.dispose(application)


def owner_client(app):
    client = app.test_client()
    login(app, client, "olga")
    return client, csrf_from(client.get("/admin/users").get_data(as_text=True))


def invite(client, token, name: str, role: str) -> str:
    page = client.post("/admin/users", data={"username": name, "role": role,
                                             "csrf_token": token}).get_data(as_text=True)
    match = re.search(r'id="one-time-password">([^<]+)<', page)
    assert match, page[:500]
    return match.group(1)


def user_id(app, name: str) -> int:
    with app.app_context():
        return db.session.execute(sa.select(AdminUser.id).where(AdminUser.username == name)
                                  ).scalar_one()


@SQLITE
def test_an_invited_login_must_choose_its_password_before_anything_else(app):
    owner, token = owner_client(app)
    password = invite(owner, token, "rosa", "researcher")
    assert len(password) >= 16
    rosa = app.test_client()
    login_token = csrf_from(rosa.get("/admin/login").get_data(as_text=True))
    assert rosa.post("/admin/login", data={"username": "rosa", "password": password,
                                           "csrf_token": login_token}).status_code == 302
    resp = rosa.get("/admin/")
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/admin/password")
    form = csrf_from(rosa.get("/admin/password").get_data(as_text=True))
    bad = rosa.post("/admin/password", data={"current": password, "new": "short", "again": "short",
                                             "csrf_token": form})
    assert bad.status_code == 400 and rosa.get("/admin/").status_code == 302
    ok = rosa.post("/admin/password", data={"current": password, "new": "rosa's own secret",
                                            "again": "rosa's own secret", "csrf_token": form})
    assert ok.status_code == 302 and rosa.get("/admin/").status_code == 200
    assert 'data-slug="small"' not in rosa.get("/admin/").get_data(as_text=True)  # no member yet
    with app.app_context():
        rows = db.session.execute(sa.select(AuditEntry.actor, AuditEntry.action, AuditEntry.target)
                                  .order_by(AuditEntry.id)).all()
    assert rows == [("admin:olga", "user_invite", "user:rosa"),
                    ("admin:rosa", "password_change", "user:rosa")]


@SQLITE
def test_roles_change_the_last_owner_stays_and_a_deactivated_login_is_refused(app):
    owner, token = owner_client(app)
    invite(owner, token, "vic", "viewer")
    olga, vic = user_id(app, "olga"), user_id(app, "vic")
    assert owner.post(f"/admin/users/{olga}/role", data={"role": "viewer", "csrf_token": token}
                      ).status_code == 409
    assert owner.post(f"/admin/users/{olga}/active", data={"active": "0", "csrf_token": token}
                      ).status_code == 409
    assert owner.post(f"/admin/users/{vic}/role", data={"role": "sultan", "csrf_token": token}
                      ).status_code == 400
    assert owner.post(f"/admin/users/{vic}/role", data={"role": "owner", "csrf_token": token}
                      ).status_code == 302
    assert owner.post(f"/admin/users/{olga}/role", data={"role": "researcher",
                                                         "csrf_token": token}).status_code == 302
    with app.app_context():  # two owners before, so olga could step down; vic is the owner now
        roles = dict(db.session.execute(sa.select(AdminUser.username, AdminUser.role)).all())
    assert roles == {"olga": "researcher", "vic": "owner"}
    assert owner.get("/admin/users").status_code == 403  # olga's own session, at once


@SQLITE
def test_a_studys_members_get_exactly_the_permissions_ticked(app):
    owner, token = owner_client(app)
    invite(owner, token, "rita", "researcher")
    members = owner.get("/admin/experiments/small/members").get_data(as_text=True)
    assert "No members yet" in members
    missing = owner.post("/admin/experiments/small/members",
                         data={"username": "nobody", "can_act": "y", "csrf_token": token})
    assert missing.status_code == 400 and "invite it first" in missing.get_data(as_text=True)
    assert owner.post("/admin/experiments/small/members",
                      data={"username": "rita", "can_act": "y", "can_reveal": "y",
                            "csrf_token": token}).status_code == 302
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "small")
                                 ).scalar_one()
        rita = db.session.execute(sa.select(AdminUser).where(AdminUser.username == "rita")
                                  ).scalar_one()
        assert granted(rita, exp.id) == {Permission.VIEW, Permission.ACT, Permission.REVEAL}
        audit = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "member_set")).scalar_one()
        assert (audit.actor, audit.experiment, audit.detail["can_spend"]) == (
            "admin:olga", "small", False)
    page = owner.get("/admin/experiments/small/members").get_data(as_text=True)
    assert 'data-member="rita"' in page
    assert owner.post(f"/admin/experiments/small/members/{user_id(app, 'rita')}/remove",
                      data={"csrf_token": token}).status_code == 302
    with app.app_context():
        rita = db.session.get(AdminUser, user_id(app, "rita"))
        assert granted(rita, exp.id) == frozenset()


@SQLITE
def test_create_admin_makes_an_owner_and_a_reset_keeps_the_role(app, database_url, tmp_path,
                                                                 monkeypatch):
    from click.testing import CliRunner

    from humanlike.cli import main

    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))

    def create(name: str, password: str):
        return CliRunner().invoke(main, ["create-admin", "--username", name, "--password",
                                         password, "--database-url", database_url])

    made = create("pi", "first password")
    assert made.exit_code == 0 and "created (owner)" in made.output
    with app.app_context():
        pi = db.session.execute(sa.select(AdminUser).where(AdminUser.username == "pi")
                                ).scalar_one()
        pi.role, pi.must_change_password = "researcher", True
        db.session.commit()
    reset = create("pi", "second password")
    assert reset.exit_code == 0 and "password reset" in reset.output
    with app.app_context():
        pi = db.session.execute(sa.select(AdminUser).where(AdminUser.username == "pi")
                                ).scalar_one()
        assert (pi.role, pi.must_change_password) == ("researcher", False)
        assert pi.check_password("second password")
