"""Resume policies: a participant who comes back (study link in a new browser, or the same browser)
before and after ``max_age_minutes`` gets what the block's policy states: ``resume`` where they
stopped, ``restart_block`` (the block's stored answers moved into the exported event, the block
asked again) or a polite ``refuse``; past max_age always refused. The clock is moved by replacing
``resume_policy.utcnow``."""

from __future__ import annotations

import datetime as dt
import re
import threading
import time

import pytest
import sqlalchemy as sa

from humanlike.server import create_app, database
from humanlike.server.export.writer import export_frames
from humanlike.server.extensions import db
from humanlike.server.participants import resume_policy
from humanlike.server.study import experiments
from humanlike.server.study.spec import load_spec
from humanlike.server.tables.core import Event, Experiment, Participant, Trial
from tests.server.conftest import auth, enter, write_small_experiment
from tests.server.test_api_trials import consent, rating_body

LINK = "PROLIFIC_PID=RESUMER0001&STUDY_ID=S1&SESSION_ID=SESSION0001"
SECOND_BLOCK = """
[[blocks]]
name = "second"
trial_type = "rating"
kinds = ["natural"]
max_trials = 4
{policy}
"""


def make_app(database_url, folder, first: str = "", second: str = "", table: str = ""):
    spec = write_small_experiment(folder)
    text = spec.read_text().replace("repeats = 2\n", f"repeats = 2\n{first}\n")
    text = text.replace("[[conditions]]", SECOND_BLOCK.format(policy=second) + "\n[[conditions]]", 1)
    spec.write_text(text + "\n" + table)
    application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                              "SQLALCHEMY_DATABASE_URI": database_url,
                              "EXPERIMENT_PATHS": [str(spec)]})
    database.upgrade(application)
    experiments.sync_all(application)
    return application


@pytest.fixture
def make(database_url, tmp_path):
    made = []

    def build(**kwargs):
        made.append(make_app(database_url, tmp_path / f"exp{len(made)}", **kwargs))
        return made[-1]

    yield build
    for application in made:
        database.dispose(application)


def answer(client, pid, token, block: str, n: int | None = None) -> list[int]:
    """Answer the first ``n`` (all) unanswered trials of ``block``; returns their indices."""
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    todo = [t["index"] for t in tl["trials"]
            if t["block"] == block and t["index"] not in tl["acknowledged"]][:n]
    for index in todo:
        assert client.post(f"/api/v1/participants/{pid}/trials",  # stamped as the page does
                           json=rating_body(index, attempt=tl["attempt"]),
                           headers=auth(token)).status_code == 201
    return todo


def come_back(app, monkeypatch, minutes: float, same_browser=None):
    """The participant opens the study link again, the clock moved on by ``minutes``."""
    later = resume_policy.utcnow() + dt.timedelta(minutes=minutes)
    monkeypatch.setattr(resume_policy, "utcnow", lambda: later)
    client = same_browser or app.test_client()
    return client, client.get(f"/start/small?{LINK}")


def stored(app, pid) -> list[int]:
    with app.app_context():
        return list(db.session.execute(sa.select(Trial.trial_index).join(Participant).where(
            Participant.public_id == pid).order_by(Trial.trial_index)).scalars())


def decisions(app, pid) -> list[dict]:
    with app.app_context():
        return [e.value for e in db.session.execute(sa.select(Event).join(
            Participant, Event.participant_id == Participant.id).where(
            Participant.public_id == pid, Event.type == resume_policy.EVENT)
            .order_by(Event.id)).scalars()]


def started(app):
    client = app.test_client()
    pid, token = enter(client, LINK)
    consent(client, pid, token)
    answered = answer(client, pid, token, "ratings")
    answered += answer(client, pid, token, "second", 2)
    return client, pid, token, answered


def test_resume_continues_before_max_age_and_refuses_after(make, monkeypatch):
    app = make(table="[resume]\npolicy = \"resume\"\nmax_age_minutes = 60\n")
    _, pid, _, answered = started(app)
    client, back = come_back(app, monkeypatch, 30)
    assert back.status_code == 302 and f"/run/{pid}" in back.headers["Location"]
    token = back.headers["Location"].split("#token=")[1]
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert sorted(tl["acknowledged"]) == sorted(answered) == stored(app, pid)
    [first] = decisions(app, pid)
    assert (first["action"], first["reason"], first["block"]) == ("resume", "policy", "second")
    assert 29.9 < first["age_minutes"] < 30.5

    _, late = come_back(app, monkeypatch, 31)  # 61 minutes after the last trial (the clock moves on)
    assert late.status_code == 409
    page = late.get_data(as_text=True)
    assert "away for longer than this study allows (60 minutes)" in page
    assert "return the study on Prolific" in page and "payment" in page
    assert stored(app, pid) == sorted(answered)  # nothing lost
    assert decisions(app, pid)[-1]["action"] == "refuse" and decisions(app, pid)[-1]["reason"] == "max_age"
    with app.app_context():
        exp_id = db.session.execute(sa.select(Experiment.id)).scalar_one()
        [refused] = resume_policy.refusals(exp_id)
    assert refused["participant"] == pid and refused["n_stored"] == len(answered)


