"""The experiment page's safety pieces (issues 28 and 29), from a study run through the real API
against the fake SONA site (tests/server/fake_sona.py): a wave of careless participants trips the
circuit breaker, whose banner shows the reason and the numbers and whose "Resume recruitment" is a
confirmed, audited CSRF POST; a participant refused on their return is listed for a payment
decision; a withdrawal is counted; the SONA grants are listed and a failed or pending one is
retried from the page, once confirmed; the participant page says where their SONA credit stands."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.live import breaker
from humanlike.server.participants import resume_policy
from humanlike.server.sources import sona
from humanlike.server.tables.breaker import BreakerTrip
from humanlike.server.tables.core import AuditEntry, Experiment
from tests.server.admin.dashboard_helpers import csrf_from, login, run_participant
from tests.server.conftest import enter
from tests.server.fake_sona import RunningSona
from tests.server.sources import answer, app_factory, spec_with

RULES = "\n[breaker]\nmin_participants = 5\nwindow_minutes = 60\n\n[resume]\nmax_age_minutes = 60\n"
UNKNOWN_CODE = "99999"  # not a sign-up of the study on SONA: the grant is refused (failed)


def own_address(app, number: int):
    """A test client sending from its own address: the breaker counts each source once."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = f"198.51.100.{number + 1}"
    return client


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture
def fake():
    running = RunningSona()
    yield running
    running.stop()


@pytest.fixture
def source_app(database_url, tmp_path, monkeypatch):
    monkeypatch.setattr(breaker, "TALLY", breaker.ErrorTally())
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        yield make


def sona_spec(small_experiment, tmp_path, fake, extra: str = RULES):
    table = (f'[platform]\npreset = "sona"\ncompletion_url = "{fake.fake.client_side_url}"\n'
             f'server_completion_url = "{fake.fake.server_side_url}"\n')
    return spec_with(small_experiment, tmp_path / "sona", table + extra)


@pytest.fixture
def study(source_app, small_experiment, tmp_path, fake, monkeypatch):
    """One participant withdraws mid-study, one is refused on return (61 minutes away, 3 trials
    stored), then five careless ones complete: grants 1-3 credited, 4 refused by SONA (unknown
    survey code), 5 left pending (SONA answers 503); the fifth trips the breaker."""
    app = source_app(sona_spec(small_experiment, tmp_path, fake))
    people: dict[str, str] = {}
    client = app.test_client()
    pid, token = enter(client, f"survey_code={fake.fake.sign_up()}")
    answer(client, pid, token, 2)
    form = client.get(f"/withdraw/{pid}").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    assert client.post(f"/withdraw/{pid}", data={"csrf_token": csrf, "token": token,
                                                 "confirm": "yes"}).status_code == 200
    code = fake.fake.sign_up()
    client = app.test_client()
    pid, token = enter(client, f"survey_code={code}")
    people["n_trials"] = str(answer(client, pid, token, 3))
    later = resume_policy.utcnow() + dt.timedelta(minutes=61)
    monkeypatch.setattr(resume_policy, "utcnow", lambda: later)
    assert app.test_client().get(f"/start/small?survey_code={code}").status_code == 409
    people["refused"] = pid
    for number in range(1, 6):
        code = UNKNOWN_CODE if number == 4 else fake.fake.sign_up()
        fake.fake.fail_next = 1 if number == 5 else 0
        people[f"careless{number}"] = run_participant(own_address(app, number),
                                                      f"survey_code={code}")
        people[f"code{number}"] = code
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        states = {g["participant"]: g["state"] for g in sona.grants("small")}
        assert breaker.notice(exp) is not None
    assert states == {people["careless1"]: "granted", people["careless2"]: "granted",
                      people["careless3"]: "granted", people["careless4"]: "failed",
                      people["careless5"]: "pending"}
    admin = app.test_client()
    login(app, admin)
    return app, admin, people


