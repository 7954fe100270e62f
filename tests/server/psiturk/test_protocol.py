"""psiTurk 3's participant protocol on psiTurk's own example project: error pages and numbers,
&mode= insertion, undefined variables, no template injection, balanced conditions, statuses, and
PUT /sync stored as increments (repeated, reordered and stale PUTs)."""

from __future__ import annotations

import copy
import json

import pytest
import sqlalchemy as sa

from humanlike.server import database
from humanlike.server.extensions import db
from humanlike.server.tables.core import Participant
from humanlike.server.tables.psiturk import PsiturkAssignment, PsiturkQuestion, PsiturkTrial
from tests.server.psiturk.conftest import make_app

IDS = "hitId=H1&assignmentId=A1&workerId=W1"


def start(client, ids: str = IDS, mode: str = "sandbox") -> str:
    resp = client.get(f"/exp?{ids}&mode={mode}")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    page = resp.get_data(as_text=True)
    return page.split('var uniqueId = "')[1].split('"')[0]


def blob(uid: str, n: int, answers: dict | None = None) -> dict:
    return {"condition": 0, "counterbalance": 0, "currenttrial": n, "bonus": 0, "mode": "sandbox",
            "data": [{"uniqueid": uid, "current_trial": i, "dateTime": 1000 + i,
                      "trialdata": {"phase": "TEST", "rt": 300 + i, "z": i, "a": -i, "hit": True}}
                     for i in range(n)],
            "questiondata": answers or {}, "eventdata": [
                {"eventtype": "initialized", "value": None, "timestamp": 1, "interval": 0}]}


def stored(app, uid: str) -> tuple[list[int], dict]:
    with app.app_context():
        part = db.session.execute(sa.select(PsiturkAssignment).where(
            PsiturkAssignment.uniqueid == uid)).scalar_one()
        positions = db.session.execute(sa.select(PsiturkTrial.current_trial).where(
            PsiturkTrial.assignment_id == part.id).order_by(PsiturkTrial.position)).scalars().all()
        answers = dict(db.session.execute(sa.select(PsiturkQuestion.key, PsiturkQuestion.value)
                       .where(PsiturkQuestion.assignment_id == part.id)).all())
    return list(positions), {k: json.loads(v) for k, v in answers.items()}


@pytest.mark.parametrize("path, number", [
    ("/ad?mode=sandbox", 1001), ("/consent?hitId=H&assignmentId=A&mode=live", 1002),
    ("/exp?hitId=H&assignmentId=A&workerId=W", 1003),
])
def test_missing_ids_show_psiturks_error_numbers(client, path, number):
    resp = client.get(path)
    assert resp.status_code == 400
    assert f"<b>Error</b>: {number}" in resp.get_data(as_text=True)


def test_inexp_without_uniqueid_is_error_1013(client):
    resp = client.post("/inexp", data={})
    assert resp.status_code == 400 and "1013" in resp.get_data(as_text=True)


def test_browser_exclude_rule_is_error_1014(client):
    resp = client.get(f"/ad?{IDS}&mode=sandbox", headers={"User-Agent": "Mozilla/4.0 (MSIE 8.0)"})
    assert resp.status_code == 403 and "<b>Error</b>: 1014" in resp.get_data(as_text=True)
    phone = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 "
             "(KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1")
    assert "1014" in client.get(f"/ad?{IDS}&mode=sandbox", headers={"User-Agent": phone}).get_data(
        as_text=True)


def test_preview_ad_and_accepted_ad(client):
    preview = client.get("/ad?hitId=H1&assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&mode=sandbox")
    assert "Call for participants" in preview.get_data(as_text=True)
    accepted = client.get(f"/pub?{IDS}&mode=sandbox").get_data(as_text=True)
    assert "Begin Experiment" in accepted
    # psiTurk's insert_mode: &mode= follows the workerId of the popup's consent link
    assert "/consent?hitId=H1&assignmentId=A1&workerId=W1&mode=sandbox'" in accepted
    # {{ server_location }} is not a psiTurk variable: it renders empty
    assert 'src="/static/images/university.png"' in accepted


