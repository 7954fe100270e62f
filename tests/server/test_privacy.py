"""Privacy: deleting a participant on request (audit-logged without the platform id in clear) and
the pseudonymised export (no platform, study or session id in any file)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server.extensions import db
from humanlike.server.rights.pseudonyms import (
    PREFIX,
    PSEUDONYM_HEX,
    key_from_secret,
    keyed_hash,
    pseudonym,
)
from humanlike.server.tables.core import AuditEntry, Event, Participant, Trial
from tests.server.conftest import auth, enter
from tests.server.test_api_trials import consent, first_rating_index, rating_body

PID, STUDY, SESSION = "PIDSECRET0001", "STUDYSECRET9", "SESSIONSECRET7"
SECRET = "test-secret"  # the app fixture's SECRET_KEY


@pytest.fixture
def cli(database_url, tmp_path, monkeypatch):
    """Run ``humanlike`` against the test database with the app fixture's SECRET_KEY."""
    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    monkeypatch.setenv("SECRET_KEY", SECRET)

    def run(*args: str, input: str | None = None):
        return CliRunner().invoke(main, [*args, "--database-url", database_url], input=input)

    return run


def participant_with_data(app, platform_id: str = PID) -> str:
    """A consented participant with one trial and one event; returns the public id."""
    client = app.test_client()
    pid, token = enter(client, f"PROLIFIC_PID={platform_id}&STUDY_ID={STUDY}&SESSION_ID={SESSION}")
    consent(client, pid, token)
    index = first_rating_index(client, pid, token)
    assert client.post(f"/api/v1/participants/{pid}/trials", json=rating_body(index),
                       headers=auth(token)).status_code == 201
    assert client.post(f"/api/v1/participants/{pid}/events", json={"type": "blur", "value": 1},
                       headers=auth(token)).status_code == 201
    return pid


def counts(app, public_id: str) -> tuple[int, int, int]:
    """(participants, trials, events) of one participant still stored."""
    with app.app_context():
        ids = db.session.execute(sa.select(Participant.id).where(
            Participant.public_id == public_id)).scalars().all()
        n = [db.session.execute(sa.select(sa.func.count()).select_from(m).where(
            m.participant_id.in_(ids))).scalar_one() for m in (Trial, Event)]
    return len(ids), n[0], n[1]


def test_delete_participant_removes_their_rows_and_audits_a_hash_of_the_platform_id(app, cli):
    gone = participant_with_data(app)
    kept = participant_with_data(app, "OTHERPID0002")
    result = cli("delete-participant", "small", PID, "--reason", "withdrawal request", "--yes")
    assert result.exit_code == 0, result.output
    assert f"deleted participant {gone}" in result.output and "1 trials, 1 events" in result.output
    assert counts(app, gone) == (0, 0, 0) and counts(app, kept) == (1, 1, 1)
    with app.app_context():
        entry = db.session.execute(sa.select(AuditEntry)).scalar_one()
    assert (entry.action, entry.experiment, entry.target) == ("delete_participant", "small", gone)
    assert entry.actor.startswith("cli:") and entry.detail["reason"] == "withdrawal request"
    assert entry.detail["n_trials"] == 1 and entry.detail["n_events"] == 1
    stored = json.dumps([entry.actor, entry.target, entry.detail])
    assert PID not in stored
    assert entry.detail["platform_id_hmac"] == keyed_hash(key_from_secret(SECRET), "small", PID)


