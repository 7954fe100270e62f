"""Prolific through humanlike against a local fake of Prolific's API (tests/server/fake_prolific.py,
which checks every path, header and body against Prolific's documentation): create -> publish -> a
participant takes part through the generated link -> sync -> approve; rejections refused before any
request; a bonus paid exactly once however its pay step fails; retries; the token never shown."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.participants import actions
from humanlike.server.sources.prolific import ProlificClient, ProlificError, study_body
from humanlike.server.study import experiments
from humanlike.server.study.spec import SpecError, load_spec
from humanlike.server.tables.core import AuditEntry, Experiment, Participant, Payment
from tests.server.conftest import enter, write_small_experiment
from tests.server.fake_prolific import FakeProlific, NotEligible, Server
from tests.server.test_export import run_participant

TOKEN = "tok-9f8e7d6c5b4a-secret"
GOOD_MESSAGE = ("Your submission could not be approved because the attention checks embedded in "
                "the task were answered incorrectly on most occasions.")
RECRUITMENT = """
[recruitment]
public_url = "https://study.example.org"

[recruitment.prolific]
name = "Rate handwritten digits"
description = "Rate how much each image looks like each digit (about 10 minutes)."
reward = 150
places = 20
estimated_minutes = 10
maximum_minutes = 40
device_compatibility = ["desktop"]

[[recruitment.prolific.filters]]
filter_id = "approval_rate"
selected_range = { lower = 95, upper = 100 }

[[recruitment.prolific.completion_codes]]
code = "CODE1234"
actions = ["MANUALLY_REVIEW"]
"""


@pytest.fixture(scope="module")
def recruit_spec(tmp_path_factory):
    spec = write_small_experiment(tmp_path_factory.mktemp("recruit"))
    spec.write_text(spec.read_text() + RECRUITMENT)
    return spec


@pytest.fixture
def fake(monkeypatch, tmp_path):
    fake = FakeProlific(TOKEN)
    with Server(fake) as server:
        monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
        monkeypatch.setenv("PROLIFIC_API_URL", server.url)
        monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
        monkeypatch.setattr("time.sleep", lambda s: None)  # backoff without waiting
        yield fake


@pytest.fixture
def rapp(database_url, recruit_spec, fake):
    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(recruit_spec)]})
    database.upgrade(application)
    experiments.sync_all(application)
    yield application
    database.dispose(application)


def recruit(database_url, recruit_spec, *args):
    result = CliRunner().invoke(main, ["recruit", "prolific", *args[:1], "small", *args[1:],
                                       "--experiment", str(recruit_spec),
                                       "--database-url", database_url])
    return result


def take_part(rapp, fake, study_id, prolific_pid):
    """A participant joins on (fake) Prolific, follows the generated link, does every trial and is
    sent back to Prolific's completion URL with the code."""
    sid, url = fake.join(study_id, prolific_pid)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "study.example.org", "/start/small")
    client = rapp.test_client()
    pid, token = enter(client, parts.query)
    run_participant(client, pid, token, np.random.default_rng(0))
    done = client.post(f"/api/v1/participants/{pid}/complete",
                       headers={"Authorization": f"Bearer {token}"}).get_json()
    target = urlsplit(done["next"]["url"])
    assert target.netloc == "app.prolific.com" and target.path == "/submissions/complete"
    fake.complete(sid, target.query.removeprefix("cc="))
    return pid, sid


def row(pid):
    return db.session.execute(sa.select(Participant).where(Participant.public_id == pid)).scalar_one()


def test_create_publish_take_part_sync_and_approve(rapp, fake, database_url, recruit_spec, caplog):
    caplog.set_level(logging.DEBUG)
    out = recruit(database_url, recruit_spec, "create")
    assert out.exit_code == 0, out.output
    [study] = fake.studies.values()
    assert study["status"] == "UNPUBLISHED"
    assert study["external_study_url"] == (
        "https://study.example.org/start/small?PROLIFIC_PID={{%PROLIFIC_PID%}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}")
    assert (study["reward"], study["total_available_places"], study["estimated_completion_time"],
            study["maximum_allowed_time"]) == (150, 20, 10, 40)
    assert study["completion_codes"] == [{"code": "CODE1234", "code_type": "COMPLETED",
                                          "actions": [{"action": "MANUALLY_REVIEW"}]}]
    assert study["filters"] == [{"filter_id": "approval_rate",
                                 "selected_range": {"lower": 95.0, "upper": 100.0}}]
    with rapp.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert exp.recruitment_ref == study["id"]
    assert recruit(database_url, recruit_spec, "create").exit_code == 1  # one listing only

    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    assert study["status"] == "ACTIVE"

    pid, sid = take_part(rapp, fake, study["id"], "PPP0001")
    with rapp.app_context():
        assert (row(pid).status, row(pid).session_id) == ("completed", sid)
    assert fake.submissions[sid]["status"] == "AWAITING REVIEW"

    out = recruit(database_url, recruit_spec, "sync")
    assert out.exit_code == 0, out.output
    assert '"changed"' in out.output and pid in out.output
    with rapp.app_context():
        assert row(pid).status == "submitted"
    again = recruit(database_url, recruit_spec, "sync")  # idempotent: nothing changes twice
    assert again.exit_code == 0 and '"changed": []' in again.output

    out = recruit(database_url, recruit_spec, "approve", "PPP0001")
    assert out.exit_code == 0, out.output
    assert fake.submissions[sid]["status"] == "APPROVED"
    with rapp.app_context():
        assert row(pid).status == "approved"
        audits = {a.action for a in db.session.execute(sa.select(AuditEntry)).scalars()}
        assert {"recruit", "sync_submit", "approve"} <= audits
    assert recruit(database_url, recruit_spec, "sync").exit_code == 0  # APPROVED = already so

    paths = [(m, p.split("?")[0]) for m, p, _ in fake.log]
    read_study = ("GET", f"/api/v1/studies/{study['id']}/")  # a sync notes status and places
    assert paths == [
        ("POST", "/api/v1/studies/"),
        ("POST", f"/api/v1/studies/{study['id']}/transition/"),
        ("GET", "/api/v1/submissions/"), read_study, ("GET", "/api/v1/submissions/"), read_study,
        ("GET", f"/api/v1/submissions/{sid}/"),  # approve reads the submission's status first
        ("POST", f"/api/v1/submissions/{sid}/transition/"),
        ("GET", "/api/v1/submissions/"), read_study,
    ]
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    with rapp.app_context():  # nor in the database (audit rows, listing, payments)
        stored = [a.detail for a in db.session.execute(sa.select(AuditEntry)).scalars()]
        stored.append(db.session.execute(sa.select(Experiment)).scalar_one().recruitment_meta)
        assert TOKEN not in json.dumps(stored, default=str)


