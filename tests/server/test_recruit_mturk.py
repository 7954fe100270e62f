"""MTurk through botocore's Stubber (every request validated against the MTurk service model and
compared with the expected parameters): create HIT (an http URL refused), list assignments page by
page, sync, approve (and un-reject), reject (feedback required), a bonus retried with the same
UniqueRequestToken, expire / extend / notify."""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
import sqlalchemy as sa
from botocore.stub import ANY, Stubber

from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.live.sync import apply
from humanlike.server.participants import actions
from humanlike.server.sources import mturk
from humanlike.server.sources.mturk import MTurkClient, MTurkRecruiter, hit_params
from humanlike.server.study import experiments
from humanlike.server.study.spec import SpecError, load_spec
from humanlike.server.tables.core import Experiment, Participant, Payment
from tests.server.conftest import enter, write_small_experiment

GOOD_MESSAGE = ("Your submission could not be approved because the attention checks embedded in "
                "the task were answered incorrectly on most occasions.")
RECRUITMENT = """
[recruitment]
public_url = "https://study.example.org"

[recruitment.mturk]
sandbox = true
title = "Rate handwritten digits"
description = "Rate how much each image looks like each digit."
keywords = ["digits", "rating"]
reward = "1.50"
assignments = 30
duration_minutes = 45
lifetime_hours = 48
auto_approve_hours = 72

[[recruitment.mturk.qualifications]]
qualification = "approval_rate"
comparator = "GreaterThanOrEqualTo"
values = [95]

[[recruitment.mturk.qualifications]]
qualification = "number_approved"
comparator = "GreaterThan"
values = [500]

[[recruitment.mturk.qualifications]]
qualification = "locale"
comparator = "In"
locales = ["US", "GB", "CA-ON"]

[[recruitment.mturk.qualifications]]
qualification = "masters"

[[recruitment.mturk.qualifications]]
qualification = "3TDQPWMDS877YXAXCWP6LHT0FJRANT"
comparator = "DoesNotExist"
"""


@pytest.fixture(scope="module")
def mturk_spec(tmp_path_factory):
    spec = write_small_experiment(tmp_path_factory.mktemp("mturk"))
    text = spec.read_text().replace('platform = "prolific"', 'platform = "mturk"')
    spec.write_text(text + RECRUITMENT)
    return spec


@pytest.fixture
def stubbed():
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=mturk.ENDPOINTS[True],
                          aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
    with Stubber(client) as stub:
        yield MTurkClient(sandbox=True, client=client), stub
        stub.assert_no_pending_responses()


@pytest.fixture
def mapp(database_url, mturk_spec, stubbed, monkeypatch, tmp_path):
    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(mturk_spec)]})
    database.upgrade(application)
    experiments.sync_all(application)
    client, _ = stubbed
    actions.register_recruiter("mturk", lambda exp: MTurkRecruiter(client, exp))
    yield application
    actions._RECRUITERS.pop("mturk", None)
    database.dispose(application)


def worker(mapp, worker_id, assignment):
    client = mapp.test_client()
    pid, _ = enter(client, f"workerId={worker_id}&assignmentId={assignment}&hitId=HIT1"
                           "&turkSubmitTo=https://workersandbox.mturk.com")
    with mapp.app_context():
        row = db.session.execute(sa.select(Participant).where(Participant.public_id == pid)
                                 ).scalar_one()
        row.status = "completed"
        db.session.commit()
    return pid


def load(pid):
    return db.session.execute(sa.select(Participant).where(Participant.public_id == pid)).scalar_one()