def test_restart_block_asks_the_block_again_and_keeps_the_answers_in_the_export(make, monkeypatch):
    app = make(second='resume = "restart_block"', table="[resume]\nmax_age_minutes = 60\n")
    _, pid, _, answered = started(app)
    in_second = answered[-2:]
    client, back = come_back(app, monkeypatch, 5)
    assert back.status_code == 302
    token = back.headers["Location"].split("#token=")[1]
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert sorted(tl["acknowledged"]) == sorted(answered[:-2])  # the first block is kept
    assert tl["next_index"] == in_second[0]
    [decision] = decisions(app, pid)
    assert decision["action"] == "restart_block" and decision["block"] == "second"
    assert [r["trial_index"] for r in decision["restarted"]] == in_second
    assert decision["restarted"][0]["response"] == rating_body(in_second[0])["response"]
    with app.app_context():
        events = export_frames("small")["events"]
    exported = events[events["type"] == resume_policy.EVENT]
    assert len(exported) == 1 and "restart_block" in str(exported["value"].iloc[0])
    # the block is asked again: the same indices are stored anew
    assert answer(client, pid, token, "second", 2) == in_second
    _, late = come_back(app, monkeypatch, 61)
    assert late.status_code == 409 and decisions(app, pid)[-1]["reason"] == "max_age"


def test_refuse_refuses_politely_before_and_after_max_age(make, monkeypatch):
    app = make(second='resume = "refuse"', table="[resume]\nmax_age_minutes = 60\n")
    browser, pid, _, answered = started(app)
    _, soon = come_back(app, monkeypatch, 1)
    assert soon.status_code == 409 and "cannot be continued once it has been left" in soon.get_data(as_text=True)
    _, same = come_back(app, monkeypatch, 0, same_browser=browser)  # the same browser is refused too
    assert same.status_code == 409
    _, late = come_back(app, monkeypatch, 120)
    assert late.status_code == 409
    assert [d["reason"] for d in decisions(app, pid)] == ["policy", "policy", "max_age"]
    assert stored(app, pid) == sorted(answered)


def test_a_block_that_resumes_inside_a_refusing_study(make, monkeypatch):
    app = make(second='resume = "resume"', table="[resume]\npolicy = \"refuse\"\n")
    _, pid, _, _ = started(app)
    _, back = come_back(app, monkeypatch, 600)  # no max_age: any absence
    assert back.status_code == 302 and decisions(app, pid)[0]["policy"] == "resume"


def test_without_policies_nothing_changes_and_the_spec_hash_is_kept(make, monkeypatch, small_experiment):
    app = make()
    _, pid, _, _ = started(app)
    _, back = come_back(app, monkeypatch, 10_000)
    assert back.status_code == 302 and decisions(app, pid) == []
    spec = load_spec(small_experiment)
    assert '"resume"' not in spec.canonical_json() and '"privacy"' not in spec.canonical_json()


def test_a_refused_participant_can_still_withdraw_and_the_task_stays_closed(make, monkeypatch):
    app = make(table="[resume]\nmax_age_minutes = 60\n")
    old_browser, pid, old_token, _ = started(app)
    browser, late = come_back(app, monkeypatch, 61)
    page = late.get_data(as_text=True)
    assert late.status_code == 409 and f'href="/withdraw/{pid}"' in page
    # the old tab's token is revoked; the task page stays refused in either browser
    assert old_browser.post(f"/api/v1/participants/{pid}/events", json={"type": "blur"},
                            headers=auth(old_token)).status_code == 403
    assert browser.get(f"/task/{pid}").status_code == 409
    assert browser.get(f"/run/{pid}").status_code == 409
    form = browser.get(f"/withdraw/{pid}").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    done = browser.post(f"/withdraw/{pid}", data={"csrf_token": csrf, "token": old_token,
                                                   "confirm": "yes"})  # storage's stale token too
    assert done.status_code == 200 and stored(app, pid) == []


