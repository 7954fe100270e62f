"""The wheel: one `humanlike` namespace with package data, installable and runnable on its own.

It is built the way production builds it (deploy/Dockerfile): from the committed tree, with
static/vendor (gitignored, filled by `make npm`) copied in beside it, in a folder that is not a git
checkout, so nothing can come from a stray file or from git's view of the working tree.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from tests.server.conftest import write_small_experiment

REPO = Path(__file__).resolve().parent.parent
VENDOR = REPO / "static" / "vendor"

# the folders that make up the `humanlike` namespace: humanlike/ is itself, every other one is
# humanlike/<folder> (a committed directory link in humanlike/)
PACKAGE_FOLDERS = ("humanlike", "server", "analysis", "stimuli", "static", "templates", "deploy",
                   "migrations", "translations")
# tracked files under those folders that deliberately stay out of the wheel: none
NOT_SHIPPED: frozenset[str] = frozenset()


def _committed_files() -> list[str]:
    """Every file under the package folders in HEAD (what `git archive HEAD` exports)."""
    out = subprocess.run(["git", "ls-tree", "-r", "HEAD", "--", *PACKAGE_FOLDERS],
                         cwd=REPO, check=True, capture_output=True, text=True).stdout
    # humanlike/<folder> are links to the folders (mode 120000): their files are listed there
    return [line.split("\t", 1)[1] for line in out.splitlines() if not line.startswith("120000")]


def _in_wheel(path: str) -> str:
    return path if path.startswith("humanlike/") else f"humanlike/{path}"


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """HEAD as `git archive` exports it, plus the npm-built static/vendor (as the Dockerfile does)."""
    src = tmp_path_factory.mktemp("export") / "humanlike"
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=REPO, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src, filter="data")
    if VENDOR.is_dir():
        shutil.copytree(VENDOR, src / "static" / "vendor",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


@pytest.fixture(scope="module")
def built(export, tmp_path_factory) -> tuple[Path, str]:
    """(the wheel, the build's whole output)."""
    out = tmp_path_factory.mktemp("wheel")
    # PYTHONDONTWRITEBYTECODE (set here and in the Dockerfile) only makes setuptools say that it
    # skips byte-compiling, which a wheel build never does anyway; everything else is as usual
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
         str(export)],
        cwd=out, env=env, capture_output=True, text=True, check=False,
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-5000:]
    (path,) = out.glob("humanlike-*.whl")
    return path, log


@pytest.fixture(scope="module")
def wheel(built) -> Path:
    return built[0]


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
                   "humanlike/server/demo/files/experiment.toml",
                   "humanlike/server/demo/files/mlds_block.toml",
                   "humanlike/server/demo/files/consent.md",
                   "humanlike/server/demo/files/instructions.md",
                   "humanlike/analysis/report/templates/report.html.j2",
                   "humanlike/analysis/figures.py", "humanlike/server/demo/simulate.py",
                   "humanlike/deploy/gunicorn_conf.py", "humanlike/deploy/stack.py",
                   "humanlike/deploy/Caddyfile", "humanlike/deploy/granian.env",
                   "humanlike/server/admin/__init__.py"):
        assert needed in names, needed
    # jsPsych comes from npm at build time (never from git) and ships inside the wheel
    assert VENDOR.is_dir(), "static/vendor is missing: run `make npm` first"
    assert "humanlike/static/vendor/jspsych/jspsych.js" in names


def test_the_wheel_holds_every_committed_file_of_the_package_folders_and_the_vendored_scripts(wheel):
    names = {n for n in zipfile.ZipFile(wheel).namelist() if not n.startswith("humanlike-0")}
    committed = {_in_wheel(p) for p in _committed_files()} - NOT_SHIPPED
    assert len(committed) > 200, len(committed)
    missing = sorted(committed - names)
    assert not missing, missing
    vendored = {f"humanlike/static/vendor/{p.relative_to(VENDOR).as_posix()}"
                for p in VENDOR.rglob("*")
                if p.is_file() and not p.name.startswith(".") and "__pycache__" not in p.parts}
    assert vendored, "static/vendor is missing: run `make npm` first"
    assert not sorted(vendored - names), sorted(vendored - names)
    # and nothing else: no byte code, no build leftovers, no stray files
    extra = sorted(names - committed - vendored)
    assert not extra, extra


