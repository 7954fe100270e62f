"""Every exit of the demo is a declared outcome (issue 41 item 1): the demo study with
``[completion.exits]`` and its Prolific completion codes, listed on the fake Prolific by
``humanlike recruit prolific create`` (which checks each code's type and actions against Prolific's
documentation); then one participant per way out, through the participant routes and API, lands on
Prolific's completion URL with the code the server chose, and the fake records the submission
state Prolific documents for that code's action. The outcome is in the export and on the
dashboard's participant rows; the browser never picks the code (a participant who declined cannot
complete, or be handed the completion code)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database
from humanlike.server.demo.build import PROLIFIC_CODE, build_demo
from humanlike.server.export.codebook import PARTICIPANT_COLUMNS
from humanlike.server.export.writer import participant_table
from humanlike.server.extensions import db
from humanlike.server.platforms import participant_code
from humanlike.server.study import experiments
from humanlike.server.study.spec import SpecError, load_spec
from humanlike.server.tables.core import Experiment, Participant
from tests.server.admin.dashboard_helpers import login
from tests.server.conftest import auth
from tests.server.fake_prolific import FakeProlific, Server

TOKEN = "tok-exits-3f2e1d"
EXITS = """
[completion.exits.no_consent]
prolific_code = "NOCONSNT"

[completion.exits.incompatible_device]
prolific_code = "DEVICE01"

[completion.exits.display_unsuitable]
prolific_code = "SCREEN01"

[completion.exits.failed_attention]
prolific_code = "ATTENTN1"
min_failed_catch = 2

[completion.exits.refused_on_return]
prolific_code = "RETURN01"

[resume]
policy = "refuse"

[recruitment]
public_url = "https://study.example.org"

[recruitment.prolific]
name = "Which digits do you see?"
description = "Rate how much each image looks like each digit (about 5 minutes)."
reward = 100
places = 10
estimated_minutes = 5

[[recruitment.prolific.completion_codes]]
code = "{completed}"
actions = ["MANUALLY_REVIEW"]

[[recruitment.prolific.completion_codes]]
code = "NOCONSNT"
code_type = "NO_CONSENT"
actions = ["REQUEST_RETURN"]

[[recruitment.prolific.completion_codes]]
code = "DEVICE01"
code_type = "INCOMPATIBLE_DEVICE"
actions = ["REQUEST_RETURN"]

[[recruitment.prolific.completion_codes]]
code = "SCREEN01"
code_type = "FIXED_SCREENOUT"
actions = ["FIXED_SCREEN_OUT_PAYMENT"]
fixed_screen_out_reward = 40
slots = 5

[[recruitment.prolific.completion_codes]]
code = "ATTENTN1"
code_type = "FAILED_ATTENTION_CHECK"
actions = ["MANUALLY_REVIEW"]

