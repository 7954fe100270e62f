"""``humanlike --server URL --token-file F ...`` (issue 40 item 2): the CLI as a client of the
researcher API, against one live server (SQLite) and the fake Prolific per module. The export
streams the dashboard's zip byte for byte; a bonus run twice is paid once, and one whose pay step
failed is asked again by the re-run; a token without ``spend`` gets the
API's 403 as one line; a token file others may read is refused; commands that need the
database refuse ``--server`` by name."""

from __future__ import annotations

import datetime as dt
import io
import os
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.participants import actions
from humanlike.server.study import experiments
from humanlike.server.tables.core import AuditEntry, Payment
from tests.e2e.conftest import LiveServer
from tests.server.admin.dashboard_helpers import csrf_from, login
from tests.server.conftest import write_small_experiment
from tests.server.fake_prolific import FakeProlific, Server
from tests.server.test_recruit_prolific import RECRUITMENT, TOKEN, pay_requests, take_part
from tests.server.test_research_api import person


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A migrated SQLite database with the small experiment listed on the fake Prolific, one
    participant who took part, tokens and the app served live."""
    tmp = tmp_path_factory.mktemp("remote")
    spec = write_small_experiment(tmp / "spec")
    spec.write_text(spec.read_text() + RECRUITMENT)
    url = f"sqlite:///{tmp / 'db.sqlite'}"
    fake = FakeProlific(TOKEN)
    with pytest.MonkeyPatch.context() as mp, Server(fake) as prolific:
        mp.setenv("PROLIFIC_TOKEN", TOKEN)
        mp.setenv("PROLIFIC_API_URL", prolific.url)
        mp.setenv("HUMANLIKE_INSTANCE", str(tmp / "instance"))
        mp.setattr("time.sleep", lambda s: None)
        app = create_app({"TESTING": True, "SECRET_KEY": "remote-secret",
                          "SQLALCHEMY_DATABASE_URI": url, "EXPERIMENT_PATHS": [str(spec)]})
        database.upgrade(app)
        experiments.sync_all(app)
        for step in ("create", "publish"):
            done = CliRunner().invoke(main, ["recruit", "prolific", step, "small",
                                             "--experiment", str(spec), "--database-url", url])
            assert done.exit_code == 0, done.output
        [study] = fake.studies.values()
        pid, _ = take_part(app, fake, study["id"], "PPP0200")
        tokens = {}
        for name, mode, secret in (
                ("full", 0o600, person(app, "olga", "owner", None,
                                       scopes=("view", "act", "spend", "reveal"))),
                ("nospend", 0o600, person(app, "rita", "researcher", "small", "act", "spend",
                                          scopes=("view", "act"))),
                ("open", 0o644, "hl_" + "z" * 43),
                ("unknown", 0o600, "hl_" + "x" * 43)):
            path = tmp / f"{name}.token"
            path.write_text(secret + "\n")
            path.chmod(mode)
            tokens[name] = path
        live = LiveServer(app)
        try:
            yield {"app": app, "url": live.url, "fake": fake, "pid": pid, "tokens": tokens,
                   "tmp": tmp}
        finally:
            live.stop()
            database.dispose(app)


def remote(served, token: str, *args: str):
    """The CLI with ``--server`` and the token file ``token``."""
    return CliRunner().invoke(main, ["--server", served["url"], "--token-file",
                                     str(served["tokens"][token]), *args])


def members(data: bytes) -> dict[str, bytes]:
    """A zip's files by name below its top folder (the folder is named for the time)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n.split("/", 1)[1]: zf.read(n) for n in zf.namelist() if not n.endswith("/")}


