"""SONA: entry with the survey code, completion by redirect to the client-side URL, and the
server-side grant sent exactly once per completed participant, across restarts and outages,
against a fake SONA site (tests/server/fake_sona.py) that checks SONA's documented parameters."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.server.extensions import db
from humanlike.server.sources import sona
from humanlike.server.tables.core import AuditEntry, Participant
from humanlike.server.tables.sona import SonaGrant
from tests.server.conftest import auth, enter
from tests.server.fake_sona import CREDIT_TOKEN, EXPERIMENT_ID, RunningSona
from tests.server.sources import answer, app_factory, spec_with

# SONA's documented sample output (sona-systems.com, "Server-Side Completion URL Responses")
DOCUMENTED_SUCCESS = """<WebstudyCreditResponse>
<WebstudyCreditResult>
<a:Errors i:nil="true"/>
<a:Result>
<a:anon_id_code i:nil="true"/> <a:credit_status>G</a:credit_status> <a:email i:nil="true"/>
<a:first_name i:nil="true"/> <a:last_name i:nil="true"/> <a:phone i:nil="true"/>
<a:signup_id>123</a:signup_id> <a:student_id_num i:nil="true"/> <a:survey_code>XXXX</a:survey_code>
<a:user_id i:nil="true"/>
</a:Result> </WebstudyCreditResult> </WebstudyCreditResponse>"""


def _namespaced(body: str) -> str:
    """The sample with the prefixes bound (the sample as printed leaves them unbound)."""
    return body.replace("<WebstudyCreditResponse>", '<WebstudyCreditResponse xmlns:a="urn:a" '
                        'xmlns:i="http://www.w3.org/2001/XMLSchema-instance">', 1)


@pytest.fixture
def source_app(database_url, tmp_path, monkeypatch):
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        yield make


@pytest.fixture
def fake():
    running = RunningSona()
    yield running
    running.stop()


def sona_table(fake, *, client_side: bool = True, server_side: bool = True) -> str:
    lines = ['[platform]', 'preset = "sona"']
    if client_side:
        lines.append(f'completion_url = "{fake.fake.client_side_url}"')
    else:
        lines.append('completion = "page"')
    if server_side:
        lines.append(f'server_completion_url = "{fake.fake.server_side_url}"')
    return "\n".join(lines) + "\n"


@pytest.fixture
def sona_spec(small_experiment, tmp_path, fake):
    return spec_with(small_experiment, tmp_path / "sona", sona_table(fake))


def finish(client, pid, token):
    answer(client, pid, token)
    return client.post(f"/api/v1/participants/{pid}/complete", headers=auth(token))


def grant_rows():
    return list(db.session.execute(sa.select(SonaGrant).order_by(SonaGrant.id)).scalars())


# --- the reply ----------------------------------------------------------------------------

def test_the_documented_success_reply_is_a_grant():
    reply = sona.parse_reply(_namespaced(DOCUMENTED_SUCCESS))
    assert (reply.granted, reply.credit_status, reply.error) == (True, "G", None)


@pytest.mark.parametrize(("xml", "granted", "already", "error"), [
    ('<R xmlns:a="urn:a"><a:Errors><a:string>Invalid survey_code.</a:string></a:Errors>'
     '<a:Result xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:nil="true"/></R>',
     False, False, "Invalid survey_code."),
    ('<R xmlns:a="urn:a"><a:Errors><a:string>You have already received credit for this study.'
     '</a:string></a:Errors></R>', True, True, "already"),
    ('<R xmlns:a="urn:a"><a:Result><a:credit_status>N</a:credit_status></a:Result></R>',
     False, False, "credit_status 'N'"),
    ("<html>Server Error</html>", False, False, "neither Errors nor Result"),
    ("not xml at all", False, False, "not XML"),
])
def test_a_refusal_or_an_odd_reply_is_not_a_grant(xml, granted, already, error):
    reply = sona.parse_reply(xml)
    assert (reply.granted, reply.already) == (granted, already)
    assert error in (reply.error or "")


# --- entry and completion -----------------------------------------------------------------

def test_a_sona_arrival_is_credited_once_and_sent_to_the_client_side_url(source_app, sona_spec,
                                                                           fake):
    app = source_app(sona_spec)
    code = fake.fake.sign_up()
    client = app.test_client()
    pid, token = enter(client, f"survey_code={code}")
    done = finish(client, pid, token)
    assert done.status_code == 200
    assert done.get_json()["next"] == {"kind": "redirect", "url": (
        f"{fake.fake.url}/webstudy_credit.aspx?experiment_id={EXPERIMENT_ID}"
        f"&credit_token={CREDIT_TOKEN}&survey_code={code}")}
    [call] = fake.fake.server_calls()
    assert (call.method, call.outcome, call.args) == ("GET", "granted", {
        "experiment_id": [EXPERIMENT_ID], "credit_token": [CREDIT_TOKEN], "survey_code": [code]})
    # the browser's completion replayed (a lost reply): acknowledged, nothing sent again
    assert client.post(f"/api/v1/participants/{pid}/complete", headers=auth(token)).status_code == 200
    assert len(fake.fake.server_calls()) == 1 and fake.fake.credited(code) == 1
    with app.app_context():
        [grant] = grant_rows()
        assert (grant.state, grant.attempts, grant.last_error) == ("granted", 1, None)
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.platform, row.platform_id) == ("sona", code)
        [audited] = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "sona_grant")).scalars()
        assert (audited.target, audited.detail["state"], audited.detail["credit_status"]) == (
            pid, "granted", "G")
        assert CREDIT_TOKEN not in str(audited.detail)


def test_the_same_survey_code_resumes_and_a_malformed_one_is_refused(source_app, sona_spec, fake):
    app = source_app(sona_spec)
    code = fake.fake.sign_up()
    pid, token = enter(app.test_client(), f"survey_code={code}")
    answer(app.test_client(), pid, token, upto=2)
    again, _ = enter(app.test_client(), f"survey_code={code}")  # another browser, same sign-up
    assert again == pid
    bad = app.test_client().get("/start/small?survey_code=12%3Cscript%3E")
    assert bad.status_code == 400 and "survey_code" in bad.get_data(as_text=True)
    empty = app.test_client().get("/start/small?survey_code=")
    assert empty.status_code == 400
    with app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(Participant)
                                  ).scalar_one() == 1


def test_a_restart_mid_task_still_grants_exactly_once(source_app, sona_spec, fake):
    """The study server stops half way through the task; a new server process (a new app on the
    same database) takes the participant back by the survey code, and the grant goes out once."""
    first = source_app(sona_spec)
    code = fake.fake.sign_up()
    pid, token = enter(first.test_client(), f"survey_code={code}")
    answer(first.test_client(), pid, token, upto=4)
    from humanlike.server import database

    database.dispose(first)  # the server is gone
    second = source_app(sona_spec)
    client = second.test_client()
    again, token2 = enter(client, f"survey_code={code}")
    assert again == pid
    assert finish(client, pid, token2).status_code == 200
    assert len(fake.fake.server_calls(code)) == 1 and fake.fake.credited(code) == 1


def test_sona_down_at_completion_then_a_restart_sends_the_grant_once(source_app, sona_spec, fake):
    """SONA is unreachable when the participant completes: the completion still succeeds and the
    grant waits (pending, the error kept); after a restart the browser's replayed completion
    sends it, once; the next completion of the study also flushes what is pending."""
    app = source_app(sona_spec)
    code, later = fake.fake.sign_up(), fake.fake.sign_up()
    client = app.test_client()
    pid, token = enter(client, f"survey_code={code}")
    fake.stop()
    done = finish(client, pid, token)
    assert done.status_code == 200 and done.get_json()["next"]["kind"] == "redirect"
    with app.app_context():
        [grant] = grant_rows()
        assert grant.state == "pending" and "Connect" in (grant.last_error or "")
    fake.start()
    restarted = source_app(sona_spec)
    replay = restarted.test_client().post(f"/api/v1/participants/{pid}/complete",
                                          headers=auth(token))
    assert replay.status_code == 200
    assert [c.outcome for c in fake.fake.server_calls(code)] == ["granted"]
    # a second pending grant (SONA answered 503 once) goes out with the next participant's completion
    fake.fake.fail_next = 1
    c2 = restarted.test_client()
    pid2, token2 = enter(c2, f"survey_code={later}")
    finish(c2, pid2, token2)
    assert [c.outcome for c in fake.fake.server_calls(later)] == ["unavailable"]
    c3 = restarted.test_client()
    third = fake.fake.sign_up()
    pid3, token3 = enter(c3, f"survey_code={third}")
    finish(c3, pid3, token3)
    assert [c.outcome for c in fake.fake.server_calls(later)] == ["unavailable", "granted"]
    assert all(fake.fake.credited(c) == 1 for c in (code, later, third))
    assert len(fake.fake.server_calls()) == 4


def test_a_sender_that_died_mid_call_is_resent_and_counted_once(source_app, sona_spec, fake):
    """A claim left by a sender that died after SONA credited the code: once stale it is sent
    again; SONA answers "already received credit", which is recorded as granted."""
    app = source_app(sona_spec)
    code = fake.fake.sign_up()
    client = app.test_client()
    pid, token = enter(client, f"survey_code={code}")
    fake.stop()
    finish(client, pid, token)
    fake.start()
    with app.app_context():
        [grant] = grant_rows()
        import httpx

        assert httpx.get(grant.url).status_code == 200  # the dead sender's call reached SONA
        grant.state, grant.claimed_at = "sending", sona.utcnow() - dt.timedelta(minutes=1)
        db.session.commit()
        assert sona.waiting() == []  # claimed a minute ago: not stale yet (two minutes)
        app.config["SONA_CLAIM_SECONDS"] = 30
        assert sona.waiting() == [grant.id]
        assert sona.send(grant.id) == "granted"
        assert sona.grant_state(db.session.get(Participant, grant.participant_id)) == "granted"
    assert fake.fake.credited(code) == 1
    assert [c.outcome for c in fake.fake.server_calls(code)] == ["granted", "already"]


def test_two_senders_at_once_send_one_request(source_app, sona_spec, fake):
    app = source_app(sona_spec)
    code = fake.fake.sign_up()
    client = app.test_client()
    pid, token = enter(client, f"survey_code={code}")
    fake.stop()
    finish(client, pid, token)
    fake.start()
    fake.fake.hold = threading.Event()
    states: list[str] = []

    def sender():
        with app.app_context():
            waiting = sona.waiting()  # read once: the other sender may claim it in between
            states.append(sona.send(waiting[0]) if waiting else "none")

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(0.5)
    fake.fake.hold.set()
    for t in threads:
        t.join(10)
    assert sorted(states) in (["granted", "sending"], ["granted", "none"])
    assert len(fake.fake.server_calls(code)) == 1


def test_a_refused_grant_is_visible_and_retried_by_hand_from_the_cli(source_app, sona_spec, fake,
                                                                       database_url):
    """SONA refuses (the survey code is not one of this study's yet): the grant is 'failed' with
    SONA's message, not retried automatically; ``humanlike sona grants --retry`` sends it again."""
    from humanlike.cli import main

    app = source_app(sona_spec)
    client = app.test_client()
    pid, token = enter(client, "survey_code=99999")
    finish(client, pid, token)
    with app.app_context():
        [grant] = sona.grants("small")
        assert (grant["participant"], grant["survey_code"], grant["state"]) == (
            pid, "99999", "failed")
        assert "Invalid survey_code" in grant["last_error"]
        assert sona.waiting() == []
    listed = CliRunner().invoke(main, ["sona", "grants", "small", "--database-url", database_url])
    assert listed.exit_code == 1, listed.output  # a grant not credited: non-zero, for cron mail
    assert "failed" in listed.output and "99999" in listed.output
    fake.fake.codes.add("99999")  # the pool's admin fixes the sign-up
    retried = CliRunner().invoke(main, ["sona", "grants", "small", "--retry",
                                        "--database-url", database_url])
    assert retried.exit_code == 0, retried.output
    assert "granted" in retried.output
    assert fake.fake.credited("99999") == 1
    with app.app_context():
        actors = [a.actor for a in db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "sona_grant").order_by(AuditEntry.id)).scalars()]
        assert actors[0] == "server" and actors[1].startswith("cli:")


def test_the_dashboard_retries_one_participants_grant(source_app, sona_spec, fake):
    app = source_app(sona_spec)
    client = app.test_client()
    pid, token = enter(client, "survey_code=88888")
    finish(client, pid, token)
    fake.fake.codes.add("88888")
    with app.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert sona.grant_state(row) == "failed"
        assert sona.retry_one(row, actor="admin:alice") == "granted"
        assert sona.retry_one(row, actor="admin:alice") == "granted"  # done: nothing sent again
        assert sona.grant_state(row) == "granted"
    assert [c.outcome for c in fake.fake.server_calls("88888")] == ["bad_code", "granted"]


def test_without_a_server_side_url_no_grant_is_recorded(source_app, small_experiment, tmp_path,
                                                         fake):
    spec = spec_with(small_experiment, tmp_path / "client-only", sona_table(fake, server_side=False))
    app = source_app(spec)
    code = fake.fake.sign_up()
    client = app.test_client()
    pid, token = enter(client, f"survey_code={code}")
    assert finish(client, pid, token).get_json()["next"]["url"].endswith(f"survey_code={code}")
    assert fake.fake.server_calls() == []
    with app.app_context():
        assert grant_rows() == []