def test_the_page_shows_the_trip_the_refusal_the_withdrawal_and_the_grants(study):
    app, admin, people = study
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    page = text(html)
    # the banner: when, why, the numbers against the spec's limits, what the platform was told
    with app.app_context():
        trip = db.session.execute(sa.select(BreakerTrip)).scalar_one()
    assert f'data-trip="{trip.id}"' in html
    assert "Recruitment paused by the circuit breaker" in page
    assert trip.tripped_at.strftime("%Y-%m-%d %H:%M") in page
    assert "6 arrived · 5 finished · 0 returned" in page  # the withdrawn one's rows are gone
    assert "0 declined (not counted) · 5 sources counted" in page
    assert re.search(r'data-rule="qc_fail_share" data-fired="yes"', html)
    assert "failed QC 5 of 5 finished (100%) above 50% tripped" in page
    assert re.search(r'data-rule="return_share" data-fired="no"', html)
    assert "local only (no Prolific listing or token): the study link is closed to newcomers" in page
    # refused on return: the participant, status, trials stored of total, why, how long away
    row = text(re.search(r'<tr data-refused="[^"]+">.*?</tr>', html, re.S).group(0))
    assert f'data-refused="{people["refused"]}"' in html
    assert f"{people['refused']} started 3 of {people['n_trials']}" in row
    assert "away longer than the study allows (60 min)" in row and "61 min" in row
    # the withdrawal among the counts
    assert "1 withdrew (their data deleted)" in page
    # SONA: one row per grant, a Retry form on the failed and the pending one only
    for number, state in ((1, "granted"), (4, "failed"), (5, "pending")):
        assert re.search(rf'data-grant="{people[f"careless{number}"]}" data-state="{state}"', html)
    retry = re.findall(r'action="/admin/experiments/small/sona/([^/]+)/retry"', html)
    assert sorted(retry) == sorted([people["careless4"], people["careless5"]])
    assert "Invalid survey_code" in page and "HTTP 503" in page
    # survey codes are platform ids: shown only once revealed (an audited POST)
    assert people["code4"] not in page and people["code1"] not in page
    admin.post("/admin/experiments/small/reveal", data={"csrf_token": csrf_from(html)})
    page = text(admin.get("/admin/experiments/small").get_data(as_text=True))
    assert people["code4"] in page and people["code1"] in page


def test_resume_recruitment_needs_csrf_a_tick_and_a_note_and_is_audited(study):
    app, admin, _ = study
    url = "/admin/experiments/small/breaker/resume"
    token = csrf_from(admin.get("/admin/experiments/small").get_data(as_text=True))
    note = "the link was posted on a forum; removed"
    refused = [admin.post(url, data={"confirmed": "yes", "note": note}),  # no CSRF token
               admin.post(url, data={"csrf_token": token, "note": note}),  # not ticked
               admin.post(url, data={"csrf_token": token, "confirmed": "yes", "note": " "})]
    assert [r.status_code for r in refused] == [400, 400, 400]
    assert "tick" in refused[1].get_data(as_text=True)
    assert "note" in refused[2].get_data(as_text=True)
    with app.app_context():
        assert breaker.paused(db.session.execute(sa.select(Experiment)).scalar_one())
    done = admin.post(url, data={"csrf_token": token, "confirmed": "yes", "note": note})
    assert done.status_code == 302 and done.headers["Location"].endswith("/admin/experiments/small")
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment)).scalar_one()
        assert not breaker.paused(exp)
        [entry] = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "breaker_resume")).scalars()
        trip = db.session.execute(sa.select(BreakerTrip)).scalar_one()
    assert (entry.actor, entry.detail["note"], trip.resumed_by) == ("admin:alice", note,
                                                                     "admin:alice")
    # no Prolific listing here: the audit and the page say the study link is open again
    assert entry.detail["platform_action"] == ("local only (no Prolific listing or token): the "
                                               "study link is open again")
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    assert "data-trip=" not in html
    assert "Recruitment resumed: local only (no Prolific listing or token): the study link is " \
        "open again." in text(html)
    again = admin.post(url, data={"csrf_token": token, "confirmed": "yes", "note": note})
    assert again.status_code == 409  # nothing paused: nothing done, nothing audited
    with app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(AuditEntry).where(
            AuditEntry.action == "breaker_resume")).scalar_one() == 1