def test_export_streams_the_same_files_as_the_dashboards_download(served):
    out = served["tmp"] / "cli.zip"
    done = remote(served, "full", "export", "small", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert f"-> {out}" in done.output
    client = served["app"].test_client()
    login(served["app"], client)
    token = csrf_from(client.get("/admin/experiments/small").get_data(as_text=True))
    page = client.post("/admin/experiments/small/export.zip", data={"csrf_token": token})
    assert page.status_code == 200
    ours, theirs = members(out.read_bytes()), members(page.get_data())
    assert set(ours) == set(theirs) and "trials.csv" in ours and "codebook.json" in ours
    assert ours == theirs  # byte for byte, Parquet included
    assert b"PPP0200" in ours["participants.csv"]  # the full token may reveal platform ids
    folder = served["tmp"] / "into"
    pseudo = remote(served, "full", "export", "small", "--out", str(folder), "--pseudonymise")
    assert pseudo.exit_code == 0, pseudo.output
    [written] = folder.iterdir()
    assert written.name.startswith("small-") and written.suffix == ".zip"
    assert b"PPP0200" not in members(written.read_bytes())["participants.csv"]
    refused = remote(served, "full", "export", "small", "--out", str(folder), "--waves")
    assert refused.exit_code == 1 and "--waves cannot be used" in refused.output


def test_a_bonus_through_the_cli_twice_is_paid_once(served):
    pid, fake = served["pid"], served["fake"]
    sent = len(pay_requests(fake))
    args = ("recruit", "prolific", "bonus", "small", pid, "--amount", "0.40", "--reason", "cli")
    first = remote(served, "full", *args)
    assert first.exit_code == 0, first.output
    again = remote(served, "full", *args)
    assert again.exit_code == 0, again.output
    assert '"replayed": true' in again.output and '"replayed"' not in first.output
    assert len(pay_requests(fake)) == sent + 1
    with served["app"].app_context():
        [payment] = db.session.execute(sa.select(Payment).where(Payment.reason == "cli")
                                       ).scalars()
        assert payment.status == "paid" and str(payment.amount) == "0.40"
        assert payment.actor.startswith("token:olga/")


def test_a_bonus_whose_pay_step_failed_is_asked_again_by_a_rerun_and_paid_once(served):
    pid, fake, app = served["pid"], served["fake"], served["app"]
    sent, paid = len(pay_requests(fake)), len(fake.paid)
    args = ("recruit", "prolific", "bonus", "small", pid, "--amount", "0.25", "--reason", "retry")
    fake.fail_pay = 1  # a 503: Prolific may or may not have paid
    failed = remote(served, "full", *args)
    assert failed.exit_code == 1 and "state unknown" in failed.output
    with app.app_context():  # past the settle wait (Prolific pays asynchronously)
        payment = db.session.execute(sa.select(Payment).where(Payment.reason == "retry")
                                     ).scalar_one()
        payment.claimed_at -= actions.SETTLE_WAIT + dt.timedelta(seconds=1)
        db.session.commit()
    rerun = remote(served, "full", *args)  # the failure is replayed, the next key asks again
    assert rerun.exit_code == 0, rerun.output
    assert "checked Prolific: not paid" in rerun.output and '"replayed"' not in rerun.output
    third = remote(served, "full", *args)
    assert third.exit_code == 0 and '"replayed": true' in third.output
    assert len(pay_requests(fake)) == sent + 2 and len(fake.paid) == paid + 1
    with app.app_context():
        assert db.session.execute(sa.select(Payment.status).where(Payment.reason == "retry")
                                  ).scalar_one() == "paid"


def test_a_token_without_the_spend_scope_gets_the_403_as_one_line(served):
    before = len(pay_requests(served["fake"]))
    done = remote(served, "nospend", "recruit", "prolific", "bonus", "small", served["pid"],
                  "--amount", "0.30", "--reason", "not allowed")
    assert done.exit_code == 1
    [line] = done.output.strip().splitlines()
    assert line.startswith(f"Error: {served['url']} answered 403: forbidden:") and "'spend'" in line
    assert len(pay_requests(served["fake"])) == before
    with served["app"].app_context():
        assert db.session.execute(sa.select(Payment).where(
            Payment.reason == "not allowed")).first() is None


def test_a_token_file_others_may_read_is_refused_before_anything_is_sent(served):
    path = served["tokens"]["open"]
    done = remote(served, "open", "export", "small", "--out", str(served["tmp"] / "no.zip"))
    assert done.exit_code == 1
    assert f"--token-file {path}: permissions 0644 are too open" in done.output
    assert f"chmod 600 {path}" in done.output
    assert not (served["tmp"] / "no.zip").exists()
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"


def test_api_errors_are_one_line_and_change_nothing(served):
    with served["app"].app_context():
        audited = db.session.execute(sa.select(sa.func.count(AuditEntry.id))).scalar_one()
    unknown = remote(served, "unknown", "recruit", "prolific", "approve", "small", served["pid"])
    assert unknown.exit_code == 1 and "answered 401: the token in" in unknown.output
    missing = remote(served, "full", "recruit", "prolific", "approve", "small", "nobody")
    assert missing.exit_code == 1 and "answered 404: not found: no participant 'nobody'" in (
        missing.output)
    short = remote(served, "full", "recruit", "prolific", "reject", "small", served["pid"],
                   "--message", "too short")
    assert short.exit_code == 1 and "answered 400: refused: message: a rejection message needs" in (
        short.output)
    amount = remote(served, "full", "recruit", "prolific", "bonus", "small", served["pid"],
                    "--amount", "lots", "--reason", "r")
    assert amount.exit_code == 1 and f"--amount 'lots' for {served['pid']}" in amount.output
    wrong = remote(served, "full", "recruit", "mturk", "approve", "small", served["pid"])
    assert wrong.exit_code == 1 and "recruits on 'prolific'" in wrong.output
    with served["app"].app_context():
        assert db.session.execute(sa.select(sa.func.count(AuditEntry.id))).scalar_one() == audited


def test_commands_that_need_the_database_refuse_server_by_name(served):
    for name, args in (("delete-participant", ("small", served["pid"])),
                       ("recruit prolific create", ("small",)), ("db upgrade", ())):
        done = remote(served, "full", *name.split(), *args)
        assert done.exit_code == 1, done.output
        assert f"`humanlike {name}` does not work with --server" in done.output
    both = CliRunner().invoke(main, ["--server", served["url"], "export", "small", "--out", "x"])
    assert both.exit_code == 2 and "--server needs --token-file" in both.output
    assert Path("x").exists() is False
