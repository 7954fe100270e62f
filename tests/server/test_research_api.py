"""The researcher API (issue 40): personal tokens (hashed, scoped, expiring, revocable), the same
permission rules as the dashboard, actions through ``participants.actions`` once per
Idempotency-Key (a bonus paid once under 10 concurrent identical requests, against the fake
Prolific, both backends), rate limits per token, and the OpenAPI document."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import threading
import zipfile

import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.lab.access import issue_token
from humanlike.server.research_api.openapi import openapi_document
from humanlike.server.tables.access import StudyMember
from humanlike.server.tables.api_tokens import ApiToken
from humanlike.server.tables.core import AdminUser, AuditEntry, Experiment, Payment, utcnow
from tests.server.admin.dashboard_helpers import run_participant
from tests.server.test_recruit_prolific import (  # noqa: F401 - fixtures
    fake,
    pay_requests,
    rapp,
    recruit,
    recruit_spec,
    take_part,
)

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
BASE = "/api/research/v1"


def person(app, name: str, role: str, study: str | None = "small", *ticks: str,
           scopes: tuple[str, ...] = ("view",), days: int = 30) -> str:
    """A login (a member of ``study`` with ``ticks``) and a token with ``scopes``; the secret."""
    with app.app_context():
        user = AdminUser(username=name, role=role)
        user.set_password("a long enough password")
        db.session.add(user)
        db.session.flush()
        if study:
            exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == study)
                                     ).scalar_one()
            db.session.add(StudyMember(user_id=user.id, experiment_id=exp.id,
                                       can_act="act" in ticks, can_spend="spend" in ticks,
                                       can_reveal="reveal" in ticks, can_delete="delete" in ticks))
        _, secret = issue_token(user, f"{name}'s script", scopes, days)
        db.session.commit()
        return secret


def bearer(secret: str, key: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {secret}"}
    if key:
        headers["Idempotency-Key"] = key
    return headers


@SQLITE
def test_only_the_tokens_hash_is_stored_and_scopes_and_membership_both_cap_it(app, client):
    pid = run_participant(client, "PROLIFIC_PID=api1&STUDY_ID=s&SESSION_ID=x")
    rita = person(app, "rita", "researcher", "small", "act", scopes=("view",))
    full = person(app, "rico", "researcher", "small", "act", scopes=("view", "act", "spend"))
    with app.app_context():
        stored = db.session.execute(sa.select(ApiToken.token_hash, ApiToken.prefix)).all()
    assert {h for h, _ in stored} == {hashlib.sha256(s.encode()).hexdigest() for s in (rita, full)}
    assert all(len(p) < 12 and rita.startswith("hl_") for _, p in stored)
    url = f"{BASE}/experiments/small/participants/{pid}"
    # the token lacks the act scope: refused although rita's membership allows it
    resp = client.post(f"{url}/exclude", json={"reason": "script"}, headers=bearer(rita, "k1"))
    assert resp.status_code == 403 and "'act' scope" in resp.get_json()["detail"]
    # rico's token has spend, his membership does not
    resp = client.post(f"{url}/bonus", json={"amount": "0.50", "reason": "r"},
                       headers=bearer(full, "k2"))
    assert resp.status_code == 403 and "'spend'" in resp.get_json()["detail"]
    ok = client.post(f"{url}/exclude", json={"reason": "script"}, headers=bearer(full, "k3"))
    assert ok.status_code == 200 and ok.get_json()["ok"] is True
    with app.app_context():
        assert db.session.execute(sa.select(Payment)).first() is None
        assert db.session.execute(sa.select(AuditEntry.actor).where(
            AuditEntry.action == "exclude")).scalar_one().startswith("token:rico/")
    page = client.get(f"{BASE}/experiments/small/participants?excluded=yes",
                      headers=bearer(full)).get_json()
    assert [(p["public_id"], p["excluded"], p["platform_id"]) for p in page["participants"]] == [
        (pid, True, None)]  # no reveal: no platform id
    assert client.get(f"{BASE}/experiments/small/participants?qc=maybe",
                      headers=bearer(full)).status_code == 422


@SQLITE
def test_revoked_expired_unknown_and_missing_tokens_are_refused_alike(app, client):
    live = person(app, "ann", "owner", None)
    revoked = person(app, "bea", "owner", None)
    expired = person(app, "cat", "owner", None)
    with app.app_context():
        tokens = {t.user_id: t for t in db.session.execute(sa.select(ApiToken)).scalars()}
        users = dict(db.session.execute(sa.select(AdminUser.username, AdminUser.id)).all())
        tokens[users["bea"]].revoked_at = utcnow()
        tokens[users["cat"]].expires_at = utcnow() - dt.timedelta(seconds=1)
        db.session.commit()
    assert client.get(f"{BASE}/experiments", headers=bearer(live)).status_code == 200
    for headers in (bearer(revoked), bearer(expired), bearer("hl_" + "x" * 43), {}):
        resp = client.get(f"{BASE}/experiments", headers=headers)
        assert resp.status_code == 401 and resp.get_json()["error"] == "unauthorized"
    with app.app_context():  # a deactivated login's tokens die with it
        db.session.get(AdminUser, users["ann"]).active = False
        db.session.commit()
    assert client.get(f"{BASE}/experiments", headers=bearer(live)).status_code == 401


@SQLITE
def test_a_study_that_is_not_the_logins_is_a_404_like_one_that_does_not_exist(app, client):
    otto = person(app, "otto", "researcher", None, scopes=("view", "act"))
    assert client.get(f"{BASE}/experiments", headers=bearer(otto)).get_json() == []
    for url in ("/experiments/small", "/experiments/nosuch", "/experiments/small/participants"):
        resp = client.get(BASE + url, headers=bearer(otto))
        assert resp.status_code == 404 and resp.get_json()["error"] == "not_found"
    resp = client.post(f"{BASE}/experiments/small/status", json={"status": "closed"},
                       headers=bearer(otto))
    assert resp.status_code == 404


@SQLITE
def test_status_export_and_panel_answer_as_documented(app, client):
    run_participant(client, "PROLIFIC_PID=api2&STUDY_ID=s&SESSION_ID=x")
    vera = person(app, "vera", "viewer", "small", "reveal", scopes=("view", "reveal", "act"))
    owner = person(app, "olga", "owner", None, scopes=("view", "act", "reveal"))
    assert client.post(f"{BASE}/experiments/small/status", json={"status": "closed"},
                       headers=bearer(vera)).status_code == 403
    bad = client.post(f"{BASE}/experiments/small/status", json={"status": "paused"},
                      headers=bearer(owner))
    assert bad.status_code == 422 and bad.get_json()["detail"][0]["field"] == "status"
    done = client.post(f"{BASE}/experiments/small/status", json={"status": "closed"},
                       headers=bearer(owner))
    assert done.status_code == 200 and done.get_json()["status"] == "closed"
    assert done.get_json()["by_status"] == {"completed": 1}
    assert client.post(f"{BASE}/experiments/small/export.zip",
                       headers=bearer(vera)).status_code == 403  # a viewer: no reveal
    resp = client.post(f"{BASE}/experiments/small/export.zip?pseudonymise=1",
                       headers=bearer(vera))
    assert resp.status_code == 200 and resp.mimetype == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(resp.get_data())).namelist()
    assert any(n.endswith("/trials.csv") for n in names)
    assert b"api2" not in resp.get_data()  # pseudonymised
    panel = client.get(f"{BASE}/experiments/small/panel", headers=bearer(vera)).get_json()
    assert panel["stale"] is True and panel["result"] is None


@SQLITE
def test_each_token_has_its_own_rate_limit(database_url):
    limited = create_app({"TESTING": True, "SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI":
                          database_url, "EXPERIMENT_PATHS": [], "RATELIMIT_ENABLED": True,
                          "RESEARCH_API_RATE_LIMIT": "3/minute"})
    database.upgrade(limited)
    try:
        first = person(limited, "ann", "owner", None)
        second = person(limited, "bob", "owner", None)
        client = limited.test_client()
        answers = [client.get(f"{BASE}/experiments", headers=bearer(first)).status_code
                   for _ in range(4)]
        assert answers == [200, 200, 200, 429]
        assert client.get(f"{BASE}/experiments", headers=bearer(first)).get_json()["error"] == (
            "too_many_requests")
        assert client.get(f"{BASE}/experiments", headers=bearer(second)).status_code == 200
    finally:
        database.dispose(limited)


def test_an_api_bonus_is_paid_once_under_ten_concurrent_identical_requests(
        rapp, fake, database_url, recruit_spec):  # noqa: F811 - the fixtures imported above
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], "PPP0100")
    secret = person(rapp, "sam", "researcher", "small", "spend", scopes=("view", "spend"))
    url = f"{BASE}/experiments/small/participants/{pid}/bonus"
    body = {"amount": "0.80", "reason": "accuracy"}
    start = threading.Barrier(10)
    answers: list[int] = []

    def send() -> None:
        client = rapp.test_client()
        start.wait()
        answers.append(client.post(url, json=body, headers=bearer(secret, "bonus-1")).status_code)

    threads = [threading.Thread(target=send) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 10 and set(answers) <= {200, 409}, answers
    assert answers.count(200) >= 1
    assert len(fake.bonuses) == 1 and len(pay_requests(fake)) == 1
    assert fake.submissions[sid]["bonus_payments"] == [80.0]
    client = rapp.test_client()
    again = client.post(url, json=body, headers=bearer(secret, "bonus-1"))
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    other = client.post(url, json={"amount": "0.90", "reason": "accuracy"},
                        headers=bearer(secret, "bonus-1"))
    assert other.status_code == 422 and other.get_json()["error"] == "idempotency_key_reused"
    missing = client.post(url, json=body, headers=bearer(secret))
    assert missing.status_code == 400 and missing.get_json()["error"] == "idempotency_key_required"
    with rapp.app_context():
        [payment] = db.session.execute(sa.select(Payment)).scalars()
        assert payment.status == "paid" and payment.actor.startswith("token:sam/")
    assert len(pay_requests(fake)) == 1


def test_the_openapi_document_validates_and_names_every_route(app, client):
    doc = client.get(f"{BASE}/openapi.json").get_json()
    assert doc == openapi_document() and doc["openapi"] == "3.1.0"
    routes = {(m.lower(), r.rule.replace("<", "{").replace(">", "}"))
              for r in app.url_map.iter_rules() if r.endpoint.startswith("research_api.")
              and r.endpoint != "research_api.openapi"
              for m in r.methods - {"HEAD", "OPTIONS"}}
    documented = {(m, p) for p, item in doc["paths"].items() for m in item if m != "parameters"}
    assert routes == documented
    try:
        from openapi_spec_validator import validate
    except ImportError:  # the project's own check: every $ref resolves, every operation answers
        refs = {f"#/components/schemas/{name}" for name in doc["components"]["schemas"]}
        text = str(doc)
        import re

        assert set(re.findall(r"#/components/schemas/\w+", text)) <= refs
        for item in doc["paths"].values():
            for method, op in item.items():
                if method != "parameters":
                    assert "200" in op["responses"] and op["summary"]
    else:
        validate(doc)
    bonus = doc["paths"][f"{BASE}/experiments/{{slug}}/participants/{{public_id}}/bonus"]["post"]
    assert bonus["x-scope"] == "spend"
    assert bonus["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("BonusIn")


@SQLITE
def test_the_worked_example_in_docs_lab_md_runs_against_a_live_server(app, tmp_path,
                                                                       monkeypatch, capsys):
    from pathlib import Path

    from tests.e2e.conftest import LiveServer

    doc = (Path(__file__).resolve().parents[2] / "docs" / "lab.md").read_text(encoding="utf-8")
    [example] = [block for block in doc.split("```python\n")[1:]]
    example = example.split("```")[0]
    client = app.test_client()
    passing = [run_participant(client, f"PROLIFIC_PID=doc{n}&STUDY_ID=s&SESSION_ID=x{n}",
                               careful=True) for n in range(2)]
    secret = person(app, "rita", "researcher", "small", "act", scopes=("view", "act"))
    (tmp_path / "token.txt").write_text(secret + "\n")
    live = LiveServer(app)
    try:
        monkeypatch.setenv("HUMANLIKE_URL", live.url)
        monkeypatch.setenv("HUMANLIKE_TOKEN_FILE", str(tmp_path / "token.txt"))
        monkeypatch.chdir(tmp_path)
        exec(compile(example, "docs/lab.md", "exec"), {})
    finally:
        live.stop()
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("small live {'completed': 2}")
    assert sorted(line.split()[0] for line in printed[1:]) == sorted(passing)
    assert all(line.split()[1:3] == ["approve", "True"] for line in printed[1:])
    names = zipfile.ZipFile(tmp_path / "small.zip").namelist()
    assert any(n.endswith("/participants.csv") for n in names)
    with app.app_context():
        actors = db.session.execute(sa.select(AuditEntry.actor).where(
            AuditEntry.action == "approve")).scalars().all()
    assert len(actors) == 2 and all(a.startswith("token:rita/") for a in actors)


@SQLITE
def test_humanlike_token_create_writes_a_private_file_and_revoke_ends_it(app, client,
                                                                        database_url, tmp_path,
                                                                        monkeypatch):
    import os
    import stat

    from click.testing import CliRunner

    from humanlike.cli import main

    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    person(app, "olga", "owner", None)

    def cli(*args: str):
        return CliRunner().invoke(main, [*args, "--database-url", database_url])

    bad = cli("token", "create", "--user", "olga", "--name", "x", "--scopes", "view,pay")
    assert bad.exit_code != 0 and "unknown scope(s) pay" in bad.output
    out = tmp_path / "token.txt"
    made = cli("token", "create", "--user", "olga", "--name", "nightly", "--scopes", "view,act",
               "--days", "7", "--out", str(out))
    assert made.exit_code == 0, made.output
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    secret = out.read_text().strip()
    assert secret not in made.output
    assert client.get(f"{BASE}/experiments", headers=bearer(secret)).status_code == 200
    listed = cli("token", "list").output
    assert "nightly\tview act\t" in listed and secret not in listed
    [token_id] = [line.split("\t")[0] for line in listed.splitlines() if "nightly" in line]
    assert cli("token", "revoke", token_id).exit_code == 0
    assert client.get(f"{BASE}/experiments", headers=bearer(secret)).status_code == 401
    with app.app_context():
        actions = db.session.execute(sa.select(AuditEntry.action).order_by(AuditEntry.id)
                                     ).scalars().all()
    assert actions == ["token_create", "token_revoke"]