def test_a_failed_grant_is_retried_from_the_page_once_confirmed(study, fake):
    app, admin, people = study
    failed, granted = people["careless4"], people["careless1"]
    token = csrf_from(admin.get("/admin/experiments/small").get_data(as_text=True))
    calls = len(fake.fake.server_calls())
    refused = [admin.post(f"/admin/experiments/small/sona/{failed}/retry",
                          data={"confirmed": "yes"}),
               admin.post(f"/admin/experiments/small/sona/{failed}/retry",
                          data={"csrf_token": token})]
    assert [r.status_code for r in refused] == [400, 400]
    # a granted one is not sent again; an unknown participant is not found
    assert admin.post(f"/admin/experiments/small/sona/{granted}/retry",
                      data={"csrf_token": token, "confirmed": "yes"}).status_code == 409
    assert admin.post("/admin/experiments/small/sona/nobody/retry",
                      data={"csrf_token": token, "confirmed": "yes"}).status_code == 404
    assert len(fake.fake.server_calls()) == calls  # nothing was sent to SONA
    fake.fake.codes.add(UNKNOWN_CODE)  # the pool's admin fixes the sign-up on SONA
    done = admin.post(f"/admin/experiments/small/sona/{failed}/retry",
                      data={"csrf_token": token, "confirmed": "yes"})
    assert done.status_code == 302 and done.headers["Location"].endswith("#sona")
    assert [c.outcome for c in fake.fake.server_calls(UNKNOWN_CODE)] == ["bad_code", "granted"]
    with app.app_context():
        entries = db.session.execute(sa.select(AuditEntry).where(
            AuditEntry.action == "sona_grant", AuditEntry.target == failed)
            .order_by(AuditEntry.id)).scalars().all()
    assert [(e.actor, e.detail["state"]) for e in entries] == [("server", "failed"),
                                                               ("admin:alice", "granted")]
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    assert re.search(rf'data-grant="{failed}" data-state="granted"', html)
    assert f"SONA credit for {failed}: granted" in text(html)


def test_the_participant_page_says_where_the_sona_credit_stands(study, fake):
    _app, admin, people = study
    html = admin.get(f"/admin/participants/{people['careless5']}").get_data(as_text=True)
    assert "SONA credit pending" in text(html)
    retry = f'action="/admin/experiments/small/sona/{people["careless5"]}/retry"'
    assert retry in html
    token = csrf_from(html)
    done = admin.post(f"/admin/experiments/small/sona/{people['careless5']}/retry",
                      data={"csrf_token": token, "confirmed": "yes", "back": "participant"})
    assert done.headers["Location"].endswith(f"/admin/participants/{people['careless5']}")
    html = admin.get(f"/admin/participants/{people['careless5']}").get_data(as_text=True)
    assert "SONA credit granted" in text(html) and retry not in html
    assert fake.fake.credited(people["code5"]) == 1
    # no grant (the refused participant never completed): no line
    html = admin.get(f"/admin/participants/{people['refused']}").get_data(as_text=True)
    assert "SONA credit" not in text(html)


def test_a_quiet_study_shows_none_of_it(source_app, small_experiment, tmp_path, fake):
    app = source_app(sona_spec(small_experiment, tmp_path, fake, extra=""))
    client = app.test_client()
    pid, token = enter(client, f"survey_code={fake.fake.sign_up()}")
    answer(client, pid, token, 2)
    admin = app.test_client()
    login(app, admin)
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    assert 'id="breaker"' not in html and 'id="refusals"' not in html and 'id="sona"' not in html
    assert "0 withdrew" in text(html)