def test_a_trial_answered_before_a_restart_is_kept_aside_not_stored_as_the_new_answer(make, monkeypatch):
    """The browser still holds an unsent trial of the block when the participant leaves; after the
    block restarts, the page sends it from local storage with the new token. It is the old attempt's
    answer: kept in a ``stale_trial`` event, refused with 409 (the browser drops it), and the
    repeated block stores the new answers under every index."""
    app = make(second='resume = "restart_block"', table="[resume]\nmax_age_minutes = 60\n")
    first_browser, pid, old_token, answered = started(app)
    tl = first_browser.get(f"/api/v1/participants/{pid}/timeline", headers=auth(old_token)).get_json()
    assert tl["attempt"] == 0
    unsent = answered[-1] + 1  # answered in the old attempt, still in local storage
    old_ratings = rating_body(unsent)["response"]["ratings"] | {"0": 0.5, "3": 0.0}
    old_answer = rating_body(unsent, response={"ratings": old_ratings})
    client, back = come_back(app, monkeypatch, 5)
    token = back.headers["Location"].split("#token=")[1]
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    assert tl["attempt"] == 1
    for body in (old_answer, dict(old_answer, attempt=0)):  # an old page's payload, a stamped one
        sent = client.post(f"/api/v1/participants/{pid}/trials", json=body, headers=auth(token))
        assert sent.status_code == 409, sent.get_json()
        assert sent.get_json()["error"] == "trial_from_restarted_block"
    assert unsent not in stored(app, pid)
    with app.app_context():
        kept = [e.value for e in db.session.execute(sa.select(Event).where(
            Event.type == "stale_trial")).scalars()]
        events = export_frames("small")["events"]
    assert [k["trial_index"] for k in kept] == [unsent] and kept[0]["attempt"] == 0
    assert kept[0]["response"] == {"ratings": old_ratings} and kept[0]["current_attempt"] == 1
    assert (events["type"] == "stale_trial").sum() == 1  # exported with the events
    # a number the server never handed out is refused and changes nothing
    ahead = client.post(f"/api/v1/participants/{pid}/trials",
                        json=rating_body(answered[-2], attempt=2), headers=auth(token))
    assert ahead.status_code == 422 and ahead.get_json()["error"] == "attempt_unknown"
    # the block asked again: every index stores the new attempt's answer
    redo = [*answered[-2:], unsent]
    for index in redo:
        new = client.post(f"/api/v1/participants/{pid}/trials",
                          json=rating_body(index, attempt=1), headers=auth(token))
        assert new.status_code == 201
    with app.app_context():
        rows = {t.trial_index: t.response for t in db.session.execute(sa.select(Trial)).scalars()}
    assert rows[unsent] == rating_body(unsent)["response"]
    # an acknowledgement lost before the restart: an identical replay of a kept trial is still 200
    kept_first = client.post(f"/api/v1/participants/{pid}/trials", json=rating_body(answered[0]),
                             headers=auth(token))
    assert kept_first.status_code == 200


def test_a_block_restarted_by_another_process_is_seen_through_the_stale_cache(make, monkeypatch):
    """This process cached the participant on attempt 0; another process restarts the block (here:
    the row is changed behind the cache). A trial of attempt 0 is then not stored as an answer:
    the insert checks the attempt itself, and the refusal keeps the trial aside."""
    app = make(second='resume = "restart_block"')
    client, pid, token, answered = started(app)
    with app.app_context():
        db.session.execute(sa.update(Participant).where(Participant.public_id == pid)
                           .values(attempt=Participant.attempt + 1))
        db.session.commit()
    late = client.post(f"/api/v1/participants/{pid}/trials",
                       json=rating_body(answered[-1] + 1), headers=auth(token))
    assert late.status_code == 409 and late.get_json()["error"] == "trial_from_restarted_block"
    assert answered[-1] + 1 not in stored(app, pid)
    fresh = client.post(f"/api/v1/participants/{pid}/trials",
                        json=rating_body(answered[-1] + 1, attempt=1), headers=auth(token))
    assert fresh.status_code == 201


def test_the_timeline_names_the_restarted_block_until_it_is_answered_again(make, monkeypatch):
    app = make(second='resume = "restart_block"', table="[resume]\nmax_age_minutes = 60\n")
    _, pid, _, _ = started(app)
    client, back = come_back(app, monkeypatch, 5)
    token = back.headers["Location"].split("#token=")[1]
    timeline = f"/api/v1/participants/{pid}/timeline"
    assert client.get(timeline, headers=auth(token)).get_json()["restarted_block"] == "second"
    answer(client, pid, token, "second", 1)
    tl = client.get(timeline, headers=auth(token)).get_json()
    assert tl["restarted_block"] is None and tl["attempt"] == 1  # a reload now is no restart


# --------------------------------------------------------------------------- races (issue 45, 6)