def test_the_build_prints_no_warnings(built):
    _, log = built
    noise = [line for line in log.splitlines()
             if re.search(r"warn|deprecat|!!", line, re.IGNORECASE)
             and not line.startswith(("copying ", "adding ", "creating "))]
    assert not noise, "\n".join(noise)


def _fresh_venv(wheel: Path, where: Path) -> tuple[Path, Path]:
    """A new venv holding the wheel; its dependencies come from the project's environment."""
    env_dir = where / "venv"
    venv.create(env_dir, with_pip=False)
    bindir = env_dir / "bin"
    fresh_site = Path(subprocess.run(
        [bindir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    # dependencies come from the project's environment (no network); humanlike from the wheel only.
    # A path named in a .pth file is not a site directory, so the .pth files in it (the editable
    # install's finder) do not run: the checkout stays invisible.
    (fresh_site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bindir / "python"), "install",
                    "--no-deps", "-q", str(wheel)], check=True, capture_output=True)
    return bindir, fresh_site


APP_SCRIPT = textwrap.dedent("""\
    import sys
    from pathlib import Path

    import humanlike.server
    from humanlike.server import create_app, database
    from humanlike.server.study import experiments

    where, spec = Path(sys.argv[1]), sys.argv[2]
    print("FILE", humanlike.server.__file__)
    app = create_app({
        "SECRET_KEY": "packaging-test",
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{where / 'app.sqlite'}",
        "EXPERIMENT_PATHS": [spec],
    })
    database.upgrade(app)
    experiments.sync_all(app)
    client = app.test_client()
    for path in ("/healthz", "/admin/login", "/static/vendor/jspsych/jspsych.js",
                 "/static/js/runner.js"):
        resp = client.get(path)
        assert resp.status_code == 200, (path, resp.status_code)
    start = client.get("/start/small?PROLIFIC_PID=abc123&STUDY_ID=s1&SESSION_ID=x1")
    assert start.status_code == 302, (start.status_code, start.get_data(as_text=True)[:500])
    task = start.headers["Location"]  # the participant's task page
    page = client.get(task.split("#")[0])
    assert page.status_code == 200, (task, page.status_code)
    assert "jspsych.js" in page.get_data(as_text=True)
    # the message catalogues ship, and Babel's extractors find the installed pages' strings
    from humanlike.server.study import languages
    assert str(languages.CATALOGUES).startswith(str(Path(humanlike.server.__file__).parent.parent))
    assert len(languages.template()) > 100 and languages.missing("de") == [], "catalogues"
    database.dispose(app)
    print("OK")
""")


def test_the_wheel_installs_into_a_fresh_venv_and_runs(wheel, tmp_path):
    bindir, fresh_site = _fresh_venv(wheel, tmp_path)
    env = {**os.environ, "HUMANLIKE_INSTANCE": str(tmp_path / "instance")}
    env.pop("DATABASE_URL", None)
    run = subprocess.run([bindir / "humanlike", "--help"], capture_output=True, text=True,
                         cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    help_out = run.stdout
    for command in ("serve", "demo", "db", "create-admin", "export", "analyze", "stimuli"):
        assert command in help_out
    where = subprocess.run(
        [bindir / "python", "-c",
         "import humanlike.analysis, humanlike.server, humanlike.server.admin, sys; "
         "print(humanlike.analysis.__file__); print(humanlike.server.__file__); "
         "print(humanlike.server.admin.__file__); assert 'torch' not in sys.modules"],
        check=True, capture_output=True, text=True, cwd=tmp_path, env=env).stdout
    for line in where.split():
        assert line.startswith(str(fresh_site)), where

    # the schema from the shipped migrations, on a fresh SQLite file
    db_file = tmp_path / "cli.sqlite"
    upgrade = subprocess.run(
        [bindir / "humanlike", "db", "upgrade", "--database-url", f"sqlite:///{db_file}"],
        capture_output=True, text=True, cwd=tmp_path, env=env)
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    assert db_file.stat().st_size > 0

    # the app: health, the admin login page, and a participant's way in to the task page
    spec = write_small_experiment(tmp_path / "small")
    (tmp_path / "app.py").write_text(APP_SCRIPT)
    app = subprocess.run([bindir / "python", "app.py", str(tmp_path), str(spec)],
                         capture_output=True, text=True, cwd=tmp_path, env=env)
    assert app.returncode == 0, app.stdout[-3000:] + app.stderr[-5000:]
    assert f"FILE {fresh_site}" in app.stdout, app.stdout
    assert app.stdout.rstrip().endswith("OK"), app.stdout
