"""Roles x permissions x routes (issue 40): every dashboard route and method of the app, read from
its URL map, is checked against the table in docs/lab.md for an owner, a viewer, a researcher
holding each permission alone and a researcher of another study: allowed where the table says so,
refused (403 for a member, 404 for a non-member, so names and ids tell nothing) and nothing
changed where it does not. Both backends: the membership queries are the point."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.lab.access import GRANTABLE, issue_token
from humanlike.server.tables.access import StudyMember
from humanlike.server.tables.core import (
    AdminUser,
    AuditEntry,
    Experiment,
    PanelResult,
    Participant,
    Payment,
)
from humanlike.server.tables.jobs import ActionJob
from tests.server.admin.dashboard_helpers import csrf_from, login
from tests.server.admin.test_dashboard_access import evil_participant

DOC = Path(__file__).resolve().parents[3] / "docs" / "lab.md"
PASSWORD = "correct horse battery"
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
"""For what reads the URL map or renders templates: the backend is not under test there."""
ROW = re.compile(r"^\| (GET|POST) \| (/admin/\S*) \| ([^|]*)\| ([a-z ]+) \|$")


def documented() -> list[tuple[str, str, dict[str, str], str]]:
    """(method, route, form, needs) for every row of docs/lab.md's route table."""
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line.strip())
        if match:
            method, route, form, needs = match.groups()
            route = route.replace("&lt;", "<").replace("&gt;", ">")
            data = dict(pair.split("=", 1) for pair in form.split()) if form.strip() else {}
            rows.append((method, route, data, needs.strip()))
    return rows


@SQLITE_ONLY
def test_the_documented_table_names_every_dashboard_route_and_method_and_no_other(app):
    in_app = {(m, r.rule) for r in app.url_map.iter_rules() if r.endpoint.startswith("admin.")
              for m in r.methods - {"HEAD", "OPTIONS"}}
    in_doc = {(m, route) for m, route, _, _ in documented()}
    assert in_app - in_doc == set(), "routes missing from docs/lab.md's table"
    assert in_doc - in_app == set(), "docs/lab.md names routes the app does not have"
    assert len(in_app) >= 37


PEOPLE: dict[str, tuple[str, str, frozenset[str]]] = {
    # name: (role, the study they are a member of, the permissions ticked there)
    "olga": ("owner", "", frozenset()),
    "vera": ("viewer", "small", frozenset(p.value for p in GRANTABLE)),  # ticks ignored
    "rita": ("researcher", "small", frozenset({"act"})),
    "sam": ("researcher", "small", frozenset({"spend"})),
    "ravi": ("researcher", "small", frozenset({"reveal"})),
    "dora": ("researcher", "small", frozenset({"delete"})),
    "otto": ("researcher", "other", frozenset(p.value for p in GRANTABLE)),  # another study only
}


def expected(person: str, needs: str) -> int | None:
    """None when allowed; else the refusal's status."""
    role, study, ticks = PEOPLE[person]
    if needs in ("open", "signed in") or role == "owner":
        return None
    if needs == "own token":
        return 404  # the token in the URL is the owner's: another login's does not exist for them
    if needs == "owner":
        return 403
    if study != "small":
        return 404  # the study of the URL is not theirs: as if it did not exist
    held = {"view"} | (set(ticks) if role == "researcher" else set())
    return None if needs in held else 403


def fingerprint() -> tuple:
    """Everything a dashboard request could change, in one comparable value."""
    def rows(*columns):
        return db.session.execute(sa.select(*columns).order_by(columns[0])).all()
    return (
        rows(AuditEntry.id, AuditEntry.action),
        rows(Participant.public_id, Participant.status, Participant.analysis_override,
             Participant.bonus),
        rows(Experiment.slug, Experiment.status, Experiment.recruitment_meta),
        rows(AdminUser.username, AdminUser.role, AdminUser.active, AdminUser.password_hash,
             AdminUser.must_change_password),
        rows(StudyMember.id, StudyMember.user_id, StudyMember.can_act, StudyMember.can_spend),
        rows(Payment.id), rows(ActionJob.id, ActionJob.status),
        rows(PanelResult.experiment_id, PanelResult.data_version),
    )