def test_consent_links_to_exp_with_the_mode(client):
    page = client.get(f"/consent?{IDS}&mode=live").get_data(as_text=True)
    assert "window.location='/exp?hitId=H1&assignmentId=A1&workerId=W1&mode=live'" in page


def test_query_parameters_are_never_template_source(client):
    """psiTurk #517: template syntax in a query parameter is shown as text, never evaluated."""
    evil = "%7B%7B7*7%7D%7D"  # {{7*7}}
    for path in (f"/ad?hitId=H&assignmentId={evil}&workerId={evil}&mode={evil}",
                 f"/consent?hitId={evil}&assignmentId=A&workerId=W&mode={evil}",
                 f"/exp?hitId=H9&assignmentId=A9&workerId=W9&mode={evil}"):
        page = client.get(path).get_data(as_text=True)
        assert "49" not in page and "{{7*7}}" in page, path
    page = client.get("/ad?hitId=H&assignmentId=A&workerId=%3Cscript%3E&mode=x").get_data(as_text=True)
    assert "<script>alert" not in page and "&lt;script&gt;" in page


def test_exp_renders_psiturks_variables_and_allocates(client, psiturk_app):
    page = client.get(f"/exp?{IDS}&mode=sandbox").get_data(as_text=True)
    assert 'var uniqueId = "W1:A1"' in page and 'var adServerLoc = "/complete"' in page
    assert 'var codeversion = "0.0.1"' in page and 'var mode = "sandbox"' in page
    with psiturk_app.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.platform, row.platform_id, row.hit_id, row.status) == ("mturk", "W1", "H1", "allocated")


def test_least_filled_condition_and_counterbalance(database_url, stroop_project):
    config = stroop_project / "config.txt"
    config.write_text(config.read_text().replace(";num_conds = 1", "num_conds = 2")
                      .replace(";num_counters = 1", "num_counters = 3"))
    app = make_app(database_url, stroop_project)
    client = app.test_client()
    seen = []
    for i in range(12):
        page = client.get(f"/exp?hitId=H&assignmentId=A{i}&workerId=W{i}&mode=live").get_data(
            as_text=True)
        seen.append((int(page.split("var condition = ")[1].split(";")[0]),
                     int(page.split("var counterbalance = ")[1].split(";")[0])))
    # 6 cells filled twice each, every cell once before any twice
    assert sorted(set(seen[:6])) == [(c, k) for c in range(2) for k in range(3)]
    assert sorted(seen) == sorted([(c, k) for c in range(2) for k in range(3)] * 2)
    # another mode is balanced on its own
    page = client.get("/exp?hitId=H&assignmentId=B&workerId=X&mode=sandbox").get_data(as_text=True)
    assert page
    database.dispose(app)


def test_statuses_through_the_task(client, psiturk_app):
    uid = start(client)
    assert client.get("/check_worker_status?workerId=W1&assignmentId=A1").json == {"status": 1}
    assert client.post("/inexp", data={"uniqueId": uid}).json == {"status": "success"}
    assert "1008" in client.get(f"/exp?{IDS}&mode=sandbox").get_data(as_text=True)
    assert "1009" in client.get(f"/ad?{IDS}&mode=sandbox").get_data(as_text=True)
    resp = client.get(f"/complete?uniqueId={uid}&mode=sandbox")
    assert "window.opener.location.reload" in resp.get_data(as_text=True)  # closepopup.html
    ad = client.get(f"/ad?{IDS}&mode=sandbox").get_data(as_text=True)
    assert "workersandbox.mturk.com/mturk/externalSubmit" in ad  # thanks-mturksubmit.html
    assert client.get(f"/worker_submitted?uniqueId={uid}").json == {"status": "success"}
    assert client.get("/check_worker_status?workerId=W1&assignmentId=A1").json == {"status": 4}
    with psiturk_app.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert row.status == "submitted" and row.started_at and row.completed_at
    # another assignment by the same worker: psiTurk's "already did this HIT" (allow_repeats off)
    assert "1010" in client.get("/ad?hitId=H1&assignmentId=A2&workerId=W1&mode=sandbox").get_data(
        as_text=True)