def test_status_pause_places_and_a_missing_token(rapp, fake, database_url, recruit_spec,
                                                 monkeypatch):
    assert recruit(database_url, recruit_spec, "status").exit_code == 1  # no listing yet
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    out = recruit(database_url, recruit_spec, "status")
    assert out.exit_code == 0 and json.loads(out.output)["platform"]["status"] == "ACTIVE"
    assert recruit(database_url, recruit_spec, "places", "--total", "30").exit_code == 0
    assert study["total_available_places"] == 30
    sent = len(fake.log)
    out = recruit(database_url, recruit_spec, "places", "--total", "10")
    assert out.exit_code == 1 and "only allows increasing them" in out.output
    assert [m for m, _, _ in fake.log[sent:]] == ["GET"]  # read the total; no PATCH sent
    assert recruit(database_url, recruit_spec, "pause").exit_code == 0
    assert study["status"] == "PAUSED"
    assert recruit(database_url, recruit_spec, "resume").exit_code == 0
    assert study["status"] == "ACTIVE"
    assert recruit(database_url, recruit_spec, "stop").exit_code == 0
    assert study["status"] == "AWAITING REVIEW"
    monkeypatch.delenv("PROLIFIC_TOKEN")
    out = recruit(database_url, recruit_spec, "sync")
    assert out.exit_code == 1 and "PROLIFIC_TOKEN is not set" in out.output


def test_a_short_rejection_is_refused_before_any_request(rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], "PPP0002")
    sent = len(fake.log)
    out = recruit(database_url, recruit_spec, "reject", pid, "--message", "Too fast.",
                  "--category", "TOO_QUICKLY")
    assert out.exit_code == 1 and "100 characters" in out.output and "field: message" in out.output
    out = recruit(database_url, recruit_spec, "reject", pid, "--message", GOOD_MESSAGE)
    assert out.exit_code == 1 and "category" in out.output
    with rapp.app_context(), pytest.raises(actions.ActionError):
        actions.reject(row(pid), "admin:alice", "Too fast.", "TOO_QUICKLY")
    assert len(fake.log) == sent  # nothing reached Prolific
    with rapp.app_context():
        assert row(pid).status == "completed"
        result = actions.reject(row(pid), "admin:alice", GOOD_MESSAGE, "FAILED_CHECK")
        assert result.ok and not result.local_only and row(pid).status == "rejected"
    assert fake.submissions[sid]["status"] == "REJECTED"
    assert fake.log[-1][2] == {"action": "REJECT", "message": GOOD_MESSAGE,
                               "rejection_category": "FAILED_CHECK"}


def pay_requests(fake):
    return [p for m, p, _ in fake.log if m == "POST" and p.endswith("/pay/")]


def payment_row():
    [payment] = db.session.execute(sa.select(Payment)).scalars()
    return payment


def age_attempt(rapp):
    """Move the unknown pay attempt past the settle wait (Prolific pays asynchronously)."""
    by = actions.SETTLE_WAIT
    with rapp.app_context():
        payment = payment_row()
        payment.claimed_at = payment.claimed_at - by - dt.timedelta(seconds=1)
        db.session.commit()


def test_a_bonus_whose_pay_step_fails_without_paying_is_paid_once_after_checking(
        rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], "PPP0003")
    fake.fail_pay = 1  # a 503: Prolific may or may not have paid
    out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.75",
                  "--reason", "accuracy")
    assert out.exit_code == 1 and "state unknown" in out.output
    [bonus] = fake.bonuses.values()
    assert fake.paid == []
    assert bonus["rows"][0][0] == "PPP0003" and str(bonus["rows"][0][1]) == "0.75"
    with rapp.app_context():
        assert (payment_row().status, payment_row().platform_ref) == ("unknown", bonus["id"])
    # at once: Prolific is asked (not paid yet), and nothing is sent while it may still be paying
    out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.75",
                  "--reason", "accuracy")
    assert out.exit_code == 1 and "checked Prolific: not paid yet" in out.output
    assert ("GET", f"/api/v1/submissions/{sid}/", None) in fake.log
    assert len(pay_requests(fake)) == 1
    age_attempt(rapp)
    out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.75",
                  "--reason", "accuracy")
    assert out.exit_code == 0, out.output
    assert "checked Prolific: not paid" in out.output
    assert fake.paid == [bonus["id"]] and len(fake.bonuses) == 1  # the same bonus, paid once
    out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.75",
                  "--reason", "accuracy")
    assert out.exit_code == 0 and "nothing paid again" in out.output
    assert fake.paid == [bonus["id"]] and len(pay_requests(fake)) == 2
    with rapp.app_context():
        assert float(row(pid).bonus) == 0.75
        assert payment_row().status == "paid"


def test_a_pay_reply_lost_after_paying_is_settled_as_paid_without_a_second_pay_cli(
        rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], "PPP0005")
    fake.lose_pay_reply = 1  # Prolific pays, then the answer is lost (503)
    out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.75",
                  "--reason", "accuracy")
    assert out.exit_code == 1 and "state unknown" in out.output and "not paid:" not in out.output
    [bonus] = fake.bonuses.values()
    assert fake.paid == [bonus["id"]] and fake.submissions[sid]["bonus_payments"] == [75.0]
    with rapp.app_context():
        assert payment_row().status == "unknown" and row(pid).bonus is None
    for _ in range(2):  # the re-run the docs advise, and once more after the settle wait
        out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.75",
                      "--reason", "accuracy")
        assert out.exit_code == 0, out.output
        age_attempt(rapp)
    assert "state unknown: checked Prolific: paid" in out.output or "nothing paid again" in out.output
    assert len(pay_requests(fake)) == 1 and fake.paid == [bonus["id"]]  # no second pay request
    assert fake.submissions[sid]["bonus_payments"] == [75.0]
    with rapp.app_context():
        assert payment_row().status == "paid" and float(row(pid).bonus) == 0.75
        details = [a.detail for a in db.session.execute(
            sa.select(AuditEntry).where(AuditEntry.action == "bonus")).scalars()]
        assert [d.get("checked") for d in details][:2] == [None, "paid"]