def test_create_hit_sends_an_https_external_question_and_the_qualifications(mturk_spec, stubbed):
    client, stub = stubbed
    params = hit_params(load_spec(mturk_spec))
    assert params["Question"] == (
        '<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/'
        '2006-07-14/ExternalQuestion.xsd"><ExternalURL>https://study.example.org/start/small'
        "</ExternalURL><FrameHeight>0</FrameHeight></ExternalQuestion>")
    assert params["QualificationRequirements"] == [
        {"QualificationTypeId": "000000000000000000L0", "Comparator": "GreaterThanOrEqualTo",
         "IntegerValues": [95], "ActionsGuarded": "Accept"},
        {"QualificationTypeId": "00000000000000000040", "Comparator": "GreaterThan",
         "IntegerValues": [500], "ActionsGuarded": "Accept"},
        {"QualificationTypeId": "00000000000000000071", "Comparator": "In",
         "LocaleValues": [{"Country": "US"}, {"Country": "GB"},
                          {"Country": "CA", "Subdivision": "ON"}], "ActionsGuarded": "Accept"},
        {"QualificationTypeId": "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6", "Comparator": "Exists",
         "ActionsGuarded": "Accept"},
        {"QualificationTypeId": "3TDQPWMDS877YXAXCWP6LHT0FJRANT", "Comparator": "DoesNotExist",
         "ActionsGuarded": "Accept"},
    ]
    assert (params["Reward"], params["MaxAssignments"], params["AssignmentDurationInSeconds"],
            params["LifetimeInSeconds"]) == ("1.50", 30, 45 * 60, 48 * 3600)
    stub.add_response("create_hit", {"HIT": {"HITId": "HIT1", "HITTypeId": "T1",
                                             "HITStatus": "Assignable"}}, expected_params=params)
    assert client.create_hit(params)["HITId"] == "HIT1"
    for url in ("http://study.example.org", "ftp://study.example.org", "https://"):
        with pytest.raises(actions.ActionError, match="https") as err:
            hit_params(load_spec(mturk_spec), url)
        assert err.value.field == "recruitment.public_url"


def test_live_hits_use_the_live_masters_id(mturk_spec, tmp_path):
    spec = tmp_path / "experiment.toml"
    write_small_experiment(tmp_path)
    spec.write_text(spec.read_text() + RECRUITMENT.replace("sandbox = true", "sandbox = false"))
    [masters] = [q for q in hit_params(load_spec(spec))["QualificationRequirements"]
                 if q["Comparator"] == "Exists"]
    assert masters["QualificationTypeId"] == "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH"
    spec.write_text(spec.read_text().replace('reward = "1.50"', "reward = 1.5"))
    with pytest.raises(SpecError, match=r"recruitment\.mturk\.reward"):
        load_spec(spec)


def test_assignments_are_listed_page_by_page_and_synced(mapp, stubbed):
    client, stub = stubbed
    a = worker(mapp, "W1", "A1")
    b = worker(mapp, "W2", "A2")
    statuses = ["Submitted", "Approved", "Rejected"]
    stub.add_response("list_assignments_for_hit", {
        "NextToken": "page2", "NumResults": 1,
        "Assignments": [{"AssignmentId": "A1", "WorkerId": "W1", "HITId": "HIT1",
                         "AssignmentStatus": "Submitted"}]},
        expected_params={"HITId": "HIT1", "MaxResults": 100, "AssignmentStatuses": statuses})
    stub.add_response("list_assignments_for_hit", {
        "NumResults": 2,
        "Assignments": [{"AssignmentId": "A2", "WorkerId": "W2", "HITId": "HIT1",
                         "AssignmentStatus": "Approved"},
                        {"AssignmentId": "A9", "WorkerId": "W9", "HITId": "HIT1",
                         "AssignmentStatus": "Submitted"}]},
        expected_params={"HITId": "HIT1", "MaxResults": 100, "AssignmentStatuses": statuses,
                         "NextToken": "page2"})
    from humanlike.cli.recruit import fetch_records

    with mapp.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        report = apply(exp, list(fetch_records("mturk", client, "HIT1")))
        assert (load(a).status, load(b).status) == ("submitted", "approved")
        assert report.unknown == ["W9"] and len(report.changed) == 2 and report.seen == 3


def test_approve_reject_and_unreject_through_the_actions(mapp, stubbed):
    client, stub = stubbed
    a = worker(mapp, "W1", "A1")
    b = worker(mapp, "W2", "A2")
    stub.add_response("approve_assignment", {}, expected_params={"AssignmentId": "A1"})
    stub.add_response("reject_assignment", {},
                      expected_params={"AssignmentId": "A2", "RequesterFeedback": GOOD_MESSAGE})
    with mapp.app_context():
        assert actions.approve(load(a), "admin:alice").ok and load(a).status == "approved"
        with pytest.raises(actions.ActionError, match="100 characters"):
            actions.reject(load(b), "admin:alice", "", None)
        result = actions.reject(load(b), "admin:alice", GOOD_MESSAGE, None)
        assert result.ok and load(b).status == "rejected"
    with pytest.raises(actions.ActionError, match="feedback"):
        client.reject("A2", "  ")
    stub.add_response("approve_assignment", {},
                      expected_params={"AssignmentId": "A2", "OverrideRejection": True})
    with mapp.app_context():
        with pytest.raises(actions.ActionError, match="cannot unreject"):
            mturk.unreject(load(a), "admin:alice")  # approved, not rejected
        result = mturk.unreject(load(b), "admin:alice")
        assert result.ok and load(b).status == "approved" and result.detail["override_rejection"]