def test_debug_mode_completes_on_the_debug_page(client):
    uid = start(client, "hitId=debugH&assignmentId=debugA&workerId=debugW", mode="debug")
    page = client.get(f"/complete?uniqueId={uid}&mode=debug").get_data(as_text=True)
    assert "Debugging task complete!" in page
    assert client.post("/quitter", data={"uniqueId": uid}).json == {
        "status": "didn't mark as quitter since this is debugging"}


def test_quitter_marks_quit_early(client, psiturk_app):
    uid = start(client)
    assert client.post("/quitter", data={"uniqueId": uid}).json == {"status": "marked as quitter"}
    with psiturk_app.app_context():
        assert db.session.execute(sa.select(Participant.status)).scalar_one() == "quit_early"


def test_put_sync_is_stored_as_increments(client, psiturk_app):
    uid = start(client)
    url = "/sync/W1%3AA1"  # psiturk.js percent-encodes the uniqueId
    assert client.get(url).json["workerId"] == "W1"  # psiTurk's answer before any save
    full = blob(uid, 10, {"q1": "first"})
    assert client.put(url, json=blob(uid, 4)).json == {"status": "user data saved"}
    assert client.put(url, json=full).status_code == 200
    assert client.put(url, json=full).status_code == 200  # repeated
    assert client.put(url, json=blob(uid, 6, {"q1": "stale"})).status_code == 200  # stale, late
    positions, answers = stored(psiturk_app, uid)
    assert positions == list(range(10)) and answers == {"q1": "first"}
    assert client.get(url).json == full  # GET /sync: the same JSON psiTurk would answer
    newer = blob(uid, 11, {"q1": "changed", "q2": [1, 2]})
    client.put(url, json=newer)
    assert stored(psiturk_app, uid) == (list(range(11)), {"q1": "changed", "q2": [1, 2]})
    assert client.get(url).json == newer


def test_put_sync_refuses_bad_bodies_and_other_browsers(client, psiturk_app):
    uid = start(client)
    url = f"/sync/{uid}"
    client.put(url, json=blob(uid, 3))
    for body in ("not json", json.dumps([1, 2]), json.dumps({"data": {"x": 1}}),
                 json.dumps({"data": [], "questiondata": []})):
        resp = client.put(url, data=body, content_type="application/json")
        assert resp.status_code == 400 and resp.json["error"] in ("malformed_json", "invalid_blob")
    other = psiturk_app.test_client()  # no write cookie
    resp = other.put(url, json=blob(uid, 5))
    assert resp.status_code == 403 and resp.json["error"] == "forbidden"
    assert client.put("/sync/nobody%3Ahere", json=blob("x", 1)).status_code == 404
    assert stored(psiturk_app, uid)[0] == [0, 1, 2]  # nothing changed


def test_unload_beacon_post_is_stored(client, psiturk_app):
    uid = start(client)
    data = copy.deepcopy(blob(uid, 2))
    resp = client.post(f"/sync/{uid}", data=json.dumps(data), content_type="text/plain")
    assert resp.status_code == 200
    assert stored(psiturk_app, uid)[0] == [0, 1]


def test_templates_and_psiturk_js_are_served(client):
    assert client.get("/instructions/instruct-1.html").status_code == 200
    js = client.get("/static/js/psiturk.js")
    assert js.status_code == 200 and b"PsiTurk = function (uniqueId, adServerLoc, mode)" in js.data
    assert client.get("/static/lib/backbone-min.js").status_code == 200
    assert client.get("/static/css/pages.css").status_code == 200  # humanlike's own still served
    assert client.get("/no-such-page.html").status_code == 404