def test_delete_participant_asks_first_and_accepts_the_public_id(app, cli):
    gone = participant_with_data(app)
    declined = cli("delete-participant", "small", gone, input="n\n")
    assert declined.exit_code != 0 and counts(app, gone) == (1, 1, 1)
    with app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(AuditEntry)).scalar_one() == 0
    confirmed = cli("delete-participant", "small", gone, input="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert counts(app, gone) == (0, 0, 0)


def test_delete_participant_names_an_unknown_participant_and_deletes_nothing(app, cli):
    kept = participant_with_data(app)
    result = cli("delete-participant", "small", "NOBODY", "--yes")
    assert result.exit_code != 0 and "no participant with id 'NOBODY'" in result.output
    unknown_study = cli("delete-participant", "nope", PID, "--yes")
    assert unknown_study.exit_code != 0 and "no experiment 'nope'" in unknown_study.output
    assert counts(app, kept) == (1, 1, 1)


def files_holding(folder, needles: list[str]) -> list[str]:
    """Files of an export folder in which any needle occurs (raw bytes, and parquet values)."""
    hits = []
    for path in sorted(folder.iterdir()):
        texts = [path.read_bytes().decode("utf-8", "replace")]
        if path.suffix == ".parquet":
            texts.append(pd.read_parquet(path).astype(str).to_csv())
        if any(needle in text for needle in needles for text in texts):
            hits.append(path.name)
    return hits


def test_the_pseudonymised_export_has_no_platform_id_in_any_file(app, cli, tmp_path):
    participant_with_data(app)
    needles = [PID, STUDY, SESSION]
    plain = cli("export", "small", "--out", str(tmp_path / "plain"))
    assert plain.exit_code == 0, plain.output
    assert "participants.csv" in files_holding(tmp_path / "plain", needles)  # the check can fail
    outs = []
    for name in ("p1", "p2"):
        result = cli("export", "small", "--out", str(tmp_path / name), "--pseudonymise")
        assert result.exit_code == 0, result.output
        assert files_holding(tmp_path / name, needles) == []
        outs.append(pd.read_csv(tmp_path / name / "participants.csv"))
    key = key_from_secret(SECRET)
    row = outs[0].iloc[0]
    assert row["platform_id"] == pseudonym(key, "small", PID)
    assert len(row["platform_id"]) == len(PREFIX) + PSEUDONYM_HEX
    assert (row["study_id"], row["session_id"]) == (pseudonym(key, "small", STUDY),
                                                    pseudonym(key, "small", SESSION))
    assert outs[0].equals(outs[1])  # stable across exports
    trials = pd.read_csv(tmp_path / "p1" / "trials.csv")
    assert set(trials["platform_id"]) == {row["platform_id"]}
    book = json.loads((tmp_path / "p1" / "codebook.json").read_text())
    assert book["participants"]["platform_id"].startswith("pseudonym: 'pn-' + the first 16 hex digits of HMAC-SHA256")


def test_a_key_file_gives_other_pseudonyms_and_a_short_key_is_refused(app, cli, tmp_path):
    participant_with_data(app)
    key_file = tmp_path / "key"
    key_file.write_text("an explicit key of enough length\n")
    result = cli("export", "small", "--out", str(tmp_path / "k"), "--key-file", str(key_file))
    assert result.exit_code == 0, result.output
    assert files_holding(tmp_path / "k", [PID]) == []
    row = pd.read_csv(tmp_path / "k" / "participants.csv").iloc[0]
    assert row["platform_id"] == pseudonym(b"an explicit key of enough length", "small", PID)
    assert row["platform_id"] != pseudonym(key_from_secret(SECRET), "small", PID)
    key_file.write_text("short")
    refused = cli("export", "small", "--out", str(tmp_path / "s"), "--key-file", str(key_file))
    assert refused.exit_code != 0 and "at least 16 bytes" in refused.output


def test_pseudonyms_depend_on_the_key_and_the_experiment():
    key = key_from_secret("k")
    assert pseudonym(key, "a", "X") == pseudonym(key, "a", "X")
    assert pseudonym(key, "a", "X") != pseudonym(key, "b", "X")
    assert pseudonym(key, "a", "X") != pseudonym(key_from_secret("other"), "a", "X")
    assert pseudonym(key, "ab", "c") != pseudonym(key, "a", "bc")  # the slug is delimited