def test_refusals_are_one_row_per_participant_read_in_a_fixed_number_of_queries(
        source_app, small_experiment, tmp_path, fake, monkeypatch):
    """Each refused participant once (their latest refusal, how many times refused), whatever
    their number: the page's queries do not grow with the rows."""
    app = source_app(sona_spec(small_experiment, tmp_path, fake))
    codes = [fake.fake.sign_up() for _ in range(4)]
    stored = {}
    for n, code in enumerate(codes):
        client = app.test_client()
        pid, token = enter(client, f"survey_code={code}")
        answer(client, pid, token, n + 1)
        stored[pid] = n + 1
    now = resume_policy.utcnow()
    for minutes in (61, 62, 63):  # everyone comes back three times, too late each time
        monkeypatch.setattr(resume_policy, "utcnow",
                            lambda m=minutes: now + dt.timedelta(minutes=m))
        for code in codes:
            assert app.test_client().get(f"/start/small?survey_code={code}").status_code == 409
    with app.app_context():
        exp_id = db.session.execute(sa.select(Experiment.id)).scalar_one()
        statements: list[str] = []

        def count(conn, cursor, statement, *args):
            statements.append(statement)

        sa.event.listen(db.engine, "before_cursor_execute", count)
        try:
            rows = resume_policy.refusals(exp_id)
        finally:
            sa.event.remove(db.engine, "before_cursor_execute", count)
    assert {r["participant"]: r["n_stored"] for r in rows} == stored
    assert {r["times"] for r in rows} == {3}
    assert all(62.9 < r["age_minutes"] < 63.5 for r in rows)  # the latest refusal's absence
    assert len(statements) <= 2, statements


def test_on_prolific_the_banner_says_pause_was_sent_and_resume_sends_start(
        source_app, small_experiment, tmp_path, monkeypatch):
    """The fake Prolific (tests/server/fake_prolific.py) receives the trip's PAUSE and, from the
    dashboard's Resume recruitment, one START; the banner and the flash say what was sent."""
    from tests.server.fake_prolific import FakeProlific, Server

    token, study = "tok-dashboard", "6" + "1" * 23
    fake = FakeProlific(token)
    fake.studies[study] = {"id": study, "status": "ACTIVE", "total_available_places": 50}
    with Server(fake) as server:
        monkeypatch.setenv("PROLIFIC_TOKEN", token)
        monkeypatch.setenv("PROLIFIC_API_URL", server.url)
        monkeypatch.setattr("time.sleep", lambda s: None)
        spec = spec_with(small_experiment, tmp_path / "prolific", 'platform = "prolific"\n')
        spec.write_text(spec.read_text() + RULES)
        app = source_app(spec)
        with app.app_context():
            db.session.execute(sa.update(Experiment).values(recruitment_ref=study))
            db.session.commit()
        for n in range(5):
            run_participant(own_address(app, n), f"PROLIFIC_PID=CARELESS{n:04d}&STUDY_ID={study}"
                            f"&SESSION_ID=S{n:04d}")
        sent = [b["action"] for m, p, b in fake.log if p.endswith("/transition/")]
        assert sent == ["PAUSE"] and fake.studies[study]["status"] == "PAUSED"
        admin = app.test_client()
        login(app, admin)
        html = admin.get("/admin/experiments/small").get_data(as_text=True)
        assert f"Recruitment platform: prolific: PAUSE sent for study {study}" in text(html)
        assert "(Prolific is sent START)" in text(html)
        done = admin.post("/admin/experiments/small/breaker/resume", data={
            "csrf_token": csrf_from(html), "confirmed": "yes", "note": "instructions fixed"})
        assert done.status_code == 302
        sent = [b["action"] for m, p, b in fake.log if p.endswith("/transition/")]
        assert sent == ["PAUSE", "START"] and fake.studies[study]["status"] == "ACTIVE"
        page = text(admin.get("/admin/experiments/small").get_data(as_text=True))
        assert f"Recruitment resumed: prolific: START sent for study {study}." in page