def build_lab(app) -> dict[str, object]:
    """The small study with a participant, a second study, a job, the people above and a spare
    login (``dummy``) for the user routes to act on."""
    pid = evil_participant(app)
    with app.app_context():
        small = db.session.execute(sa.select(Experiment).where(Experiment.slug == "small")
                                   ).scalar_one()
        other = Experiment(slug="other", title="Another lab member's study", spec={},
                           spec_hash="0" * 64, root="/nonexistent")
        db.session.add(other)
        db.session.flush()
        job = ActionJob(experiment_id=small.id, action="approve", inputs={}, actor="admin:olga",
                        status="done", total=0, n_done=0, n_ok=0)
        db.session.add(job)
        db.session.add(AuditEntry(actor="admin:olga", action="experiment_status",
                                  experiment="other", target="other", detail={}))
        for name, (role, study, ticks) in {**PEOPLE, "dummy": ("viewer", "small", frozenset())
                                           }.items():
            user = AdminUser(username=name, role=role)
            user.set_password(PASSWORD)
            db.session.add(user)
            db.session.flush()
            if study:
                db.session.add(StudyMember(
                    user_id=user.id, experiment_id=(small if study == "small" else other).id,
                    **{f"can_{p.value}": p.value in ticks for p in GRANTABLE}))
        db.session.commit()
        dummy = db.session.execute(sa.select(AdminUser.id).where(AdminUser.username == "dummy")
                                   ).scalar_one()
        olga = db.session.execute(sa.select(AdminUser).where(AdminUser.username == "olga")
                                  ).scalar_one()
        token, _ = issue_token(olga, "nightly", ["view"])
        db.session.commit()
        return {"slug": "small", "public_id": pid, "job_id": str(job.id), "user_id": str(dummy),
                "token_id": str(token.id)}


@pytest.fixture
def lab(app, built_study):
    return built_study("lab_of_many", build_lab)


def log_in(app, name: str):
    client = app.test_client()
    token = csrf_from(client.get("/admin/login").get_data(as_text=True))
    resp = client.post("/admin/login", data={"username": name, "password": PASSWORD,
                                             "csrf_token": token})
    assert resp.status_code == 302, (name, resp.status_code)
    return client, csrf_from(client.get("/admin/password").get_data(as_text=True))


def test_every_role_and_permission_is_allowed_or_refused_on_every_route_as_documented(app, lab):
    table = [row for row in documented() if row[1] not in ("/admin/logout", "/admin/login")]
    for person in PEOPLE:
        client, token = log_in(app, person)

        def call(method, route, form, client=client, token=token):
            url = re.sub(r"<(\w+)>", lambda m: str(lab[m.group(1)]), route)
            if method == "GET":
                return client.get(url)
            return client.post(url, data={"csrf_token": token, **form})

        refused = [row for row in table if expected(person, row[3]) is not None]
        with app.app_context():
            before = fingerprint()
        for method, route, form, needs in refused:
            resp = call(method, route, form)
            status = expected(person, needs)
            assert resp.status_code == status, (person, method, route, form, resp.status_code)
            if status == 403:
                body = resp.get_data(as_text=True)
                assert "nothing was changed" in body or '"forbidden"' in body, body[:300]
        with app.app_context():
            assert fingerprint() == before, (person, "a refused request changed something")
        for method, route, form, needs in table:
            if expected(person, needs) is not None:
                continue
            resp = call(method, route, form)
            resp.get_data()  # the export streams: read it to the end
            assert resp.status_code not in (403, 404), (person, method, route, form,
                                                        resp.status_code)
            assert resp.status_code < 500, (person, method, route, resp.status_code)


