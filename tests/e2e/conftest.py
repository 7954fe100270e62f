"""Fixtures for end-to-end tests: the demo experiment served by a real HTTP server, headless Chromium."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from humanlike.server import create_app, database
from humanlike.server.study import experiments
from tests.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: F401 - re-exported for older imports


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)``'s path, built once per test run: under pytest-xdist the first worker to
    need it builds it in the run's shared temporary folder while the others wait, then all read it."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name) / "demo")
    shared = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    shared.mkdir(exist_ok=True)
    done = shared / "path"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            done.write_text(str(build(shared / "demo")))
    return Path(done.read_text())


@pytest.fixture(scope="session")
def demo_spec(tmp_path_factory) -> Path:
    """The demo experiment exactly as the tests' runs build it (~20 s: its models are trained),
    built once per test run (``built_once``)."""
    from humanlike.server.demo.build import build_demo

    return built_once(tmp_path_factory, "demo", build_demo)


@pytest.fixture(scope="session")
def panel_demo(tmp_path_factory) -> Path:
    """The demo folder `humanlike demo` builds (``build_demo(panel=True)``: with [panel] and
    [stopping]), built once per test run; a test copies it into its instance folder so the command
    finds it current and skips the build."""
    from humanlike.server.demo.build import build_demo

    return built_once(tmp_path_factory, "panel-demo",
                      lambda folder: build_demo(folder, panel=True).parent)


class LiveServer:
    """A threaded WSGI server on a free port around an app."""

    def __init__(self, app):
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.thread.join(5)


@contextmanager
def serving(database_url: str, *spec_paths: Path, setup=None) -> Iterator[LiveServer]:
    """The experiments at ``spec_paths`` served live on a migrated database; ``setup(app)`` runs
    before the server starts (admins, simulated participants)."""
    app = create_app({"SECRET_KEY": "e2e", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(p) for p in spec_paths]})
    database.upgrade(app)
    experiments.sync_all(app)
    if setup is not None:
        setup(app)
    live = LiveServer(app)
    try:
        yield live
    finally:
        live.stop()
        database.dispose(app)


def simulated_demo_export(demo_spec: Path, root: Path) -> Path:
    """12 simulated participants of the demo (2 fail the catch trials, seed 3) through the CLI on
    a SQLite file under ``root``, exported to ``root/export``; the ground truth in ``root/truth``."""
    from click.testing import CliRunner

    from humanlike.cli import main

    db = f"sqlite:///{root}/demo.sqlite"
    runner = CliRunner()
    result = runner.invoke(main, ["simulate", str(demo_spec), "--participants", "12",
                                  "--fail-catch", "2", "--seed", "3", "--truth",
                                  str(root / "truth"), "--database-url", db])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["export", "demo", "--out", str(root / "export"),
                                  "--database-url", db])
    assert result.exit_code == 0, result.output
    return root / "export"


@pytest.fixture
def demo_server(database_url, demo_spec, tmp_path):
    with serving(database_url, demo_spec) as live:
        yield live