def test_a_pay_reply_lost_after_paying_is_settled_as_paid_from_the_dashboard(
        rapp, fake, database_url, recruit_spec):
    from tests.server.admin.dashboard_helpers import csrf_from, login

    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], "PPP0006")
    admin = rapp.test_client()
    login(rapp, admin)
    token = csrf_from(admin.get("/admin/experiments/small").get_data(as_text=True))
    form = {"csrf_token": token, "action": "bonus", "confirmed": "yes", "participant": pid,
            "amount": "1.25", "reason": "speed"}
    fake.lose_pay_reply = 1
    first = admin.post("/admin/experiments/small/actions/apply", data=form)
    assert first.status_code == 200 and "state unknown" in first.get_data(as_text=True)
    again = admin.post("/admin/experiments/small/actions/apply", data=form)
    page = again.get_data(as_text=True)
    assert again.status_code == 200 and "state unknown: checked Prolific: paid" in page
    assert len(pay_requests(fake)) == 1 and fake.submissions[sid]["bonus_payments"] == [125.0]
    with rapp.app_context():
        assert payment_row().status == "paid" and float(row(pid).bonus) == 1.25


def test_mark_as_paid_after_checking_settles_an_unknown_bonus_and_is_audited(
        rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, _ = take_part(rapp, fake, study["id"], "PPP0007")
    fake.fail_pay = 1
    assert recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.40",
                   "--reason", "extra").exit_code == 1
    sent = len(fake.log)
    out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.40", "--reason",
                  "extra", "--mark-paid")
    assert out.exit_code == 0, out.output
    assert len(fake.log) == sent  # nothing asked of Prolific: the researcher checked
    with rapp.app_context():
        assert payment_row().status == "paid" and float(row(pid).bonus) == 0.40
        [entry] = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "mark_paid_after_checking")).scalars()
        assert entry.target == pid and entry.detail["reason"] == "extra"
    out = recruit(database_url, recruit_spec, "bonus", pid, "--amount", "0.40", "--reason", "extra")
    assert out.exit_code == 0 and "nothing paid again" in out.output
    assert len(pay_requests(fake)) == 1