def test_a_bonus_retried_after_a_failure_sends_the_same_unique_request_token(mapp, stubbed):
    _client, stub = stubbed
    a = worker(mapp, "W1", "A1")
    with mapp.app_context():
        expected = {"WorkerId": "W1", "AssignmentId": "A1", "BonusAmount": "0.80",
                    "Reason": "accuracy", "UniqueRequestToken": ANY}
        stub.add_client_error("send_bonus", service_error_code="ServiceFault",
                              service_message="try again", http_status_code=500,
                              expected_params=expected)
        first = actions.pay_bonus(load(a), "admin:alice", "0.80", "accuracy")
        assert not first.ok and "ServiceFault" in first.message
        [payment] = db.session.execute(sa.select(Payment)).scalars()
        key = payment.idempotency_key
        assert payment.status == "failed"
        stub.add_response("send_bonus", {}, expected_params={**expected, "UniqueRequestToken": key})
        assert actions.pay_bonus(load(a), "admin:alice", "0.80", "accuracy").ok
        third = actions.pay_bonus(load(a), "admin:alice", "0.80", "accuracy")
        assert third.ok and third.detail["duplicate"]  # no third request (the stub would fail)
        assert float(load(a).bonus) == 0.80


def test_a_retry_mturk_already_honoured_counts_as_paid(mapp, stubbed):
    _client, stub = stubbed
    a = worker(mapp, "W1", "A1")
    with mapp.app_context():
        stub.add_client_error(
            "send_bonus", service_error_code="RequestError", http_status_code=400,
            service_message="The value of UniqueRequestToken has already been used (request id "
                            "1234)")
        result = actions.pay_bonus(load(a), "admin:alice", "0.80", "accuracy")
        assert result.ok and result.reply["already_paid"]


def test_expire_extend_and_notify(stubbed):
    client, stub = stubbed
    stub.add_response("update_expiration_for_hit", {},
                      expected_params={"HITId": "HIT1",
                                       "ExpireAt": dt.datetime(2015, 1, 1, tzinfo=dt.UTC)})
    client.expire("HIT1")
    stub.add_response("update_expiration_for_hit", {},
                      expected_params={"HITId": "HIT1", "ExpireAt": ANY})
    stub.add_response("create_additional_assignments_for_hit", {},
                      expected_params={"HITId": "HIT1", "NumberOfAdditionalAssignments": 10,
                                       "UniqueRequestToken": "tok1"})
    client.extend("HIT1", hours=24, assignments=10, token="tok1")
    ids = [f"W{i}" for i in range(150)]
    for chunk in (ids[:100], ids[100:]):
        stub.add_response("notify_workers", {"NotifyWorkersFailureStatuses": []},
                          expected_params={"Subject": "Part 2", "MessageText": "Open now",
                                           "WorkerIds": chunk})
    assert len(client.notify(ids, "Part 2", "Open now")) == 2


def test_dry_run_validates_against_the_service_model_and_sends_nothing(mturk_spec, capsys):
    client = MTurkClient(sandbox=True, dry_run=True,
                         client=boto3.client("mturk", region_name="us-east-1",
                                             aws_access_key_id="x", aws_secret_access_key="y"))
    client.create_hit(hit_params(load_spec(mturk_spec)))
    out = capsys.readouterr().out
    assert out.startswith("CreateHIT https://mturk-requester-sandbox.us-east-1.amazonaws.com\n")
    assert '"Reward": "1.50"' in out
    with pytest.raises(mturk.MTurkError, match="MaxAssignments"):
        client.call("CreateHIT", **{**hit_params(load_spec(mturk_spec)), "MaxAssignments": "30"})