def slow_restart(monkeypatch, seconds: float = 0.3) -> threading.Event:
    """Hold a return between reading the block's stored trials and removing them (the window of
    the race, widened so that each run meets it); the event is set once the window is open."""
    reading, original = threading.Event(), resume_policy._restart

    def restart(participant, indices):
        reading.set()
        time.sleep(seconds)
        return original(participant, indices)

    monkeypatch.setattr(resume_policy, "_restart", restart)
    return reading


def test_a_trial_sent_while_its_block_restarts_is_not_stored_as_the_repeated_blocks_answer(
        make, monkeypatch):
    """The old window's next trial arrives while a return restarts its block: it lands before the
    restart (then the restart moves it into its event) or after it (then it is kept aside), never
    as a stored answer of the block that is asked again."""
    app = make(second='resume = "restart_block"', table="[resume]\nmax_age_minutes = 60\n")
    old_browser, pid, old_token, answered = started(app)
    late = answered[-1] + 1  # the next trial of the block, answered in the old window
    reading = slow_restart(monkeypatch)
    sent: list = []

    def old_window():
        reading.wait(10)
        sent.append(old_browser.post(f"/api/v1/participants/{pid}/trials",
                                     json=rating_body(late, attempt=0), headers=auth(old_token)))

    thread = threading.Thread(target=old_window)
    thread.start()
    _, back = come_back(app, monkeypatch, 5)
    thread.join(20)
    assert back.status_code == 302 and len(sent) == 1
    assert stored(app, pid) == sorted(answered[:-2])  # the repeated block holds nothing yet
    [decision] = decisions(app, pid)
    restarted = [r["trial_index"] for r in decision["restarted"]]
    with app.app_context():
        stale = [e.value["trial_index"] for e in db.session.execute(
            sa.select(Event).where(Event.type == resume_policy.STALE_EVENT)).scalars()]
    if sent[0].status_code == 201:  # stored first: the restart took it with the others
        assert restarted == [*answered[-2:], late] and stale == []
    else:  # refused after the restart: kept aside (409), or its token revoked by the return (403)
        assert sent[0].status_code in (403, 409), sent[0].get_json()
        assert restarted == answered[-2:]
        assert stale == ([late] if sent[0].status_code == 409 else [])


def test_simultaneous_returns_restart_the_block_once_with_its_answers(make, monkeypatch):
    """Five returns at once: one restart carries the block's answers, each later one finds the
    block empty; every return is recorded with its own attempt."""
    app = make(second='resume = "restart_block"', table="[resume]\nmax_age_minutes = 60\n")
    _, pid, _, answered = started(app)
    later = resume_policy.utcnow() + dt.timedelta(minutes=5)
    monkeypatch.setattr(resume_policy, "utcnow", lambda: later)
    slow_restart(monkeypatch, 0.1)
    gate, codes = threading.Barrier(5), []

    def come():
        client = app.test_client()
        gate.wait(10)
        codes.append(client.get(f"/start/small?{LINK}").status_code)

    threads = [threading.Thread(target=come) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert codes == [302] * 5
    made = decisions(app, pid)
    assert [d["action"] for d in made] == ["restart_block"] * 5
    assert [[r["trial_index"] for r in d["restarted"]] for d in made] == [answered[-2:]] + [[]] * 4
    assert sorted(d["attempt"] for d in made) == [1, 2, 3, 4, 5]
    with app.app_context():
        assert db.session.execute(sa.select(Participant.attempt).where(
            Participant.public_id == pid)).scalar_one() == 5


def test_one_stale_trial_sent_twenty_times_at_once_is_kept_once(make, monkeypatch):
    app = make(second='resume = "restart_block"', table="[resume]\nmax_age_minutes = 60\n")
    _, pid, _, answered = started(app)
    _, back = come_back(app, monkeypatch, 5)
    assert back.status_code == 302
    with app.app_context():
        ident = db.session.execute(sa.select(Participant.id).where(
            Participant.public_id == pid)).scalar_one()
    sent = dict(rating_body(answered[-1] + 1, attempt=0), attempt=0)

    def keep(gate: threading.Barrier, body: dict) -> None:
        with app.app_context():
            gate.wait(10)
            resume_policy.keep_stale(ident, body, 1)

    for round_ in range(3):  # a different trial body each round, each sent 20 times at once
        gate, body = threading.Barrier(20), dict(sent, rt_ms=500.0 + round_)
        threads = [threading.Thread(target=keep, args=(gate, body)) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    with app.app_context():
        kept = [e.value["rt_ms"] for e in db.session.execute(sa.select(Event).where(
            Event.type == resume_policy.STALE_EVENT).order_by(Event.id)).scalars()]
    assert kept == [500.0, 501.0, 502.0]
