"""psiTurk compatibility: serve a psiTurk 3 project folder as it is (config, templates, static,
custom.py), its data stored as rows (``storage``), imported from and exported to psiTurk's formats.

``init_app(app, path)`` is called by ``create_app`` when the config names ``PSITURK_PROJECT``."""

from __future__ import annotations

from pathlib import Path

from flask import Flask, send_from_directory
from jinja2 import Environment, FileSystemLoader, select_autoescape
from werkzeug.exceptions import NotFound

from humanlike.server.psiturk.project import PsiturkProject, PsiturkProjectError, load_project

__all__ = ["PsiturkProjectError", "init_app", "load_project"]


def project_environment(app: Flask, project: PsiturkProject) -> Environment:
    """Jinja2 over the project's templates, psiTurk's way: autoescaped HTML, an undefined variable
    renders empty, Flask's globals (``url_for`` ...) available."""
    env = app.jinja_env.overlay(loader=FileSystemLoader(str(project.templates)),
                                autoescape=select_autoescape(default=True, default_for_string=True))
    return env


def _static_view(app: Flask, project: PsiturkProject):
    own = app.view_functions["static"]

    def static(filename: str):
        """The project's static file, else humanlike's (its vendor files, psiturk.js)."""
        try:
            response = send_from_directory(project.static, filename, max_age=10)
        except NotFound:
            return own(filename=filename)
        return response

    return static


def init_app(app: Flask, path: str | Path) -> PsiturkProject:
    """Serve the psiTurk project at ``path``; raises PsiturkProjectError naming file and key."""
    from humanlike.server.extensions import csrf
    from humanlike.server.psiturk import routes
    from humanlike.server.psiturk.custom_code import load_custom_code
    from humanlike.server.psiturk.errors import ExperimentApiError, ExperimentError

    project = load_project(path)
    env = project_environment(app, project)
    app.extensions["psiturk"] = routes.PsiturkState(project=project, env=env)
    app.view_functions["static"] = _static_view(app, project)
    app.register_error_handler(ExperimentError, routes.handle_experiment_error)
    app.register_error_handler(ExperimentApiError, routes.handle_api_error)
    csrf.exempt(routes.bp)
    app.register_blueprint(routes.bp)
    from humanlike.server.security import limiter, start_limit

    # /exp creates participants: the entry rate limit of humanlike's own study links applies
    app.view_functions["psiturk.start_exp"] = limiter.limit(start_limit)(  # type: ignore[assignment]
        app.view_functions["psiturk.start_exp"])
    app.extensions["psiturk"].get_condition = load_custom_code(app, project)
    return project
