"""Bad psiTurk projects fail at start naming the file and the key; tolerable ones (obsolete or
misplaced keys, a custom.py that cannot import) start with warnings."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import database
from humanlike.server.psiturk.project import PsiturkProjectError, load_project
from tests.server.psiturk.conftest import make_app


def test_the_example_project_loads_with_psiturks_defaults(stroop_project):
    project = load_project(stroop_project)
    assert (project.code_version, project.num_conds, project.num_counters) == ("0.0.1", 1, 1)
    assert project.cutoff_minutes == 30 and project.allow_repeats is False
    assert project.browser_exclude_rule == ("MSIE", "mobile", "tablet")
    assert project.slug == "psiturk-psiturk-example"


def test_missing_exp_html_names_the_file(stroop_project):
    (stroop_project / "templates" / "exp.html").unlink()
    with pytest.raises(PsiturkProjectError, match=r"templates/exp\.html: missing"):
        load_project(stroop_project)


def test_missing_config_names_the_file(stroop_project):
    (stroop_project / "config.txt").unlink()
    with pytest.raises(PsiturkProjectError, match=r"config\.txt: missing"):
        load_project(stroop_project)


@pytest.mark.parametrize("text, match", [
    ("num_conds = 2\n[Task Parameters]\n", r"config\.txt: line 1: a key before any \[section\]"),
    ("[Task Parameters]\nnum_conds = two\n", r"config\.txt: \[Task Parameters\] num_conds = 'two' is not a whole number"),
    ("[Task Parameters]\nnum_counters = 0\n", r"\[Task Parameters\] num_counters = 0 must be >= 1"),
    ("[Task Parameters]\ncutoff_time = soon\n", r"\[Task Parameters\] cutoff_time = 'soon'"),
    ("[Task Parameters]\nallow_repeats = perhaps\n", r"\[Task Parameters\] allow_repeats = 'perhaps' is not true/false"),
    ("[Task Parameters\nnum_conds = 1\n", r"config\.txt: line 1"),
])
def test_malformed_config_names_file_and_key(stroop_project, text, match):
    (stroop_project / "config.txt").write_text(text)
    with pytest.raises(PsiturkProjectError, match=match):
        load_project(stroop_project)


def test_obsolete_and_misplaced_keys_are_tolerated(stroop_project):
    (stroop_project / "config.txt").write_text(
        "[HIT Configuration]\ntitle = Stroop\namt_keywords = old\ncutoff_time = 45\n"
        "[Server Parameters]\nadserver_revproxy_host = old.example\nuse_psiturk_ad_server = true\n"
        "[Task Parameters]\nexperiment_code_version = 2.0\nnum_conds = 3\n"
        "[Secure Ad Server]\nuse_psiturk_ad_server = true\n")
    project = load_project(stroop_project)
    assert (project.title, project.code_version, project.num_conds) == ("Stroop", "2.0", 3)
    assert project.cutoff_minutes == 45
    assert any("cutoff_time" in w and "[HIT Configuration]" in w for w in project.warnings)
    assert any("Secure Ad Server" in w for w in project.warnings)


def test_custom_py_that_cannot_import_is_skipped_with_a_warning(database_url, stroop_project):
    (stroop_project / "custom.py").write_text(
        "from psiturk.amt_services_wrapper import MTurkServicesWrapper\n")
    app = make_app(database_url, stroop_project)
    warnings = app.extensions["psiturk_warnings"]
    assert len(warnings) == 1 and "custom.py: not served" in warnings[0]
    assert app.test_client().get("/ad?hitId=H&assignmentId=A&workerId=W&mode=live").status_code == 200
    database.dispose(app)


def test_serve_refuses_a_bad_project_naming_file_and_key(stroop_project, tmp_path):
    (stroop_project / "config.txt").write_text("[Task Parameters]\nnum_conds = x\n")
    result = CliRunner().invoke(main, ["serve", "--psiturk", str(stroop_project), "--database-url",
                                       f"sqlite:///{tmp_path / 'db.sqlite'}"])
    assert result.exit_code != 0
    assert "config.txt: [Task Parameters] num_conds = 'x' is not a whole number" in result.output


def test_serve_prints_each_config_warning_once(stroop_project, tmp_path):
    """``humanlike serve --psiturk``: a misplaced key and a custom.py that cannot import are each
    reported once on the terminal (stdout and stderr together), not by the log and again by the
    command."""
    import os
    import socket
    import subprocess
    import sys
    import time

    config = stroop_project / "config.txt"
    config.write_text(config.read_text().replace("[Task Parameters]",
                                                 "[Task Parameters]\ntitle = Moved title", 1))
    (stroop_project / "custom.py").write_text("import no_such_module_here\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, SECRET_KEY="t", HUMANLIKE_PANEL_THREAD="0")
    server = subprocess.Popen(
        [sys.executable, "-c", "import sys; from humanlike.cli import main; sys.exit(main())",
         "serve", "--psiturk", str(stroop_project), "--port", str(port), "--no-panel",
         "--database-url", f"sqlite:///{tmp_path / 'db.sqlite'}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, lines = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            line = server.stdout.readline()
            lines.append(line)
            if "psiTurk project" in line or server.poll() is not None:
                break
    finally:
        server.terminate()
        rest, _ = server.communicate(timeout=30)
    output = "".join(lines) + rest
    assert "psiTurk project" in output, output
    assert output.count("key 'title' belongs in [HIT Configuration]") == 1, output
    assert output.count("custom.py: not served") == 1, output
