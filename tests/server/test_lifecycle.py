"""Participant statuses change only along the declared transitions; platforms decide the completion."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from humanlike.server import lifecycle
from humanlike.server.extensions import db
from humanlike.server.lifecycle import (
    APPROVE,
    COMPLETE,
    REJECT,
    TIME_OUT,
    TRANSITIONS,
    ExperimentStatus,
    ParticipantStatus,
)
from humanlike.server.platforms import completion_code
from humanlike.server.tables.core import Participant
from humanlike.vocabulary import STIMULUS_KINDS
from tests.server.conftest import auth, enter

SERVER = Path(__file__).resolve().parents[2] / "server"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

# the table, written out independently of lifecycle.py
EXPECTED = {
    "consent": ({"allocated"}, "consented", "consented_at"),
    "decline": ({"allocated", "consented"}, "returned", None),
    "start": ({"allocated", "consented"}, "started", "started_at"),
    "complete": ({"allocated", "consented", "started"}, "completed", "completed_at"),
    "time_out": ({"allocated", "consented", "started"}, "timed_out", None),
    "approve": ({"completed", "submitted"}, "approved", None),
    "reject": ({"completed", "submitted"}, "rejected", None),
    "resume_allocated": ({"timed_out"}, "allocated", None),
    "resume_consented": ({"timed_out"}, "consented", None),
    "resume_started": ({"timed_out"}, "started", None),
    "submit": ({"completed"}, "submitted", None),
    "return": ({"allocated", "consented", "started", "timed_out", "completed", "submitted"},
               "returned", None),
    "unreject": ({"rejected"}, "approved", None),
}


def test_the_transition_table_is_as_documented():
    assert {t.name: (set(t.sources), t.target, t.stamp) for t in TRANSITIONS} == EXPECTED
    assert [s.value for s in ParticipantStatus] == [
        "allocated", "consented", "started", "completed", "submitted", "approved", "rejected",
        "returned", "quit_early", "timed_out"]
    assert [s.value for s in ExperimentStatus] == ["draft", "live", "closed"]


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: t.name)
def test_a_transition_moves_only_from_its_sources_and_stamps_its_time(transition):
    for status in ParticipantStatus:
        row = SimpleNamespace(status=status.value, consented_at=None, started_at=None,
                              completed_at=None)
        moved = transition.apply(row, NOW)
        assert moved == (status in transition.sources)
        assert row.status == (transition.target if moved else status)
        stamped = {k for k in ("consented_at", "started_at", "completed_at") if getattr(row, k)}
        assert stamped == ({transition.stamp} if moved and transition.stamp else set())


def test_the_named_groups():
    assert {"allocated", "consented"} == lifecycle.PRE_TRIAL
    assert {"started", "completed", "submitted", "approved"} == lifecycle.FILLED
    assert {"completed", "submitted", "approved", "rejected"} == lifecycle.DONE
    assert APPROVE.sources == REJECT.sources and COMPLETE.target in APPROVE.sources
    assert TIME_OUT.sources == COMPLETE.sources


def test_consenting_twice_is_a_silent_no_op(app, client):
    pid, token = enter(client)
    url = f"/api/v1/participants/{pid}/consent"
    assert client.post(url, json={"agree": True}, headers=auth(token)).get_json() == {
        "status": "consented"}
    with app.app_context():
        first = db.session.execute(sa.select(Participant.consented_at)).scalar_one()
    again = client.post(url, json={"agree": True}, headers=auth(token))
    assert again.status_code == 200 and again.get_json() == {"status": "consented"}
    with app.app_context():
        assert db.session.execute(sa.select(Participant.consented_at)).scalar_one() == first


def test_the_completion_code_is_the_prolific_code_or_the_participants_own():
    """Prolific's fixed code; otherwise the participant's own, an HMAC of the public id under the
    server's key (issue 45 item 9: it was the public id's first 8 characters, visible in the URL)."""
    import base64
    import hashlib
    import hmac

    from flask import Flask

    spec = {"completion": {"prolific_code": "CODE1234"}}
    row = SimpleNamespace(public_id="0a1b2c3d4e5f6a7b", experiment=SimpleNamespace(spec=spec))
    app = Flask(__name__)
    app.config["SECRET_KEY"] = "k"
    own = base64.b32encode(hmac.new(b"k", b"completion:0a1b2c3d4e5f6a7b", hashlib.sha256)
                           .digest()).decode()[:10]
    with app.app_context():
        assert completion_code(SimpleNamespace(**vars(row), platform="prolific")) == "CODE1234"
        for platform in ("mturk", "local"):
            code = completion_code(SimpleNamespace(**vars(row), platform=platform))
            assert code == own and "0A1B2C3D" not in code.upper()


@pytest.mark.parametrize("word", [*(s.value for s in ParticipantStatus),
                                  *(s.value for s in ExperimentStatus), *STIMULUS_KINDS])
def test_each_status_and_stimulus_kind_is_spelled_out_once_in_the_server(word):
    """The CLI names commands after methods ("mlds"), so cli.py and commands/ are not searched;
    psiTurk's own ``mode`` vocabulary (debug / sandbox / live, a query parameter of psiTurk's
    protocol, not an experiment status) is spelled out once in its own module, left out here."""
    pattern = re.compile(rf"[\"']{word}[\"']")
    psiturk_modes = SERVER / "psiturk" / "modes.py"
    files = [p for p in [*SERVER.rglob("*.py"), SERVER.parent / "humanlike" / "vocabulary.py"]
             if p.name != "cli.py" and "commands" not in p.parts and p != psiturk_modes]
    hits = [str(p) for p in files for _ in pattern.finditer(p.read_text())]
    assert len(hits) == 1, hits