def test_custom_py_routes_are_served(client):
    """psiTurk's example custom.py (it imports psiTurk's modules) runs: its compute_bonus."""
    uid = start(client)
    client.put(f"/sync/{uid}", json=blob(uid, 3))
    assert client.get(f"/compute_bonus?uniqueId={uid}").json == {"bonusComputed": "success"}
    assert client.get("/my_custom_view").status_code == 200


def test_psiturk_participants_appear_in_the_dashboard(client, psiturk_app):
    from humanlike.server.tables.core import AdminUser

    uid = start(client)
    client.post("/inexp", data={"uniqueId": uid})
    start(client, "hitId=H1&assignmentId=A7&workerId=W7")
    with psiturk_app.app_context():
        user = AdminUser(username="alice")
        user.set_password("correct horse")
        db.session.add(user)
        db.session.commit()
    psiturk_app.config["WTF_CSRF_ENABLED"] = False  # the login form itself is tested elsewhere
    admin = psiturk_app.test_client()
    admin.post("/admin/login", data={"username": "alice", "password": "correct horse"})
    page = admin.get("/admin/").get_data(as_text=True)
    assert "psiturk-psiturk-example" in page
    with psiturk_app.app_context():
        counts = dict(db.session.execute(sa.select(Participant.status, sa.func.count())
                                         .group_by(Participant.status)).all())
    assert counts == {"started": 1, "allocated": 1}


def test_link_previews_allocate_nobody(client, psiturk_app):
    resp = client.get(f"/exp?{IDS}&mode=live", headers={"User-Agent": "Slackbot-LinkExpanding 1.0"})
    assert resp.status_code == 403 and "1014" in resp.get_data(as_text=True)
    with psiturk_app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(Participant)).scalar() == 0


def test_exp_is_rate_limited_like_study_links(database_url, stroop_project):
    app = make_app(database_url, stroop_project, RATELIMIT_ENABLED=True,
                   START_RATE_LIMIT="3 per minute")
    client = app.test_client()
    codes = [client.get(f"/exp?hitId=H&assignmentId=A{i}&workerId=W{i}&mode=live").status_code
             for i in range(4)]
    assert codes == [200, 200, 200, 429]
    database.dispose(app)


def test_timeout_sweep_sees_psiturk_saves(client, psiturk_app):
    """A psiTurk participant saving through /sync is active; an idle one times out."""
    import datetime as dt

    from humanlike.server.participants import timeouts
    from humanlike.server.tables.core import utcnow

    busy = start(client)
    start(client, "hitId=H1&assignmentId=A8&workerId=W8")
    client.post("/inexp", data={"uniqueId": busy})
    client.put(f"/sync/{busy}", json=blob(busy, 2))
    later = utcnow() + dt.timedelta(minutes=timeouts.DEFAULT_TIMEOUT_MINUTES + 1)
    with psiturk_app.app_context():
        db.session.execute(sa.update(PsiturkTrial).values(server_time=later - dt.timedelta(minutes=1)))
        db.session.commit()
        assert timeouts.sweep(now=later) == {"psiturk-psiturk-example": 1}
        statuses = dict(db.session.execute(sa.select(Participant.platform_id, Participant.status)).all())
    assert statuses == {"W1": "started", "W8": "timed_out"}


