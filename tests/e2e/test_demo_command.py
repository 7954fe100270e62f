"""`humanlike demo --prepare-only` (what `make demo` runs before serving): the demo database holds
simulated participants, the study report is written, and the demo's live panel scores the demo
models with a stopping target, so the dashboard shows every section at once."""

from __future__ import annotations

import shutil

import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main


def test_demo_prepares_participants_report_and_a_panel_that_scores_the_models(tmp_path, monkeypatch):
    from humanlike.server import create_app
    from humanlike.server.extensions import db
    from humanlike.server.live import panel
    from humanlike.server.tables.core import Experiment, PanelResult, Participant

    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    url = f"sqlite:///{tmp_path / 'demo.sqlite'}"
    result = CliRunner().invoke(main, ["demo", "--prepare-only", "--simulated", "4",
                                       "--database-url", url])
    assert result.exit_code == 0, result.output
    report = tmp_path / "instance" / "demo_report.html"
    assert f"study report:        {report}" in result.output and report.is_file()
    assert "Model scores" in report.read_text()
    # a rehearsal: recorded as simulated, analysed on purpose (the demo spec's analyse_simulated)
    assert "analysed: the demo is a rehearsal, [exclusion] analyse_simulated = true" in result.output
    assert "4 simulated (a rehearsal: " in report.read_text()
    assert "of them analysed, as asked for)" in report.read_text()
    assert "simulated on " in report.read_text().split('id="methods"')[1]
    spec = tmp_path / "instance" / "demo" / "experiment.toml"
    assert "[panel]" in spec.read_text() and "[stopping]" in spec.read_text()

    app = create_app({"SECRET_KEY": "t", "SQLALCHEMY_DATABASE_URI": url,
                      "EXPERIMENT_PATHS": [str(spec)]})
    with app.app_context():
        exp = db.session.execute(sa.select(Experiment).where(Experiment.slug == "demo")).scalar_one()
        assert db.session.execute(sa.select(sa.func.count(Participant.id)).where(
            Participant.experiment_id == exp.id, Participant.simulated)).scalar_one() == 4
        assert panel.refresh(exp, "test")
        result = db.session.get(PanelResult, exp.id).result
    scored = {row["model"] for row in result["scores"] if row["subset"] == "all"}
    assert scored == {"cnn", "logreg", "kde", "adv_cnn"}
    pairs = {frozenset((c["a"], c["b"])) for c in result["comparisons"] if c["subset"] == "all"}
    # the 6 pairs of 4 models and each model against the noise ceiling's lower bound
    assert len(pairs) == 10 and sum("lower" in p for p in pairs) == 4
    stop = result["stopping"]
    # the stopping rule decides model pairs under its declared monitoring (issue 38): the 6 pairs,
    # not the 4 comparisons with the ceiling, which no model comparison can settle
    assert stop["measure"] == "comparisons_decided" and stop["value"].endswith("of 6 decided")
    assert stop["scheme"] == "continuous" and "at any number of looks" in stop["guarantee"]
    assert result["mlds_scales"] and result["ec"]


def test_make_demo_serves_on_the_port_it_is_given(tmp_path, monkeypatch, panel_demo):
    """`make demo PORT=5055`: the Makefile hands the port to `humanlike demo`, whose links (and
    server) use it; the command line is read from `make -n` and run as the CLI (prepare only)."""
    import shlex
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    planned = subprocess.run(["make", "-n", "-C", str(root), "demo", "PORT=5055"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    line = next(cmd for cmd in planned if "humanlike demo" in cmd)
    args = shlex.split(line)
    assert Path(args[0]).name == "humanlike" and args[1] == "demo"
    assert args[args.index("--port") + 1] == "5055"

    monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
    shutil.copytree(panel_demo, tmp_path / "instance" / "demo")  # built once; the first test builds
    url = f"sqlite:///{tmp_path / 'demo.sqlite'}"
    result = CliRunner().invoke(main, [*args[1:], "--prepare-only", "--simulated", "0",
                                       "--database-url", url])
    assert result.exit_code == 0, result.output
    assert "researcher preview:  http://127.0.0.1:5055/start/demo  (log in" in result.output
    assert "Prolific-style link: http://127.0.0.1:5055/start/demo?PROLIFIC_PID=demo-" in result.output
    assert "http://127.0.0.1:5000" not in result.output


def test_serve_prints_the_prolific_url_template_as_demo_does(tmp_path, panel_demo):
    """`humanlike serve` prints each experiment's study URL for Prolific with Prolific's
    placeholders, the line `humanlike demo` prints (one function, ``cli.serve.echo_links``); the
    server runs as a process until it listens, then is stopped."""
    import os
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.server.conftest import write_small_experiment

    spec = write_small_experiment(tmp_path)
    slug = "small"
    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    expected = (f"  Prolific study URL:  http://127.0.0.1:{port}/start/{slug}?PROLIFIC_PID="
                "{{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}")
    humanlike = Path(sys.executable).parent / "humanlike"
    server = subprocess.Popen(
        [str(humanlike), "serve", "--experiment", str(spec), "--port", str(port), "--no-panel",
         "--database-url", f"sqlite:///{tmp_path / 'serve.sqlite'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:  # the links are printed before the server listens
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=10)
    lines = output.splitlines()
    assert expected in lines, output
    assert f"http://127.0.0.1:{port}/start/{slug}" in lines[lines.index(expected) - 1], lines
    shutil.copytree(panel_demo, tmp_path / "instance" / "demo")  # built once; the first test builds
    demo = CliRunner().invoke(main, ["demo", "--prepare-only", "--simulated", "0", "--port", str(port),
                                     "--database-url", f"sqlite:///{tmp_path / 'demo.sqlite'}"],
                              env={"HUMANLIKE_INSTANCE": str(tmp_path / "instance")})
    assert demo.exit_code == 0, demo.output
    assert expected.replace(f"/start/{slug}", "/start/demo") in demo.output.splitlines()