def test_the_cli_records_lists_and_syncs_a_hit(mapp, stubbed, database_url, mturk_spec,
                                               monkeypatch):
    from click.testing import CliRunner

    from humanlike.cli import main

    client, stub = stubbed
    monkeypatch.setattr(mturk.boto3, "client", lambda *a, **k: client.client)
    monkeypatch.setenv(mturk.ENDPOINT_VARIABLE, mturk.ENDPOINTS[True])  # MTurk closed: explicit
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")  # the standard chain finds these
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")

    def run(*args):
        return CliRunner().invoke(main, ["recruit", "mturk", args[0], "small", *args[1:],
                                         "--experiment", str(mturk_spec),
                                         "--database-url", database_url])

    out = run("create")
    assert out.exit_code == 0, out.output
    assert "CreateHIT https://mturk-requester-sandbox" in out.output  # printed, not sent
    assert run("publish", "--dry-run").exit_code == 0
    params = hit_params(load_spec(mturk_spec))
    stub.add_response("create_hit", {"HIT": {"HITId": "HIT1", "HITStatus": "Assignable"}},
                      expected_params=params)
    out = run("publish")
    assert out.exit_code == 0 and "HIT HIT1 listed" in out.output, out.output
    assert run("publish").exit_code == 1  # listed once
    a = worker(mapp, "W1", "A1")
    stub.add_response("list_assignments_for_hit", {"Assignments": [
        {"AssignmentId": "A1", "WorkerId": "W1", "HITId": "HIT1",
         "AssignmentStatus": "Submitted"}]}, expected_params={
        "HITId": "HIT1", "MaxResults": 100,
        "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]})
    out = run("sync")
    assert out.exit_code == 0, out.output
    stub.add_response("approve_assignment", {}, expected_params={"AssignmentId": "A1"})
    out = run("approve", "W1")
    assert out.exit_code == 0 and '"local_only": false' in out.output, out.output
    stub.add_response("update_expiration_for_hit", {}, expected_params={
        "HITId": "HIT1", "ExpireAt": dt.datetime(2015, 1, 1, tzinfo=dt.UTC)})
    assert run("stop").exit_code == 0
    with mapp.app_context():
        assert load(a).status == "approved"
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert (exp.recruitment_ref, exp.recruitment_meta["sandbox"],
                exp.recruitment_meta["status"]) == ("HIT1", True, "expired")


def test_mturk_commands_on_a_default_configuration_stop_with_the_closure_notice(
        mapp, database_url, mturk_spec, monkeypatch):
    """MTurk closed on 2026-09-30: without an explicit endpoint no requester client is built and
    nothing is recorded; a dry run (which sends nothing) still validates and prints."""
    from click.testing import CliRunner

    from humanlike.cli import main
    from humanlike.server.sources.recruiters import mturk_recruiter

    monkeypatch.delenv(mturk.ENDPOINT_VARIABLE, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")  # credentials are not what is missing
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")

    def run(*args):
        return CliRunner().invoke(main, ["recruit", "mturk", args[0], "small", *args[1:],
                                         "--experiment", str(mturk_spec),
                                         "--database-url", database_url])

    dry = run("create", "--dry-run")
    assert dry.exit_code == 0 and "CreateHIT" in dry.output, dry.output
    built = []
    monkeypatch.setattr(mturk.boto3, "client", lambda *a, **k: built.append(a) or pytest.fail(
        "a requester client was built"))
    for command in ("publish", "create", "status", "sync", "stop"):
        out = run(command)
        assert out.exit_code == 1, (command, out.output)
        assert "Amazon Mechanical Turk closed permanently on 2026-09-30" in out.output
        assert mturk.ENDPOINT_VARIABLE in out.output
    with pytest.raises(mturk.MTurkClosed, match="2026-09-30"):
        MTurkClient(sandbox=False)
    monkeypatch.setenv(mturk.ENDPOINT_VARIABLE, "http://mturk.example")
    with pytest.raises(mturk.MTurkClosed, match="https://"):
        MTurkClient(sandbox=False)
    assert built == []
    with mapp.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert (exp.recruitment_ref, exp.recruitment_meta) == (None, None)
        exp.recruitment_ref = "HIT-OLD"  # a HIT made before the closure: actions stay local
        monkeypatch.delenv(mturk.ENDPOINT_VARIABLE)
        assert mturk_recruiter(exp) is None
