"""``humanlike --as LOGIN``: a CLI command acting on a study checks that login's permissions
first (refused: nothing done, the message names the login and the permission) and the audit log
names both the system login and the dashboard login (issue 40)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server.extensions import db
from humanlike.server.lab.access import GRANTABLE
from humanlike.server.tables.access import StudyMember
from humanlike.server.tables.core import AdminUser, AuditEntry, Experiment, Participant
from tests.server.test_privacy import SECRET, participant_with_data

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def member(app, name: str, role: str, *ticks: str) -> None:
    with app.app_context():
        user = AdminUser(username=name, role=role)
        user.set_password("a good long password")
        db.session.add(user)
        db.session.flush()
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "small")
                                 ).scalar_one()
        db.session.add(StudyMember(user_id=user.id, experiment_id=exp.id,
                                   **{f"can_{p.value}": p.value in ticks for p in GRANTABLE}))
        db.session.commit()


@SQLITE
def test_the_cli_checks_the_as_login_and_names_it_in_the_audit_log(app, database_url, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    monkeypatch.setenv("SECRET_KEY", SECRET)
    pid = participant_with_data(app)
    member(app, "vera", "viewer", "reveal", "delete")  # a viewer: the ticks are ignored
    member(app, "dora", "researcher", "delete")

    def run(*args: str):
        return CliRunner().invoke(main, [*args, "--database-url", database_url])

    refused = run("--as", "vera", "delete-participant", "small", pid, "--yes")
    assert refused.exit_code != 0
    assert "--as vera" in refused.output and "'delete'" in refused.output
    plain = run("--as", "vera", "export", "small", "--out", str(tmp_path / "plain"))
    assert plain.exit_code != 0 and "'reveal'" in plain.output
    assert not (tmp_path / "plain").exists()
    pseudonymised = run("--as", "vera", "export", "small", "--pseudonymise", "--out",
                        str(tmp_path / "pseudo"))
    assert pseudonymised.exit_code == 0, pseudonymised.output
    nobody = run("--as", "ghost", "delete-participant", "small", pid, "--yes")
    assert nobody.exit_code != 0 and "no active login" in nobody.output
    with app.app_context():
        assert db.session.execute(sa.select(sa.func.count()).select_from(Participant)
                                  ).scalar_one() == 1
    done = run("--as", "dora", "delete-participant", "small", pid, "--yes")
    assert done.exit_code == 0, done.output
    with app.app_context():
        actor = db.session.execute(sa.select(AuditEntry.actor).where(
            AuditEntry.action == "delete_participant")).scalar_one()
    assert actor.startswith("cli:") and actor.endswith(" as dora")
