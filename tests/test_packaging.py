"""The wheel: one `humanlike` namespace with package data, installable and runnable on its own."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)],
        check=True, capture_output=True, cwd=out,
    )
    (path,) = out.glob("humanlike-*.whl")
    return path


def test_the_wheel_holds_one_namespace_with_static_files_templates_and_migrations(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("humanlike-")}
    assert top == {"humanlike"}, top  # no generic top-level `server` or `analysis`
    for needed in ("humanlike/cli/__init__.py", "humanlike/cli/analyze_ratings.py",
                   "humanlike/server/__init__.py", "humanlike/analysis/__init__.py",
                   "humanlike/stimuli/__init__.py", "humanlike/deploy/__init__.py",
                   "humanlike/static/js/runner.js", "humanlike/static/js/plugins/rating.js",
                   "humanlike/templates/task.html", "humanlike/migrations/env.py",
                   "humanlike/migrations/versions/0001_initial_schema.py",
                   "humanlike/migrations/versions/0002_trial_design.py",
                   "humanlike/vocabulary.py",
                   "humanlike/server/demo_files/experiment.toml",
                   "humanlike/server/demo_files/mlds_block.toml",
                   "humanlike/server/demo_files/consent.md",
                   "humanlike/server/demo_files/instructions.md",
                   "humanlike/analysis/report/templates/report.html.j2",
                   "humanlike/analysis/figures.py", "humanlike/server/simulate.py",
                   "humanlike/deploy/gunicorn_conf.py", "humanlike/deploy/stack.py",
                   "humanlike/deploy/Caddyfile", "humanlike/deploy/granian.env"):
        assert needed in names, needed
    # jsPsych comes from npm at build time (never from git) and ships inside the wheel
    assert "humanlike/static/vendor/jspsych/jspsych.js" in names


def test_the_wheel_installs_into_a_fresh_venv_and_runs(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    bindir = env_dir / "bin"
    fresh_site = Path(subprocess.run(
        [bindir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    # dependencies come from the project's environment (no network); humanlike from the wheel only
    (fresh_site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bindir / "python"), "install",
                    "--no-deps", "-q", str(wheel)], check=True, capture_output=True)
    run = subprocess.run([bindir / "humanlike", "--help"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    help_out = run.stdout
    for command in ("serve", "demo", "db", "create-admin", "export", "analyze", "stimuli"):
        assert command in help_out
    where = subprocess.run(
        [bindir / "python", "-c",
         "import humanlike.analysis, humanlike.server, sys; "
         "print(humanlike.analysis.__file__); assert 'torch' not in sys.modules"],
        check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert where.startswith(str(fresh_site)), where
