"""The humanlike web server: ``create_app`` builds a Flask app (flaskr-style factory)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flask import Flask


def _package_dir(name: str) -> str:
    """Folder of a sibling package (``humanlike.static`` etc.), editable or installed."""
    import importlib

    module = importlib.import_module(f"humanlike.{name}")
    assert module.__file__ is not None
    return str(Path(module.__file__).resolve().parent)


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app: config, extensions, experiments registry, blueprints (in that order)."""
    app = Flask(
        __name__,
        instance_path=os.environ.get("HUMANLIKE_INSTANCE") or None,
        instance_relative_config=True,
        static_folder=_package_dir("static"),
        template_folder=_package_dir("templates"),
    )
    os.makedirs(app.instance_path, exist_ok=True)

    from humanlike.server.config import build_config

    app.config.from_mapping(build_config(app.instance_path, test_config))

    from humanlike.server import database
    from humanlike.server.extensions import csrf, db, login_manager, migrate

    db.init_app(app)
    database.init_app(app)
    migrate.init_app(app, db, directory=_package_dir("migrations"))
    csrf.init_app(app)
    login_manager.init_app(app)
    login_manager.login_view = "admin.login"

    from humanlike.server.study import experiments

    experiments.init_app(app)

    from humanlike.server.web import i18n

    i18n.init_app(app)  # the participant pages' language: the experiment's spec decides

    from humanlike.server import admin, errors
    from humanlike.server.live import breaker
    from humanlike.server.web import api, health, participant
    from humanlike.server.web import withdraw as withdraw_pages

    errors.init_app(app)
    app.register_blueprint(participant.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(admin.bp)
    app.register_blueprint(withdraw_pages.bp)
    app.register_blueprint(breaker.bp)
    from humanlike.server.web import lab  # lab sessions (server/web/lab.py)
    app.register_blueprint(lab.bp)
    from humanlike.server import research_api  # the researcher API (issue 40)
    app.register_blueprint(research_api.bp)
    from humanlike.server.sources import prolific_events as prolific_hooks
    app.register_blueprint(prolific_hooks.bp)

    if app.config.get("PSITURK_PROJECT"):
        from humanlike.server import psiturk

        psiturk.init_app(app, app.config["PSITURK_PROJECT"])

    from humanlike.server import security

    security.init_app(app)

    from humanlike.server.sources import recruiters

    recruiters.init_app(app)
    if app.config.get("PANEL_THREAD"):
        from humanlike.server.live.panel import start_worker

        start_worker(app)
    return app
