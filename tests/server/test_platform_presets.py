"""Participant sources declared in server/platforms.py: presets, a spec's [platform] overrides,
entry parameters, completion targets, resume rules, and a Connect-style spec end to end."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from werkzeug.datastructures import MultiDict

from humanlike.server import platforms
from humanlike.server.extensions import db
from humanlike.server.platforms import PRESETS, Entry, EntryError, Platform, entry_from_params
from humanlike.server.study.spec import SpecError, load_spec
from humanlike.server.tables.core import Participant
from tests.server.conftest import auth, enter
from tests.server.sources import answer, app_factory, spec_with


@pytest.fixture
def source_app(database_url, tmp_path, monkeypatch):
    """``source_app(spec_path)``: an app serving that spec on the test database."""
    with app_factory(database_url, tmp_path, monkeypatch) as make:
        yield make


# --- presets and parameters ---------------------------------------------------------------

def test_every_platform_has_a_preset_whose_name_fits_the_column():
    assert set(PRESETS) == set(Platform)
    assert all(len(p.value) <= 16 for p in Platform)  # participant.platform is String(16)
    assert all(PRESETS[p].platform == p for p in Platform)


@pytest.mark.parametrize(("query", "expected"), [
    ("PROLIFIC_PID=abc123&STUDY_ID=s1&SESSION_ID=x1",
     Entry(Platform.PROLIFIC, "abc123", study_id="s1", session_id="x1")),
    ("workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https://workersandbox.mturk.com",
     Entry(Platform.MTURK, "W1", assignment_id="A1", hit_id="H1",
           turk_submit_to="https://workersandbox.mturk.com")),
    ("assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1", Entry(Platform.MTURK, None, preview=True)),
    ("", None),
])
def test_prolific_and_mturk_links_read_as_before(query, expected):
    args = MultiDict([tuple(kv.split("=", 1)) for kv in query.split("&") if kv])
    found = (entry_from_params(PRESETS[Platform.PROLIFIC], args)
             or entry_from_params(PRESETS[Platform.MTURK], args))
    assert found == expected


@pytest.mark.parametrize(("query", "message"), [
    ("PROLIFIC_PID=", "PROLIFIC_PID is empty"),
    ("assignmentId=A1", "workerId is missing"),
    ("workerId=W1&assignmentId=A1&turkSubmitTo=https://evil.example", "turkSubmitTo"),
    ("PROLIFIC_PID=a%20b", "unexpected format"),
])
def test_malformed_links_are_refused_with_the_parameter_named(query, message):
    args = MultiDict([tuple(kv.split("=", 1)) for kv in query.split("&")])
    args = MultiDict([(k, v.replace("%20", " ")) for k, v in args.items()])
    with pytest.raises(EntryError, match=message):
        entry_from_params(PRESETS[Platform.PROLIFIC], args) or entry_from_params(
            PRESETS[Platform.MTURK], args)


def test_a_declared_panel_reads_only_its_own_parameter_names():
    rules = platforms.resolve({"preset": "panel", "participant_param": "pid",
                               "session_param": "sid", "study_param": "wave",
                               "completion_url": "https://panel.example/done?c={code}"})
    args = MultiDict({"pid": "P-9", "sid": "S1", "wave": "w2"})
    assert entry_from_params(rules, args) == Entry(Platform.PANEL, "P-9", study_id="w2",
                                                   session_id="S1")
    assert entry_from_params(rules, MultiDict({"PROLIFIC_PID": "x"})) is None
    narrow = platforms.resolve({"preset": "sona", "id_pattern": r"\d{5}"})
    with pytest.raises(EntryError, match="survey_code"):
        entry_from_params(narrow, MultiDict({"survey_code": "12ab5"}))


# --- the spec's platform section ----------------------------------------------------------

def test_a_preset_name_keeps_the_spec_hash_of_a_plain_platform_field(small_experiment):
    """``platform = "prolific"`` dumps as the same string as before presets, so no spec version
    changes: the canonical JSON still carries ``"platform":"prolific"``."""
    spec = load_spec(small_experiment)
    assert spec.platform_name == Platform.PROLIFIC
    assert '"platform":"prolific"' in spec.canonical_json()


@pytest.mark.parametrize(("table", "message"), [
    ('[platform]\npreset = "connect"\n', "needs completion_url"),
    ('[platform]\npreset = "panel"\ncompletion_url = "https://p.example/?c={code}"\n',
     "needs participant_param"),
    ('[platform]\npreset = "connect"\ncompletion_url = "https://p.example/?c={cod}"\n',
     "unknown placeholder"),
    ('[platform]\npreset = "connect"\ncompletion_url = "http://p.example/?c={code}"\n',
     "completion_url"),
    ('[platform]\npreset = "connect"\ncompletion_url = "https://p.example/"\nsessions = 2\n',
     "sessions > 1"),
    ('[platform]\npreset = "prolific"\nparticipant_param = "pid"\n', "takes no overrides"),
    ('[platform]\npreset = "connect"\ncompletion_url = "https://p.example/"\n'
     'server_completion_url = "https://p.example/grant"\n', "SONA"),
    ('[platform]\npreset = "lab"\nid_pattern = "[a-"\n', "not a regular expression"),
    ('[platform]\npreset = "skype"\n', "platform"),
])
def test_a_bad_platform_table_is_refused_naming_file_and_field(small_experiment, tmp_path, table,
                                                                message):
    spec = spec_with(small_experiment, tmp_path / "exp", table)
    with pytest.raises(SpecError, match=message) as err:
        load_spec(spec)
    assert str(spec) in str(err.value) and "platform" in str(err.value)


def test_a_lab_spec_runs_full_screen_unless_it_says_otherwise(small_experiment, tmp_path):
    lab = load_spec(spec_with(small_experiment, tmp_path / "a", 'platform = "lab"\n'))
    assert lab.fullscreen is True and lab.platform_name == Platform.LAB
    windowed = spec_with(small_experiment, tmp_path / "b", 'platform = "lab"\n')
    windowed.write_text("fullscreen = false\n" + windowed.read_text())
    assert load_spec(windowed).fullscreen is False


# --- a Connect-style panel declared by its parameters only ---------------------------------

CONNECT = """\
[platform]
preset = "panel"
participant_param = "participantId"
session_param = "assignmentId"
study_param = "projectId"
completion_url = "https://connect.example/participant/project/{study_id}/complete?code={code}"
completion_code = "CONNECT42"
"""


def test_a_connect_style_spec_runs_a_participant_end_to_end_with_resume(
        small_experiment, tmp_path, source_app):
    app = source_app(spec_with(small_experiment, tmp_path / "connect", CONNECT))
    link = "participantId=CR-77&assignmentId=AS-1&projectId=PRJ9"
    first = app.test_client()
    pid, token = enter(first, link)
    n = answer(first, pid, token, upto=3)
    # the browser is closed: a fresh one follows the same link and resumes the same participant
    second = app.test_client()
    again, token2 = enter(second, link)
    assert again == pid and token2 != token
    stale = first.post(f"/api/v1/participants/{pid}/events", json={"type": "blur"},
                       headers=auth(token))
    assert stale.status_code == 403  # the first browser's token was revoked
    timeline = second.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token2)).get_json()
    assert len(timeline["acknowledged"]) == 3
    answer(second, pid, token2)
    done = second.post(f"/api/v1/participants/{pid}/complete", headers=auth(token2))
    assert done.status_code == 200
    assert done.get_json()["next"] == {
        "kind": "redirect",
        "url": "https://connect.example/participant/project/PRJ9/complete?code=CONNECT42"}
    with app.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.platform, row.platform_id, row.session_id, row.study_id, row.n_trials,
                row.status) == ("panel", "CR-77", "AS-1", "PRJ9", n, "completed")
    # another assignment of the same participant id is a second participation: refused
    third = app.test_client().get("/start/small?participantId=CR-77&assignmentId=AS-2"
                                  "&projectId=PRJ9")
    assert third.status_code == 409 and "already taken part" in third.get_data(as_text=True)


def test_a_connect_preset_link_with_another_session_cannot_take_over(small_experiment, tmp_path,
                                                                     source_app):
    table = '[platform]\npreset = "connect"\ncompletion_url = "https://c.example/done"\n'
    app = source_app(spec_with(small_experiment, tmp_path / "connect", table))
    pid, _ = enter(app.test_client(), "participantId=CR-1&assignmentId=A-1&projectId=P")
    other = app.test_client().get("/start/small?participantId=CR-1&assignmentId=A-2&projectId=P")
    assert other.status_code == 409
    with app.app_context():
        row = db.session.execute(sa.select(Participant)).scalar_one()
        assert (row.public_id, row.platform, row.session_id) == (pid, "connect", "A-1")


# --- lab sessions -------------------------------------------------------------------------

LAB = '[platform]\npreset = "lab"\nid_pattern = "P[0-9]{2}"\nsessions = 2\n'


def lab_start(client, typed: str, session: str = ""):
    """The experimenter's form, submitted with its CSRF token."""
    page = client.get("/lab/small").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    return client.post("/lab/small", data={"participant_id": typed, "session": session,
                                           "csrf_token": csrf})