def test_a_refusal_by_the_blocks_policy_says_so(source_app, small_experiment, tmp_path, fake):
    app = source_app(sona_spec(small_experiment, tmp_path, fake,
                               extra='\n[resume]\npolicy = "refuse"\n'))
    code = fake.fake.sign_up()
    client = app.test_client()
    pid, token = enter(client, f"survey_code={code}")
    total = answer(client, pid, token, 2)
    assert app.test_client().get(f"/start/small?survey_code={code}").status_code == 409
    admin = app.test_client()
    login(app, admin)
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    row = text(re.search(r'<tr data-refused="[^"]+">.*?</tr>', html, re.S).group(0))
    assert f"{pid} started 2 of {total}" in row
    assert "block ratings does not resume (refuse)" in row and "0 min" in row
    assert "1 refused on return: decide about payment" in text(html)


def test_the_experiments_page_says_which_study_the_breaker_paused_and_who_withdrew(study):
    """The index, where a researcher looks first: a paused study says so (linked to its banner),
    with the withdrawals; the polled rows and the JSON say the same; a resume clears the mark."""
    app, admin, _ = study
    html = admin.get("/admin/").get_data(as_text=True)
    row = re.search(r'<tr data-slug="small">.*?</tr>', html, re.S).group(0)
    assert 'data-paused="breaker"' in row and 'href="/admin/experiments/small#breaker"' in row
    assert "paused by the breaker" in text(row) and "1 withdrew" in text(row)
    polled = admin.get("/admin/experiments.rows").get_data(as_text=True)
    assert 'data-paused="breaker"' in polled
    [summary] = admin.get("/admin/experiments.json").get_json()
    assert summary["paused_by_breaker"] is True and summary["withdrawn"] == 1
    with app.app_context():
        breaker.resume(db.session.execute(sa.select(Experiment)).scalar_one(), "test")
    html = admin.get("/admin/").get_data(as_text=True)
    assert 'data-paused' not in html
    assert admin.get("/admin/experiments.json").get_json()[0]["paused_by_breaker"] is False


def test_a_trip_reaches_a_page_already_open_and_the_banner_then_stops_polling(
        source_app, small_experiment, tmp_path, fake):
    """While nothing is tripped the page holds an empty slot that asks every 10 s; once a trip is
    open the slot's answer is the banner itself, which replaces the slot and asks no more (a note
    being typed into its Resume form is never wiped by a refresh)."""
    app = source_app(sona_spec(small_experiment, tmp_path, fake))
    admin = app.test_client()
    login(app, admin)
    html = admin.get("/admin/experiments/small").get_data(as_text=True)
    slot = re.search(r'<div id="breaker-slot"[^>]*>', html).group(0)
    assert 'hx-get="/admin/experiments/small/breaker"' in slot and 'hx-swap="outerHTML"' in slot
    assert 'hx-trigger="every 10s"' in slot
    quiet = admin.get("/admin/experiments/small/breaker").get_data(as_text=True)
    assert 'id="breaker-slot"' in quiet and 'id="breaker"' not in quiet
    for n in range(5):
        run_participant(own_address(app, n), f"survey_code={fake.fake.sign_up()}")
    with app.app_context():
        assert breaker.notice(db.session.execute(sa.select(Experiment)).scalar_one()) is not None
    tripped = admin.get("/admin/experiments/small/breaker").get_data(as_text=True)
    assert 'id="breaker"' in tripped and "Recruitment paused by the circuit breaker" in tripped
    assert "hx-get" not in tripped and 'name="csrf_token"' in tripped
    assert admin.get("/admin/experiments/nope/breaker").status_code == 404
    assert app.test_client().get("/admin/experiments/small/breaker").status_code in (302, 401)