def test_a_member_of_another_study_sees_neither_it_nor_its_audit_rows(app, lab):
    client, _ = log_in(app, "otto")
    assert 'data-slug="small"' not in client.get("/admin/").get_data(as_text=True)
    assert 'data-slug="other"' in client.get("/admin/").get_data(as_text=True)
    assert [row["slug"] for row in client.get("/admin/experiments.json").get_json()] == ["other"]
    audit = client.get("/admin/audit").get_data(as_text=True)
    assert "experiment_status" in audit and "reveal_ids" not in audit
    owner, _ = log_in(app, "olga")
    owner_audit = owner.get("/admin/audit?experiment=small").get_data(as_text=True)
    assert "small" in owner_audit
    assert "/admin/experiments/small" not in client.get("/admin/audit?experiment=small"
                                                        ).get_data(as_text=True)


@SQLITE_ONLY
def test_a_viewer_sees_the_study_without_any_action(app, lab):
    client, _ = log_in(app, "vera")
    page = client.get("/admin/experiments/small").get_data(as_text=True)
    for action in ("actions/confirm", "/reveal", "/status", "listing/sync", "breaker/resume"):
        assert action not in page, action
    assert 'name="pseudonymise" value="1"' in page  # the pseudonymised export stays
    person = client.get(f"/admin/participants/{lab['public_id']}").get_data(as_text=True)
    assert "actions/confirm" not in person and "reveal (audited)" not in person
    index = client.get("/admin/").get_data(as_text=True)
    assert "/admin/experiments/small/status" not in index
    acting, _ = log_in(app, "rita")  # the same page for a researcher who may act
    page = acting.get("/admin/experiments/small").get_data(as_text=True)
    assert "actions/confirm" in page and 'value="approve"' in page
    assert 'value="bonus"' not in page and "/reveal" not in page  # no spend, no reveal


def test_permissions_follow_the_membership_and_the_login_at_once(app, lab):
    client, token = log_in(app, "ravi")
    assert client.post("/admin/experiments/small/reveal", data={"csrf_token": token}
                       ).status_code == 302
    assert "platform id</th>" in client.get("/admin/experiments/small").get_data(as_text=True)
    with app.app_context():  # an owner takes the reveal permission away
        member = db.session.execute(sa.select(StudyMember).join(
            AdminUser, AdminUser.id == StudyMember.user_id).where(AdminUser.username == "ravi")
        ).scalar_one()
        member.can_reveal = False
        db.session.commit()
    assert "platform id</th>" not in client.get("/admin/experiments/small").get_data(as_text=True)
    with app.app_context():
        user = db.session.execute(sa.select(AdminUser).where(AdminUser.username == "ravi")
                                  ).scalar_one()
        user.active = False
        db.session.commit()
    resp = client.get("/admin/experiments/small")  # the open session ends
    assert resp.status_code == 302 and "/admin/login" in resp.headers["Location"]
    fresh = app.test_client()
    token = csrf_from(fresh.get("/admin/login").get_data(as_text=True))
    resp = fresh.post("/admin/login", data={"username": "ravi", "password": PASSWORD,
                                            "csrf_token": token})
    assert resp.status_code == 403 and "deactivated" in resp.get_data(as_text=True)


SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@SQLITE
def test_an_admin_route_that_declares_no_permission_is_refused_even_to_an_owner(app):
    """Fail closed: a view added to the dashboard without a decorator answers 403 to everyone."""
    app.add_url_rule("/admin/sneaky", endpoint="admin.sneaky", view_func=lambda: "secret")
    client = app.test_client()
    login(app, client)  # an owner (a login made without a role, as before roles)
    resp = client.get("/admin/sneaky")
    assert resp.status_code == 403 and "secret" not in resp.get_data(as_text=True)
    assert client.get("/admin/").status_code == 200