def test_lab_ids_follow_the_spec_and_each_session_is_its_own_participant(
        small_experiment, tmp_path, source_app):
    app = source_app(spec_with(small_experiment, tmp_path / "lab", LAB))
    app.config["WTF_CSRF_ENABLED"] = True
    experimenter = app.test_client()
    no_token = experimenter.post("/lab/small", data={"participant_id": "P07"})
    assert no_token.status_code == 400
    for typed, session, message in [("P7", "1", "format"), ("P07", "3", "1 to 2"),
                                    ("P07:1", "1", "format"), ("", "1", "Type the participant id"),
                                    ("P07", "x", "1 to 2")]:
        refused = lab_start(experimenter, typed, session)
        assert refused.status_code == 400 and message in refused.get_data(as_text=True)
    first = lab_start(experimenter, "P07", "1")
    second = lab_start(app.test_client(), "P07", "2")
    assert first.status_code == second.status_code == 302
    with app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(Participant)
                                  ).scalar_one() == 2
        rows = db.session.execute(sa.select(Participant.platform, Participant.platform_id,
                                            Participant.session_id).order_by(Participant.id)).all()
        assert [tuple(r) for r in rows] == [("lab", "P07:1", "1"), ("lab", "P07:2", "2")]
    # a crashed lab machine: the same id and session typed on another one resumes it
    pid = first.headers["Location"].split("#")[0].rsplit("/", 1)[-1]
    again = lab_start(app.test_client(), "P07", "1")
    assert again.status_code == 302 and again.headers["Location"].split("#")[0].endswith(pid)


def test_the_lab_page_is_only_for_lab_studies(client):
    assert client.get("/lab/small").status_code == 404  # the small study recruits on Prolific
    assert client.get("/lab/nope").status_code == 404