[[recruitment.prolific.completion_codes]]
code = "RETURN01"
code_type = "OTHER"
actions = ["MANUALLY_REVIEW"]
"""
MOBILE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 "
          "(KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1")
UNSUITABLE = {"refresh_hz": 60.0, "frame_ms": 1000 / 60, "n_intervals": 60, "suitable": False,
              "reason": "too_small", "window_width": 500, "window_height": 300}


@pytest.fixture(scope="module")
def demo_spec(tmp_path_factory):
    spec = build_demo(tmp_path_factory.mktemp("exits") / "demo", controversial=False, mlds=False,
                      classification=False)
    spec.write_text(spec.read_text() + EXITS.replace("{completed}", PROLIFIC_CODE))
    return spec


@pytest.fixture
def fake(monkeypatch, tmp_path):
    fake = FakeProlific(TOKEN)
    with Server(fake) as server:
        monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
        monkeypatch.setenv("PROLIFIC_API_URL", server.url)
        monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
        monkeypatch.setattr("time.sleep", lambda s: None)
        yield fake


def _landing(fake, sid, location):
    """The participant's browser arrives on Prolific's completion URL: the code is submitted."""
    target = urlsplit(location)
    assert (target.netloc, target.path) == ("app.prolific.com", "/submissions/complete"), location
    [code] = parse_qs(target.query)["cc"]
    fake.complete(sid, code)
    return code


def _arrive(client, fake, study, who, **headers):
    sid, url = fake.join(study, who)
    resp = client.get(urlsplit(url).path + "?" + urlsplit(url).query, headers=headers)
    return sid, resp


def _token(client, resp):
    pid = resp.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
    return pid, resp.headers["Location"].split("#token=")[1]


def _answer(client, pid, token, fail_catch: bool):
    """Every trial through the API: the true class alone at 100% on catch trials (or another class
    when ``fail_catch``), a middle rating elsewhere."""
    assert client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                       headers=auth(token)).status_code == 200
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    labels = [c["label"] for c in tl["categories"]]
    n_catch = 0
    for t in tl["trials"]:
        if t["type"] == "rating":
            ratings = dict.fromkeys(labels, 0.5)
            if t["kind"] == "catch":
                true = t["stimulus"].split("digit")[1][0]
                shown = next(x for x in labels if x != true) if fail_catch else true
                ratings = dict.fromkeys(labels, 0.0) | {shown: 1.0}
                n_catch += not t.get("practice")
            body = {"trial_index": t["index"], "trial_type": "rating",
                    "response": {"ratings": ratings}, "rt_ms": 900.0}
        else:
            body = {"trial_index": t["index"], "trial_type": "debrief",
                    "response": {"answers": {"strategy": "looked", "problems": "none"}}}
        assert client.post(f"/api/v1/participants/{pid}/trials", json=body,
                           headers=auth(token)).status_code == 201
    return n_catch


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_each_exit_of_the_demo_lands_on_prolific_with_its_code_and_action(
        database_url, demo_spec, fake):
    made = CliRunner().invoke(main, ["recruit", "prolific", "create", "demo",
                                     "--experiment", str(demo_spec),
                                     "--database-url", database_url])
    assert made.exit_code == 0, made.output
    [study] = fake.studies.values()
    sent = {c["code"]: (c["code_type"], c["actions"]) for c in study["completion_codes"]}
    assert sent["SCREEN01"] == ("FIXED_SCREENOUT", [
        {"action": "FIXED_SCREEN_OUT_PAYMENT", "fixed_screen_out_reward": 40, "slots": 5}])
    assert sent["NOCONSNT"] == ("NO_CONSENT", [{"action": "REQUEST_RETURN"}])
    study["status"] = "ACTIVE"
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                      "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(demo_spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    codes: dict[str, str] = {}
    sids: dict[str, str] = {}
    try:
        # completed, and failed attention (both finish every trial; the server decides which)
        for who, fail in (("completer", False), ("inattentive", True)):
            client = app.test_client()
            sids[who], resp = _arrive(client, fake, study["id"], who)
            pid, token = _token(client, resp)
            assert _answer(client, pid, token, fail_catch=fail) >= 2
            done = client.post(f"/api/v1/participants/{pid}/complete", headers=auth(token))
            codes[who] = _landing(fake, sids[who], done.get_json()["next"]["url"])

        # declined consent: the answer names Prolific's no-consent page; no way to the
        # completion code afterwards (no trial, no completion, the task page goes to Prolific)
        client = app.test_client()
        sids["decliner"], resp = _arrive(client, fake, study["id"], "decliner")
        pid, token = _token(client, resp)
        declined = client.post(f"/api/v1/participants/{pid}/consent", json={"agree": False},
                               headers=auth(token)).get_json()
        assert declined["status"] == "returned"
        codes["decliner"] = _landing(fake, sids["decliner"], declined["next"]["url"])
        assert client.post(f"/api/v1/participants/{pid}/complete",
                           headers=auth(token)).status_code == 409
        assert client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                           headers=auth(token)).get_json()["status"] == "returned"
        assert client.post(f"/api/v1/participants/{pid}/trials", headers=auth(token), json={
            "trial_index": 0, "trial_type": "rating", "response": {"ratings": {}}}).status_code \
            in (409, 422)
        again = client.get(f"/task/{pid}")
        assert again.status_code == 302 and "cc=NOCONSNT" in again.headers["Location"]

        # display too small after the calibration: a paid screen-out, decided on the record
        client = app.test_client()
        sids["small"], resp = _arrive(client, fake, study["id"], "small-screen")
        pid, token = _token(client, resp)
        client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                    headers=auth(token))
        shown = client.post(f"/api/v1/participants/{pid}/display", json=UNSUITABLE,
                            headers=auth(token))
        assert shown.status_code == 201
        codes["small"] = _landing(fake, sids["small"], shown.get_json()["next"]["url"])
        assert client.post(f"/api/v1/participants/{pid}/complete",
                           headers=auth(token)).status_code == 409

        # a phone: turned away at the link (no participant row), with the device code
        client = app.test_client()
        sids["phone"], resp = _arrive(client, fake, study["id"], "phone", **{"User-Agent": MOBILE})
        assert resp.status_code == 302
        codes["phone"] = _landing(fake, sids["phone"], resp.headers["Location"])

        # refused on return (resume policy "refuse"): the refusal page's link carries the code
        client = app.test_client()
        sids["returner"], resp = _arrive(client, fake, study["id"], "returner")
        pid, token = _token(client, resp)
        client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True},
                    headers=auth(token))
        first = client.get(f"/api/v1/participants/{pid}/timeline",
                           headers=auth(token)).get_json()["trials"][0]
        assert client.post(f"/api/v1/participants/{pid}/trials", headers=auth(token), json={
            "trial_index": 0, "trial_type": "rating", "rt_ms": 900.0, "response": {
                "ratings": {str(d): 0.0 for d in range(10)}}}).status_code == 201, first
        url = study["external_study_url"]
        for key, value in (("PROLIFIC_PID", "returner"), ("STUDY_ID", study["id"]),
                           ("SESSION_ID", sids["returner"])):
            url = url.replace("{{%" + key + "%}}", value)
        back = client.get(urlsplit(url).path + "?" + urlsplit(url).query)
        assert back.status_code == 409, back.get_data(as_text=True)
        page = back.get_data(as_text=True)
        assert 'id="exit-to-platform"' in page and 'id="withdraw-link"' in page
        href = page.split('id="exit-to-platform" href="')[1].split('"')[0].replace("&amp;", "&")
        codes["returner"] = _landing(fake, sids["returner"], href)

        assert codes == {"completer": PROLIFIC_CODE, "inattentive": "ATTENTN1",
                         "decliner": "NOCONSNT", "small": "SCREEN01", "phone": "DEVICE01",
                         "returner": "RETURN01"}
        state = {who: (fake.submissions[sid]["status"], fake.submissions[sid]["return_requested"])
                 for who, sid in sids.items()}
        assert state == {  # the states Prolific documents for each code's action
            "completer": ("AWAITING REVIEW", False), "inattentive": ("AWAITING REVIEW", False),
            "decliner": ("AWAITING REVIEW", True), "phone": ("AWAITING REVIEW", True),
            "small": ("SCREENED OUT", False), "returner": ("AWAITING REVIEW", False)}
        assert fake.submissions[sids["small"]]["screen_out_reward"] == 40

        # the export and the dashboard say which outcome each participant got
        with app.app_context():
            exp = db.session.execute(sa.select(Experiment).where(
                Experiment.slug == "demo")).scalar_one()
            table = participant_table(exp)
            outcomes = dict(zip(table["platform_id"], table["outcome"], strict=True))
            assert outcomes == {"completer": "completed", "inattentive": "failed_attention",
                                "decliner": "no_consent", "small-screen": "display_unsuitable",
                                "returner": "refused_on_return"}
            assert dict(zip(table["platform_id"], table["completion_code"], strict=True))[
                "decliner"] == "NOCONSNT"
        assert "outcome" in PARTICIPANT_COLUMNS
        admin = app.test_client()
        login(app, admin)
        rows = admin.get("/admin/experiments/demo").get_data(as_text=True)
        for outcome in ("no_consent", "display_unsuitable", "failed_attention",
                        "refused_on_return"):
            assert f'data-outcome="{outcome}"' in rows

        # a sync finds each exit's submission where its code's action put it: expected, not a
        # conflict (the decliner is "returned" here and AWAITING REVIEW on Prolific)
        synced = CliRunner().invoke(main, ["recruit", "prolific", "sync", "demo",
                                           "--experiment", str(demo_spec),
                                           "--database-url", database_url])
        assert synced.exit_code == 0, synced.output
        report = json.loads(synced.output[synced.output.index("{"):])
        assert report["conflicts"] == []
        assert {e["outcome"] for e in report["exits"]} >= {"no_consent"}
    finally:
        database.dispose(app)


def test_exits_are_refused_when_the_code_is_not_of_a_type_the_exit_takes(demo_spec, tmp_path):
    wrong = tmp_path / "demo"
    wrong.mkdir()
    for f in demo_spec.parent.iterdir():
        (wrong / f.name).symlink_to(f)
    (wrong / "experiment.toml").unlink()
    text = demo_spec.read_text().replace('code = "NOCONSNT"\ncode_type = "NO_CONSENT"',
                                         'code = "NOCONSNT"\ncode_type = "OTHER"')
    (wrong / "experiment.toml").write_text(text)
    with pytest.raises(SpecError, match=r"completion\.exits\.no_consent.*OTHER code.*NO_CONSENT"):
        load_spec(wrong / "experiment.toml")
    (wrong / "experiment.toml").write_text(demo_spec.read_text().replace(
        'prolific_code = "DEVICE01"', 'prolific_code = "UNLISTED"'))
    with pytest.raises(SpecError, match=r"incompatible_device\.prolific_code 'UNLISTED' is not "
                                        r"among recruitment\.prolific\.completion_codes"):
        load_spec(wrong / "experiment.toml")
    text = demo_spec.read_text()
    (wrong / "experiment.toml").write_text(text[:text.index("[[recruitment.prolific.completion")])
    with pytest.raises(SpecError, match=r"no_consent\.prolific_code 'NOCONSNT' is not among "):
        load_spec(wrong / "experiment.toml")  # an exit's code must be created on Prolific too
    (wrong / "experiment.toml").write_text(demo_spec.read_text().replace(
        "fixed_screen_out_reward = 40\n", ""))
    with pytest.raises(SpecError, match="FIXED_SCREEN_OUT_PAYMENT needs fixed_screen_out_reward"):
        load_spec(wrong / "experiment.toml")


UNSUITABLE_EXIT = "http://127.0.0.1:9/return?status={code}&id={participant_id}"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_sona_credits_only_the_exits_its_spec_credits_and_a_panel_gets_its_redirect(
        database_url, small_experiment, tmp_path, monkeypatch):
    from humanlike.server.tables.sona import SonaGrant
    from tests.server.fake_sona import RunningSona
    from tests.server.sources import app_factory, spec_with

    sona_site = RunningSona()
    try:
        sona_spec = spec_with(small_experiment, tmp_path / "sona", (
            '[platform]\npreset = "sona"\n'
            f'completion_url = "{sona_site.fake.client_side_url}"\n'
            f'server_completion_url = "{sona_site.fake.server_side_url}"\n\n'
            '[completion.exits.no_consent]\ncredit = false\n\n'
            f'[completion.exits.display_unsuitable]\ncredit = true\nurl = "{UNSUITABLE_EXIT}"\n'))
        panel_spec = spec_with(small_experiment, tmp_path / "panel", (
            '[platform]\npreset = "panel"\nparticipant_param = "rid"\nresume = "none"\n'
            'completion_url = "http://127.0.0.1:9/return?status=complete&id={participant_id}"\n\n'
            f'[completion.exits.display_unsuitable]\nurl = "{UNSUITABLE_EXIT}"\n'
            'code = "screenout"\n'))
        panel_spec.write_text(panel_spec.read_text().replace('slug = "small"', 'slug = "small-panel"'))
        with app_factory(database_url, tmp_path, monkeypatch) as make:
            app = make(sona_spec)
            declined, screened = sona_site.fake.sign_up(), sona_site.fake.sign_up()
            client = app.test_client()
            resp = client.get(f"/start/small?survey_code={declined}")
            pid, token = _token(client, resp)
            answer = client.post(f"/api/v1/participants/{pid}/consent", json={"agree": False},
                                 headers=auth(token)).get_json()
            assert answer == {"status": "returned"}  # no redirect declared: the polite page
            client = app.test_client()
            pid, token = _token(client, client.get(f"/start/small?survey_code={screened}"))
            shown = client.post(f"/api/v1/participants/{pid}/display", json=UNSUITABLE,
                                headers=auth(token)).get_json()
            own = shown["next"]["url"].split("status=")[1].split("&")[0]
            assert shown["next"]["url"] == f"http://127.0.0.1:9/return?status={own}&id={screened}"
            with app.test_request_context():  # the exit's own code, never the completion code
                assert len(own) == 10 and own != participant_code(pid)
            with app.app_context():
                granted = db.session.execute(sa.select(Participant.platform_id).join(
                    SonaGrant, SonaGrant.participant_id == Participant.id)).scalars().all()
            assert granted == [screened]
            assert (sona_site.fake.credited(screened), sona_site.fake.credited(declined)) == (1, 0)

            app = make(panel_spec)
            client = app.test_client()
            arrived = client.get("/start/small-panel?rid=R77")
            assert arrived.status_code == 302, arrived.get_data(as_text=True)
            pid, token = _token(client, arrived)
            shown = client.post(f"/api/v1/participants/{pid}/display", json=UNSUITABLE,
                                headers=auth(token)).get_json()
            assert shown["next"] == {"kind": "redirect",
                                     "url": "http://127.0.0.1:9/return?status=screenout&id=R77"}
    finally:
        sona_site.stop()