def test_concurrent_reordered_puts_store_each_record_once(database_url, stroop_project):
    """Saves of one participant racing in any order (psiturk.js can send two at once): the stored
    records are exactly the longest copy's, once each, and its answers win."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from tests.e2e.conftest import LiveServer

    app = make_app(database_url, stroop_project)
    live = LiveServer(app)
    try:
        with httpx.Client(base_url=live.url) as first:
            first.get(f"/exp?{IDS}&mode=live")
            cookies = dict(first.cookies)
        copies = [blob("W1:A1", n, {"q": f"after {n}"}) for n in range(1, 41)]
        order = copies * 2
        random.Random(7).shuffle(order)

        with httpx.Client(base_url=live.url, cookies=cookies) as shared, ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(
                lambda body: shared.put("/sync/W1%3AA1", json=body).status_code, order))
        assert set(codes) == {200}
        positions, answers = stored(app, "W1:A1")
        assert positions == list(range(40)) and answers == {"q": "after 40"}
        with httpx.Client(base_url=live.url, cookies=cookies) as c:  # the participant's browser
            assert c.get("/sync/W1%3AA1").json() == copies[-1]
    finally:
        live.stop()
        database.dispose(app)


def test_shorter_copy_waiting_behind_a_longer_one_keeps_its_answers(psiturk_app, client):
    """The race CI once lost (two PUTs that both read trials_seen = 38): the copy with 40 trials
    commits while the 39-trial copy waits on its rows; the longer copy's answers must stay."""
    import threading
    import time

    from humanlike.server.tables import psiturk as storage

    uid = start(client)
    client.put(f"/sync/{uid}", json=blob(uid, 38, {"q": "after 38"}))
    with psiturk_app.app_context():
        if db.engine.dialect.name != "postgresql":
            pytest.skip("SQLite serialises writers with one file lock: no two PUTs overlap")
        assignment_id = db.session.execute(sa.select(PsiturkAssignment.id).where(
            PsiturkAssignment.uniqueid == uid)).scalar_one()
        longer, shorter = blob(uid, 40, {"q": "after 40"}), blob(uid, 39, {"q": "after 39"})
        conn_a = db.engine.connect()
        conn_a.begin()
        storage._store(conn_a, assignment_id, longer, *storage.check_blob(longer), (38, 1))
        waited = threading.Event()

        def shorter_put():
            with psiturk_app.app_context(), db.engine.begin() as conn_b:
                storage._store(conn_b, assignment_id, shorter, *storage.check_blob(shorter), (38, 1))
            waited.set()

        thread = threading.Thread(target=shorter_put)
        thread.start()
        time.sleep(0.5)
        assert not waited.is_set()  # the shorter copy is blocked behind the open longer one
        conn_a.commit()
        conn_a.close()
        thread.join(30)
        assert waited.is_set()
    positions, answers = stored(psiturk_app, uid)
    assert positions == list(range(40)) and answers == {"q": "after 40"}


def test_first_arrivals_at_once_create_the_experiment_row_once(psiturk_app):
    """A fresh deployment's first participants arrive together in several worker processes: each
    may find no experiment row and insert it; the losers of that race must use the winner's row
    (the bench at 25 concurrent arrivals on PostgreSQL got a 500 from the unique slug)."""
    import threading

    from humanlike.server.psiturk.participants import experiment_row
    from humanlike.server.tables.core import Experiment

    with psiturk_app.app_context():
        if db.engine.dialect.name != "postgresql":
            pytest.skip("SQLite serialises the inserts (one writer): no race to lose")
    def arrive(slug, barrier, ids, errors):
        with psiturk_app.app_context():
            try:
                barrier.wait()
                ids.append(experiment_row(slug, {"slug": slug, "title": slug}, "/tmp").id)
            except Exception as exc:
                errors.append(exc)
            finally:
                db.session.remove()

    for attempt in range(5):
        slug = f"race-{attempt}"
        barrier = threading.Barrier(6)
        ids: list[int] = []
        errors: list[Exception] = []
        threads = [threading.Thread(target=arrive, args=(slug, barrier, ids, errors))
                   for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == [] and len(ids) == 6 and len(set(ids)) == 1, errors
        with psiturk_app.app_context():
            assert db.session.execute(sa.select(sa.func.count()).select_from(Experiment)
                                      .where(Experiment.slug == slug)).scalar_one() == 1
