"""Fixtures for end-to-end tests: the demo experiment served by a real HTTP server, headless Chromium."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from humanlike.server import create_app, database, experiments
from tests.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: F401 - re-exported for older imports


@pytest.fixture(scope="session")
def demo_spec(tmp_path_factory) -> Path:
    """The demo experiment exactly as `make demo` builds it."""
    from humanlike.server.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo") / "demo")


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


@pytest.fixture
def demo_server(database_url, demo_spec, tmp_path):
    app = create_app({"SECRET_KEY": "e2e", "SQLALCHEMY_DATABASE_URI": database_url,
                      "EXPERIMENT_PATHS": [str(demo_spec)]})
    database.upgrade(app)
    experiments.sync_all(app)
    live = LiveServer(app)
    yield live
    live.stop()
    database.dispose(app)