def test_approve_reads_the_submission_first_and_a_5xx_leaves_it_unknown(
        rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, sid = take_part(rapp, fake, study["id"], "PPP0008")
    fake.fail_transition = 5  # the read passes; every transition attempt answers 503
    out = recruit(database_url, recruit_spec, "approve", pid)
    assert out.exit_code == 1 and "state unknown" in out.output
    with rapp.app_context():
        assert row(pid).status == "completed"
    fake.set_status(sid, "APPROVED")  # it had gone through after all
    sent = len(fake.log)
    out = recruit(database_url, recruit_spec, "approve", pid)
    assert out.exit_code == 0, out.output
    assert [(m, p) for m, p, _ in fake.log[sent:]] == [("GET", f"/api/v1/submissions/{sid}/")]
    with rapp.app_context():
        assert row(pid).status == "approved"


def test_a_crash_between_create_and_pay_pays_the_created_bonus_once(rapp, fake, database_url,
                                                                   recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pid, _ = take_part(rapp, fake, study["id"], "PPP0004")
    with rapp.app_context():
        real_pay = ProlificClient.pay_bonus

        def crash(self, bonus_id):  # the process dies after step 1 was saved
            raise SystemExit("killed")

        ProlificClient.pay_bonus = crash
        try:
            with pytest.raises(SystemExit):
                actions.pay_bonus(row(pid), "admin:alice", "1.00", "crash")
        finally:
            ProlificClient.pay_bonus = real_pay
    with rapp.app_context():
        db.session.rollback()
        [payment] = db.session.execute(sa.select(Payment)).scalars()
        assert payment.status == "paying" and payment.platform_ref is not None
        ref = payment.platform_ref
        payment.claimed_at = payment.claimed_at - actions.CLAIM_TIMEOUT - dt.timedelta(seconds=1)
        db.session.commit()
        result = actions.pay_bonus(row(pid), "admin:alice", "1.00", "crash")
        assert result.ok, result.message
    assert len(fake.bonuses) == 1 and fake.paid == [ref]


def test_rate_limits_and_5xx_are_retried_a_bounded_number_of_times(fake):
    client = ProlificClient(sleep=lambda s: None)
    body = {"name": "n", "description": "d", "prolific_id_option": "url_parameters",
            "external_study_url": "https://x.org/start/s?PROLIFIC_PID={{%PROLIFIC_PID%}}"
                                  "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}",
            "completion_codes": [{"code": "ABCD", "code_type": "COMPLETED",
                                  "actions": [{"action": "MANUALLY_REVIEW"}]}],
            "total_available_places": 5, "estimated_completion_time": 5, "reward": 100,
            "device_compatibility": ["desktop"]}
    fake.fail_next = [429, 503, 502]
    assert client.create_study(body)["status"] == "UNPUBLISHED"
    assert len(fake.log) == 4 and len(fake.studies) == 1
    fake.fail_next = [503] * 5
    with pytest.raises(ProlificError, match="HTTP 503 from Prolific after 5 attempt"):
        client.get_study("x")
    assert len(fake.log) == 4 + 5
    with pytest.raises(ProlificError) as err:
        client.create_study({**body, "reward": 0})
    assert err.value.fields == ("reward",) and "field 'reward'" in str(err.value)
    assert err.value.status == 400


def test_the_pay_step_is_never_retried_blindly_on_a_5xx(fake):
    fake.studies["s1"] = {"id": "s1", "status": "ACTIVE", "completion_codes": [],
                          "external_study_url": "https://x/"}
    fake.submissions["sub1"] = {"id": "sub1", "participant_id": "P1", "study_id": "s1",
                                "status": "AWAITING REVIEW", "bonus_payments": []}
    client = ProlificClient(sleep=lambda s: None)
    bonus = client.create_bonus("s1", "P1", 0.5)
    fake.fail_next = [502]
    with pytest.raises(ProlificError):
        client.pay_bonus(bonus["id"])
    assert len([p for m, p, _ in fake.log if p.endswith("/pay/")]) == 1  # one attempt only


def test_submissions_are_read_page_by_page(fake):
    fake.studies["s1"] = {"id": "s1"}
    for i in range(45):
        fake.submissions[f"sub{i}"] = {"id": f"sub{i}", "participant_id": f"P{i}",
                                       "study_id": "s1", "status": "ACTIVE", "study_code": None}
    client = ProlificClient()
    seen = [s["participant_id"] for s in client.submissions("s1", page_size=20)]
    assert seen == [f"P{i}" for i in range(45)]
    assert [p for _, p, _ in fake.log] == [
        f"/api/v1/submissions/?study=s1&page={n}&page_size=20" for n in (1, 2, 3)]


def test_bulk_approve_sends_submission_ids(fake):
    fake.studies["s1"] = {"id": "s1"}
    for i in range(3):
        fake.submissions[f"sub{i}"] = {"id": f"sub{i}", "participant_id": f"P{i}",
                                       "study_id": "s1", "status": "AWAITING REVIEW"}
    ProlificClient().bulk_approve(["sub0", "sub2"])
    assert [s["status"] for s in fake.submissions.values()] == ["APPROVED", "AWAITING REVIEW",
                                                                "APPROVED"]


def test_dry_run_prints_the_request_without_the_token_and_sends_nothing(rapp, fake, database_url,
                                                                        recruit_spec):
    out = recruit(database_url, recruit_spec, "create", "--dry-run")
    assert out.exit_code == 0, out.output
    assert out.output.startswith(f"POST {urlsplit(fake_url()).geturl()}/api/v1/studies/\n"
                                 "Authorization: Token ***\n")
    assert '"external_study_url": "https://study.example.org/start/small?PROLIFIC_PID=' in out.output
    assert TOKEN not in out.output and fake.log == [] and fake.studies == {}
    out = recruit(database_url, recruit_spec, "bonus", "nobody", "--amount", "1", "--reason", "x",
                  "--dry-run")
    assert out.exit_code == 1 and "no participant 'nobody'" in out.output
    with rapp.app_context():
        assert db.session.execute(sa.select(Experiment)).scalar_one().recruitment_ref is None


def fake_url():
    import os

    return os.environ["PROLIFIC_API_URL"]


def test_the_recruitment_table_is_validated_and_left_out_of_the_spec_hash(tmp_path, recruit_spec):
    with_table = load_spec(recruit_spec)
    plain = tmp_path / "plain"
    write_small_experiment(plain)
    assert load_spec(plain / "experiment.toml").spec_hash() == with_table.spec_hash()
    assert "recruitment" not in with_table.model_dump()
    body = study_body(with_table)
    assert body["prolific_id_option"] == "url_parameters" and body["reward"] == 150
    bad = tmp_path / "bad"
    write_small_experiment(bad)
    spec = bad / "experiment.toml"
    spec.write_text(spec.read_text() + RECRUITMENT.replace("reward = 150", "reward = 1.5"))
    with pytest.raises(SpecError, match=r"recruitment\.prolific\.reward"):
        load_spec(spec)
    spec.write_text(spec.read_text().replace("reward = 1.5", "reward = 150\nreward_gbp = 2"))
    with pytest.raises(SpecError, match=r"recruitment\.prolific\.reward_gbp: Extra inputs"):
        load_spec(spec)
    spec.write_text(spec.read_text().replace("reward_gbp = 2\n", "").replace(
        'public_url = "https://study.example.org"', 'public_url = "http://study.example.org"'))
    with pytest.raises(SpecError, match=r"recruitment\.public_url"):
        load_spec(spec)


def test_the_documented_base_url_is_accepted(fake):
    client = ProlificClient(base_url=fake_url() + "/api/v1/")
    with pytest.raises(ProlificError):
        client.get_study("s404")
    assert fake.log[-1][1] == "/api/v1/studies/s404/"  # not /api/v1/api/v1/...


def test_prolifics_own_message_is_shown_not_a_python_repr(fake):
    client = ProlificClient(token="wrong-token")
    with pytest.raises(ProlificError) as err:
        client.get_study("s1")
    text = str(err.value)
    assert text.endswith("(HTTP 401): Not authenticated: Authentication credentials were not "
                         "provided.")
    assert "{'" not in text and "{\"" not in text


def test_recruit_works_on_a_fresh_database_with_experiment(fake, recruit_spec, tmp_path):
    fresh = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    out = CliRunner().invoke(main, ["recruit", "prolific", "create", "small", "--experiment",
                                    str(recruit_spec), "--database-url", fresh])
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output and len(fake.studies) == 1


def test_create_warns_when_the_listing_promises_fewer_minutes_than_the_server_shows(
        rapp, fake, database_url, recruit_spec, tmp_path):
    pid, token = enter(rapp.test_client(), "PROLIFIC_PID=EST1&STUDY_ID=s&SESSION_ID=x")
    shown = rapp.test_client().get(f"/api/v1/participants/{pid}/timeline", headers={
        "Authorization": f"Bearer {token}"}).get_json()["estimated_minutes"]
    assert 3 < shown <= 10
    out = recruit(database_url, recruit_spec, "create")  # the listing says 10 minutes: fine
    assert out.exit_code == 0 and "warning" not in out.output
    short = write_small_experiment(tmp_path / "short")
    short.write_text(short.read_text() + RECRUITMENT.replace("estimated_minutes = 10",
                                                             "estimated_minutes = 3"))
    out = recruit(database_url, short, "create", "--force")
    assert out.exit_code == 0, out.output
    assert (f"warning: recruitment.prolific.estimated_minutes is 3, below the {shown} minutes "
            "the server estimates") in out.output


def test_simulate_rehearses_a_study_with_the_platforms_study_and_session_ids(
        rapp, fake, database_url, recruit_spec, tmp_path):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    joined = {f"RHS{i}": fake.join(study["id"], f"RHS{i}")[0] for i in range(2)}
    sessions = tmp_path / "sessions.csv"
    sessions.write_text("".join(f"{pid},{sid}\n" for pid, sid in joined.items()))
    out = CliRunner().invoke(main, ["simulate", str(recruit_spec), "--study-id", study["id"],
                                    "--sessions", str(sessions), "--fail-catch", "0",
                                    "--truth", str(tmp_path / "truth"),
                                    "--database-url", database_url])
    assert out.exit_code == 0, out.output
    with rapp.app_context():
        rows = {p.platform_id: (p.study_id, p.session_id, p.status) for p in db.session.execute(
            sa.select(Participant)).scalars()}
    assert rows == {pid: (study["id"], sid, "completed") for pid, sid in joined.items()}
    for sid in joined.values():
        fake.complete(sid, "CODE1234")
    out = recruit(database_url, recruit_spec, "sync")
    assert out.exit_code == 0 and json.loads(out.output[out.output.index("{"):])["changed"]
    with rapp.app_context():
        assert {p.status for p in db.session.execute(sa.select(Participant)).scalars()} == {
            "submitted"}
    bad = tmp_path / "bad.csv"
    bad.write_text("RHS9\n")
    out = CliRunner().invoke(main, ["simulate", str(recruit_spec), "--sessions", str(bad),
                                    "--database-url", database_url])
    assert out.exit_code != 0 and "bad.csv: line 1: expected 'participant_id,session_id'" in \
        out.output


def test_a_message_reaches_the_ticked_participants_in_one_request_and_is_audited(
        rapp, fake, database_url, recruit_spec):
    from tests.server.admin.dashboard_helpers import csrf_from, login

    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    pids = [take_part(rapp, fake, study["id"], f"PPM{i}")[0] for i in range(3)]
    admin = rapp.test_client()
    login(rapp, admin)
    token = csrf_from(admin.get("/admin/experiments/small").get_data(as_text=True))
    form = {"csrf_token": token, "action": "message", "confirmed": "yes",
            "participant": pids[:2], "message_body": "Part 2 opens on Monday: thank you!"}
    empty = admin.post("/admin/experiments/small/actions/apply", data={**form, "message_body": ""})
    assert empty.status_code == 400 and fake.messages == []
    done = admin.post("/admin/experiments/small/actions/apply", data=form)
    assert done.status_code == 200 and "message sent (2 recipient(s))" in done.get_data(as_text=True)
    assert fake.messages == [{"ids": ["PPM0", "PPM1"], "body": "Part 2 opens on Monday: thank you!",
                              "study_id": study["id"]}]
    out = recruit(database_url, recruit_spec, "message", pids[2], "--body", "Reminder")
    assert out.exit_code == 0, out.output
    assert fake.messages[-1]["ids"] == ["PPM2"]
    with rapp.app_context():
        sent = db.session.execute(sa.select(AuditEntry).where(AuditEntry.action == "message")
                                  ).scalars().all()
        assert sorted(a.target for a in sent) == sorted(pids)
        assert {a.detail["message_text"] for a in sent} == {"Part 2 opens on Monday: thank you!",
                                                             "Reminder"}


def test_a_test_run_uses_prolifics_test_participant_flow(rapp, fake, database_url, recruit_spec):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    [draft] = fake.studies.values()
    out = recruit(database_url, recruit_spec, "test")
    assert out.exit_code == 1 and "Create a test participant first" in out.output
    out = recruit(database_url, recruit_spec, "test", "--email", "me+test@lab.example.org")
    assert out.exit_code == 0, out.output
    [copy] = [s for s in fake.studies.values() if s.get("test_of") == draft["id"]]
    assert f"test study {copy['id']}: https://app.prolific.com/studies/{copy['id']}" in out.output
    assert fake.log[-2][1:] == ("/api/v1/researchers/participants/",
                                {"email": "me+test@lab.example.org"})
    assert fake.log[-1][1] == f"/api/v1/studies/{draft['id']}/test-study"
    assert draft["status"] == "UNPUBLISHED"  # the draft itself is not published
    with rapp.app_context():
        meta = db.session.execute(sa.select(Experiment)).scalar_one().recruitment_meta
        assert meta["test_study"]["id"] == copy["id"]


# participant groups: keeping earlier participants out of later studies ------------------------
def grouped_spec(dest, slug="small", **settings):
    """The small experiment under ``slug`` with ``settings`` in its [recruitment.prolific]."""
    spec = write_small_experiment(dest)
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    spec.write_text(spec.read_text().replace('slug = "small"', f'slug = "{slug}"')
                    + RECRUITMENT.replace('device_compatibility = ["desktop"]\n',
                                          'device_compatibility = ["desktop"]\n' + extra))
    return spec


def recruit_as(database_url, spec, slug, *args):
    return CliRunner().invoke(main, ["recruit", "prolific", args[0], slug, *args[1:],
                                     "--experiment", str(spec), "--database-url", database_url])


def test_completers_join_the_group_and_a_later_study_excluding_them_is_hidden_from_them(
        rapp, fake, database_url, tmp_path):
    earlier = grouped_spec(tmp_path / "a", completers_group="digit raters")
    out = recruit_as(database_url, earlier, "small", "create", "--workspace", "ws1")
    assert out.exit_code == 0, out.output
    [group] = fake.groups.values()
    assert (group["name"], group["workspace_id"]) == ("digit raters", "ws1")
    [first] = fake.studies.values()
    assert first["completion_codes"] == [{"code": "CODE1234", "code_type": "COMPLETED", "actions": [
        {"action": "MANUALLY_REVIEW"},
        {"action": "ADD_TO_PARTICIPANT_GROUP", "participant_group": group["id"]}]}]
    assert recruit_as(database_url, earlier, "small", "publish").exit_code == 0
    take_part(rapp, fake, first["id"], "PPG1")  # submits with the code: Prolific adds them
    assert fake.members[group["id"]] == ["PPG1"]
    fake.join(first["id"], "PPG2")  # started, never submitted: not a completer
    assert fake.members[group["id"]] == ["PPG1"]

    later = grouped_spec(tmp_path / "b", "small-two", exclude_previous=["small"])
    out = recruit_as(database_url, later, "small-two", "create")
    assert out.exit_code == 0, out.output
    second = fake.studies[max(fake.studies, key=lambda s: s != first["id"])]
    assert second["filters"] == [
        {"filter_id": "approval_rate", "selected_range": {"lower": 95.0, "upper": 100.0}},
        {"filter_id": "participant_group_blocklist", "selected_values": [group["id"]]},
        {"filter_id": "previous_studies_blocklist", "selected_values": [first["id"]]}]
    assert recruit_as(database_url, later, "small-two", "publish").exit_code == 0
    assert second["id"] not in fake.available("PPG1")  # the completer no longer sees it
    assert second["id"] not in fake.available("PPG2")  # nor does whoever took a place
    assert second["id"] in fake.available("NEW1")
    with pytest.raises(NotEligible):
        fake.join(second["id"], "PPG1")
    fake.join(second["id"], "NEW1")
    fake.groups[group["id"]]["name"] = "renamed on Prolific"  # the stored id is what counts
    out = recruit_as(database_url, earlier, "small", "create", "--force")  # a second listing
    assert out.exit_code == 0, out.output
    assert len(fake.groups) == 1 and [m for m, p, _ in fake.log if "participant-groups" in p] == \
        ["GET", "POST"]  # the first create's look-up and creation; none since


def test_a_group_is_blocklisted_in_a_fake_study_only_for_its_members(fake):
    client = ProlificClient()
    made = client.create_participant_group("ws1", "pilot")
    assert client.add_to_participant_group(made["id"], ["P1", "P2", "P1"])["results"] == [
        {"participant_id": "P1", "datetime_created": None},
        {"participant_id": "P2", "datetime_created": None}]
    assert [g["id"] for g in client.participant_groups("ws1")] == [made["id"]]
    assert client.participant_groups("other") == []
    bad_values = [{"filter_id": "participant_group_blocklist", "selected_values": [7]},
                  {"filter_id": "participant_group_blocklist", "selected_values": ["nosuch"]},
                  {"filter_id": "previous_studies_blocklist", "selected_values": ["nostudy"]}]
    body = plain_body()
    for bad in bad_values:
        with pytest.raises(ProlificError, match="field 'filters'"):
            client.create_study({**body, "filters": [bad]})
    loose = [{"code": "CODE1234", "code_type": "COMPLETED",
              "actions": [{"action": "ADD_TO_PARTICIPANT_GROUP"}]}]
    with pytest.raises(ProlificError, match="needs participant_group"):
        client.create_study({**body, "completion_codes": loose})
    study = client.create_study({**body, "filters": [
        {"filter_id": "participant_group_blocklist", "selected_values": [made["id"]]}]})
    client.transition_study(study["id"], "PUBLISH")
    assert study["id"] not in fake.available("P1") and study["id"] in fake.available("P3")


def plain_body():
    """A valid create-study body (no app needed)."""
    return {"name": "n", "description": "d", "prolific_id_option": "url_parameters",
            "external_study_url": "https://x.example.org/start/s?PROLIFIC_PID={{%PROLIFIC_PID%}}"
                                  "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}",
            "completion_codes": [{"code": "CODE1234", "code_type": "COMPLETED",
                                  "actions": [{"action": "MANUALLY_REVIEW"}]}],
            "total_available_places": 5, "estimated_completion_time": 5, "reward": 100}


def test_an_earlier_experiment_without_a_group_is_excluded_by_its_studies(
        rapp, fake, database_url, recruit_spec, tmp_path):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [first] = fake.studies.values()
    fake.join(first["id"], "PPS1")
    later = grouped_spec(tmp_path / "b", "small-two", exclude_previous=["small"])
    out = recruit_as(database_url, later, "small-two", "create")
    assert out.exit_code == 0, out.output
    [second] = [s for s in fake.studies.values() if s["id"] != first["id"]]
    assert second["filters"][1:] == [{"filter_id": "previous_studies_blocklist",
                                      "selected_values": [first["id"]]}]
    assert recruit_as(database_url, later, "small-two", "publish").exit_code == 0
    assert fake.available("PPS1") == [first["id"]] and second["id"] in fake.available("PPS9")


def test_exclude_previous_and_completers_group_are_checked_before_anything_is_sent(
        rapp, fake, database_url, recruit_spec, tmp_path, monkeypatch):
    monkeypatch.delenv("PROLIFIC_WORKSPACE_ID", raising=False)
    unknown = grouped_spec(tmp_path / "u", "small-two", exclude_previous=["nonesuch"])
    out = recruit_as(database_url, unknown, "small-two", "create")
    assert out.exit_code == 1
    assert (f"{unknown}: recruitment.prolific.exclude_previous: no experiment 'nonesuch' is "
            "served here") in out.output
    own = grouped_spec(tmp_path / "o", "small-two", exclude_previous=["small-two"])
    out = recruit_as(database_url, own, "small-two", "create")
    assert out.exit_code == 1 and "names this experiment itself" in out.output
    unlisted = grouped_spec(tmp_path / "n", "small-two", exclude_previous=["small"])
    out = recruit_as(database_url, unlisted, "small-two", "create")  # "small" has no listing yet
    assert out.exit_code == 1 and ("recruitment.prolific.exclude_previous: experiment 'small' has "
                                   "no Prolific listing or participant group") in out.output
    nowhere = grouped_spec(tmp_path / "w", "small-two", completers_group="raters")
    out = recruit_as(database_url, nowhere, "small-two", "create")
    assert out.exit_code == 1 and f"{nowhere}: recruitment.prolific.completers_group" in out.output
    assert "--workspace" in out.output
    assert fake.log == [] and fake.studies == {} and fake.groups == {}
    for settings, field in [({"exclude_previous": ["Not A Slug"]}, "exclude_previous"),
                            ({"completers_group": " padded "}, "completers_group"),
                            ({"completers_group": ""}, "completers_group")]:
        bad = grouped_spec(tmp_path / field / str(len(str(settings))), **settings)
        with pytest.raises(SpecError, match=rf"recruitment\.prolific\.{field}"):
            load_spec(bad)


def test_dry_run_shows_the_group_requests_and_sends_nothing(rapp, fake, database_url, tmp_path):
    spec = grouped_spec(tmp_path / "a", completers_group="digit raters")
    out = recruit_as(database_url, spec, "small", "create", "--workspace", "ws1", "--dry-run")
    assert out.exit_code == 0, out.output
    assert "GET " in out.output and "/api/v1/participant-groups/?workspace_id=ws1" in out.output
    assert '"name": "digit raters"' in out.output
    assert '"participant_group": "<group-id>"' in out.output
    assert fake.log == [] and fake.groups == {}


def test_groups_lists_creates_and_adds_earlier_completers(rapp, fake, database_url, recruit_spec,
                                                         tmp_path):
    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    done = [take_part(rapp, fake, study["id"], f"PPB{i}")[0] for i in range(2)]
    fake.join(study["id"], "PPB9")  # took a place, never finished here
    out = recruit(database_url, recruit_spec, "groups", "--workspace", "ws1")
    assert out.exit_code == 0 and "no participant groups in workspace ws1" in out.output
    out = recruit(database_url, recruit_spec, "groups", "--workspace", "ws1", "--create")
    assert out.exit_code == 1 and "recruitment.prolific.completers_group is not set" in out.output
    spec = grouped_spec(tmp_path / "a", completers_group="digit raters")
    out = recruit_as(database_url, spec, "small", "groups", "--workspace", "ws1", "--create")
    assert out.exit_code == 0, out.output
    [group] = fake.groups.values()
    assert fake.members[group["id"]] == []
    out = recruit_as(database_url, spec, "small", "groups", "--workspace", "ws1",
                     "--add-completers")
    assert out.exit_code == 0, out.output
    assert list(fake.groups.values()) == [group]  # the stored group, not a second one
    assert group["name"] == "digit raters" and sorted(fake.members[group["id"]]) == ["PPB0",
                                                                                     "PPB1"]
    assert "added 2 completer(s)" in out.output and len(done) == 2
    again = recruit_as(database_url, spec, "small", "groups", "--workspace", "ws1",
                       "--add-completers")
    assert again.exit_code == 0 and len(fake.groups) == 1
    out = recruit(database_url, recruit_spec, "groups", "--workspace", "ws1")
    assert f"{group['id']}  digit raters  2 participant(s)  (this experiment's completers)" in \
        out.output
    with rapp.app_context():
        meta = db.session.execute(sa.select(Experiment)).scalar_one().recruitment_meta
        assert meta["completers_group"] == {"id": group["id"], "name": "digit raters",
                                            "workspace": "ws1"}


# bulk bonuses: one Prolific request per batch, each participant paid exactly once -------------
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the batches, not the backend
def test_200_bonuses_in_batches_are_paid_exactly_once_with_a_503_mid_way(
        rapp, fake, database_url, recruit_spec, monkeypatch):
    from humanlike.server.participants import jobs

    assert recruit(database_url, recruit_spec, "create").exit_code == 0
    assert recruit(database_url, recruit_spec, "publish").exit_code == 0
    [study] = fake.studies.values()
    people = [f"PB{i:04d}" for i in range(200)]
    subs = {who: fake.join(study["id"], who)[0] for who in people}
    with rapp.app_context():  # one participant through the link, 199 more like them
        _, url = fake.join(study["id"], "PB-FIRST")
        start = rapp.test_client().get(f"/start/small?{urlsplit(url).query}")
        first_pid = start.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
        first = row(first_pid)
        columns = {c.key: getattr(first, c.key) for c in Participant.__table__.columns
                   if c.key != "id"}
        db.session.execute(sa.insert(Participant), [
            {**columns, "public_id": f"pb{i:04d}", "platform_id": who, "session_id": subs[who],
             "token_hash": f"{i:064d}"} for i, who in enumerate(people)])
        db.session.delete(first)
        db.session.commit()
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
    monkeypatch.setattr(actions, "BONUS_BATCH", 50)
    fake.pay_faults = {2: "fail", 3: "lose"}  # batch 2: 503, unpaid; batch 3: paid, reply lost

    def bulk_bonus():
        with rapp.app_context():
            job = jobs.enqueue(db.session.get(Experiment, exp.id), "bonus",
                               {"amount": "0.50", "reason": "accuracy"}, "admin:alice",
                               [f"pb{i:04d}" for i in range(200)])
            owner = jobs.new_owner()
            assert jobs.claim(job.id, owner) and jobs.run(job.id, owner)
            return jobs.results(job)

    def statuses():
        with rapp.app_context():
            rows = db.session.execute(sa.select(Participant.public_id, Payment.status).join(
                Payment, Payment.participant_id == Participant.id)).all()
            return [s for _, s in sorted(rows)]

    creates = lambda: [b for m, p, b in fake.log if p == "/api/v1/submissions/bonus-payments/"]  # noqa: E731
    out = bulk_bonus()
    assert len(creates()) == 4 and len(pay_requests(fake)) == 4  # 200 bonuses, 4 requests each
    assert [len(b["csv_bonuses"].split("\n")) for b in creates()] == [50, 50, 50, 50]
    assert statuses() == ["paid"] * 50 + ["unknown"] * 100 + ["paid"] * 50
    assert [r["ok"] for r in out] == [True] * 50 + [False] * 100 + [True] * 50
    assert all("state unknown" in r["message"] for r in out[50:150])
    paid = lambda: [fake.submissions[subs[who]]["bonus_payments"] for who in people]  # noqa: E731
    assert paid() == [[50.0]] * 50 + [[]] * 50 + [[50.0]] * 100  # batch 3 was paid all the same

    out = bulk_bonus()  # at once: every unknown one is checked; none is sent again
    assert len(pay_requests(fake)) == 4
    assert statuses() == ["paid"] * 50 + ["unknown"] * 50 + ["paid"] * 100
    assert all("checked Prolific: not paid yet" in r["message"] for r in out[50:100])
    assert all("checked Prolific: paid" in r["message"] for r in out[100:150])
    assert all("nothing paid again" in r["message"] for r in out[:50] + out[150:])

    with rapp.app_context():  # past the settle wait: batch 2 goes again, in a new bulk bonus
        for payment in db.session.execute(sa.select(Payment).where(
                Payment.status == "unknown")).scalars():
            payment.claimed_at = payment.claimed_at - actions.SETTLE_WAIT - dt.timedelta(seconds=1)
        db.session.commit()
        # one participant of the unpaid batch bonused alone: a bonus of their own, never the
        # batch's (paying that would pay all 50 again)
        single = actions.pay_bonus(row("pb0050"), "admin:alice", "0.50", "accuracy")
        assert single.ok and "checked Prolific: not paid; paid" in single.message
    assert creates()[-1]["csv_bonuses"] == "PB0050,0.50" and len(pay_requests(fake)) == 5
    out = bulk_bonus()
    assert len(creates()) == 6 and len(pay_requests(fake)) == 6
    assert len(creates()[-1]["csv_bonuses"].split("\n")) == 49
    assert len(set(fake.paid)) == len(fake.paid) == 5  # no bulk bonus paid twice
    assert statuses() == ["paid"] * 200 and all(r["ok"] for r in out)
    assert paid() == [[50.0]] * 200  # every participant paid exactly once
    with rapp.app_context():
        totals = db.session.execute(sa.select(Participant.bonus)).scalars().all()
        assert sorted(float(t) for t in totals) == [0.5] * 200
        from decimal import Decimal

        from humanlike.server.admin.listing import money
        # the dashboard's money: each payment keeps its share of its batch's fees (the fake
        # charges a third), so they add up to the batches' fees once; batch 3's reply was lost
        _, bonuses, fees, unknown = money(db.session.get(Experiment, exp.id), 150)
        assert (bonuses, fees, unknown) == (Decimal("100.00"), Decimal("25.00"), 0)  # 150 x 0.50 / 3
    assert bulk_bonus() and len(pay_requests(fake)) == 6  # a fourth run sends nothing


# follow-up waves: wave k listed only to wave k-1's completers, all waves exported together ----
def take_part_in(app, fake, study_id, prolific_pid, slug):
    """``take_part`` for the experiment ``slug`` (a wave's own study link)."""
    sid, url = fake.join(study_id, prolific_pid)
    parts = urlsplit(url)
    assert parts.path == f"/start/{slug}"
    client = app.test_client()
    start = client.get(f"/start/{slug}?{parts.query}")
    assert start.status_code == 302, start.get_data(as_text=True)
    pid = start.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
    page = client.get(f"/task/{pid}").get_data(as_text=True)
    token = re.search(r'"token": ?"([^"]+)"', page).group(1)
    run_participant(client, pid, token, np.random.default_rng(1))
    done = client.post(f"/api/v1/participants/{pid}/complete",
                       headers={"Authorization": f"Bearer {token}"}).get_json()
    fake.complete(sid, urlsplit(done["next"]["url"]).query.removeprefix("cc="))
    return pid


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the listing, not the backend
def test_a_wave_2_study_is_listed_only_to_wave_1_completers_and_exports_with_wave_1(
        fake, database_url, tmp_path):
    from humanlike.server.export.waves import wave_frames, wave_series
    from humanlike.server.export.writer import export_frames
    from humanlike.server.rights.pseudonyms import pseudonym, pseudonymise_frame

    one = grouped_spec(tmp_path / "w1", "small", completers_group="digits wave 1")
    two = grouped_spec(tmp_path / "w2", "small-w2", wave=2, previous_wave="small")
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                      "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(one), str(two)]})
    database.upgrade(app)
    experiments.sync_all(app)
    out = recruit_as(database_url, two, "small-w2", "create")  # wave 1 has no group yet
    assert out.exit_code == 1 and "recruitment.prolific.previous_wave: wave 'small' has no " \
        "completers group" in out.output and fake.studies == {}
    assert recruit_as(database_url, one, "small", "create", "--workspace", "ws1").exit_code == 0
    assert recruit_as(database_url, one, "small", "publish").exit_code == 0
    [first] = fake.studies.values()
    [group] = fake.groups.values()
    with app.app_context():
        take_part_in(app, fake, first["id"], "PW1", "small")  # completes: joins the group
        take_part_in(app, fake, first["id"], "PW3", "small")
    fake.join(first["id"], "PW2")  # took a place, never completed
    out = recruit_as(database_url, two, "small-w2", "create")
    assert out.exit_code == 0, out.output
    [second] = [s for s in fake.studies.values() if s["id"] != first["id"]]
    assert second["filters"][1:] == [{"filter_id": "participant_group_allowlist",
                                      "selected_values": [group["id"]]}]
    assert recruit_as(database_url, two, "small-w2", "publish").exit_code == 0
    assert second["id"] in fake.available("PW1") and second["id"] in fake.available("PW3")
    assert second["id"] not in fake.available("PW2") and second["id"] not in fake.available("PW4")
    out = recruit_as(database_url, two, "small-w2", "remind", "--body", "Wave 2 is open.")
    assert out.exit_code == 0, out.output  # the completers, through the study they took part in
    assert fake.messages == [{"ids": ["PW1", "PW3"], "body": "Wave 2 is open.",
                              "study_id": first["id"]}]
    with pytest.raises(NotEligible):
        fake.join(second["id"], "PW2")
    with app.app_context():
        take_part_in(app, fake, second["id"], "PW1", "small-w2")
    out = recruit_as(database_url, two, "small-w2", "remind", "--body", "Wave 2 closes soon.")
    assert out.exit_code == 0 and fake.messages[-1]["ids"] == ["PW3"]  # PW1 has started
    out = recruit_as(database_url, one, "small", "remind", "--body", "x")
    assert out.exit_code == 1 and "previous_wave is not set" in out.output
    with app.app_context():
        assert wave_series("small-w2") == [(1, "small"), (2, "small-w2")]
        key = b"k" * 32
        frames = wave_frames("small-w2", key)
        each = [export_frames(slug) for slug in ("small", "small-w2")]
    people = frames["participants"]
    assert list(people.columns[:1]) == ["wave"] and people["wave"].tolist() == [1, 1, 2]
    # the same participant in both waves: one pseudonym, keyed with wave 1's slug
    assert people["platform_id"].tolist() == [pseudonym(key, "small", p) for p in
                                              ("PW1", "PW3", "PW1")]
    assert people["participant"].nunique() == 3
    assert people["experiment"].tolist() == ["small", "small", "small-w2"]
    trials = frames["trials"]
    assert (trials["wave"].value_counts().sort_index().tolist()
            == [len(each[0]["trials"]), len(each[1]["trials"])])
    assert len(each[1]["trials"]) > 0
    pd.testing.assert_frame_equal(  # wave 2's rows are wave 2's own export, ids pseudonymised
        trials[trials["wave"] == 2].drop(columns="wave").reset_index(drop=True),
        pseudonymise_frame(each[1]["trials"], key, "small").reset_index(drop=True),
        check_dtype=False)
    by_wave = trials.groupby("wave")["platform_id"].unique()  # PW1's rows join across waves
    assert set(by_wave[1]) & set(by_wave[2]) == {pseudonym(key, "small", "PW1")}
    folder = tmp_path / "waves"
    out = CliRunner().invoke(main, ["export", "small-w2", "--waves", "--pseudonymise", "--out",
                                    str(folder), "--database-url", database_url])
    assert out.exit_code == 0, out.output
    written = pd.read_csv(folder / "participants.csv")
    assert written["wave"].tolist() == [1, 1, 2] and written["platform_id"].str.startswith(
        "pn-").all() and written["platform_id"].iloc[0] == written["platform_id"].iloc[2]
    assert "wave" in json.loads((folder / "codebook.json").read_text())["trials"]
    database.dispose(app)


def test_a_wave_names_its_previous_wave(tmp_path):
    for settings, needle in [({"wave": 2}, "needs previous_wave"),
                             ({"previous_wave": "small"}, "give this experiment's wave"),
                             ({"wave": 2, "previous_wave": "small", "exclude_previous": ["small"]},
                              "both allowed and kept out")]:
        bad = grouped_spec(tmp_path / str(len(str(settings))), "small-w2", **settings)
        with pytest.raises(SpecError, match=needle):
            load_spec(bad)
