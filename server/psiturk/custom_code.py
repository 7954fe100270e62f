"""A project's optional ``custom.py``: imported with stand-ins for the psiTurk modules such files
import (``psiturk.psiturk_config``, ``.experiment_errors``, ``.user_utils``, ``.db``, ``.models``,
``.psiturk_statuses``), its ``custom_code`` blueprint registered. A file that still fails to import
is skipped with a warning; the server starts either way."""

from __future__ import annotations

import configparser
import functools
import importlib.util
import logging
import sys
import types
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Flask, Response, request

from humanlike.server.psiturk.project import DEFAULTS, PsiturkProject

log = logging.getLogger(__name__)


def _config_class(project: PsiturkProject) -> type:
    class PsiturkConfig(configparser.ConfigParser):
        """psiTurk's config object, reading the project's config.txt over psiTurk's defaults."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("interpolation", None)
            kwargs.setdefault("strict", False)
            super().__init__(*args, **kwargs)

        def load_config(self) -> None:
            for (section, key), value in DEFAULTS.items():
                if not self.has_section(section):
                    self.add_section(section)
                self.set(section, key, value)
            self.read(project.root / "config.txt", encoding="utf-8")

    return PsiturkConfig


def _nocache(view: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from flask import make_response

        response = make_response(view(*args, **kwargs))
        response.headers["Cache-Control"] = "no-cache, no-store, must-revalidate"
        return response

    return wrapped


class PsiTurkAuthorization:
    """psiTurk's HTTP basic auth for custom routes ([Server Parameters] login_username/login_pw)."""

    def __init__(self, config: configparser.ConfigParser) -> None:
        self.username = config.get("Server Parameters", "login_username", fallback="")
        self.password = config.get("Server Parameters", "login_pw", fallback="")

    def requires_auth(self, view: Callable[..., Any]) -> Callable[..., Any]:
        import hmac

        @functools.wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            auth = request.authorization
            if (not self.username or auth is None
                    or not hmac.compare_digest(auth.username or "", self.username)
                    or not hmac.compare_digest(auth.password or "", self.password)):
                return Response("Login required", 401,
                                {"WWW-Authenticate": 'Basic realm="Login Required"'})
            return view(*args, **kwargs)

        return wrapped


def install_psiturk_modules(project: PsiturkProject) -> None:
    """Put the stand-in ``psiturk`` modules into ``sys.modules`` (psiTurk 3 itself cannot run on
    this stack, so the stand-ins take its place even where it is installed)."""
    from humanlike.server.extensions import db
    from humanlike.server.psiturk import errors, participants
    from humanlike.server.tables.psiturk import PsiturkAssignment

    def module(name: str, **attrs: Any) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs, __humanlike__=True)
        sys.modules[name] = mod
        return mod

    statuses = {name: getattr(participants, name) for name in (
        "NOT_ACCEPTED", "ALLOCATED", "STARTED", "COMPLETED", "SUBMITTED", "CREDITED",
        "QUITEARLY", "BONUSED")}
    root = module("psiturk")
    root.__path__ = []  # a package, so ``from psiturk.x import y`` works
    parts = {
        "psiturk_config": module("psiturk.psiturk_config", PsiturkConfig=_config_class(project)),
        "experiment_errors": module(
            "psiturk.experiment_errors", ExperimentError=errors.ExperimentError,
            ExperimentApiError=errors.ExperimentApiError,
            InvalidUsageError=errors.InvalidUsageError, InvalidUsage=errors.InvalidUsage),
        "user_utils": module("psiturk.user_utils", PsiTurkAuthorization=PsiTurkAuthorization,
                             nocache=_nocache),
        "db": module("psiturk.db", db_session=db.session, init_db=lambda: None),
        "models": module("psiturk.models", Participant=PsiturkAssignment),
        "psiturk_statuses": module("psiturk.psiturk_statuses", **statuses),
    }
    for name, mod in parts.items():
        setattr(root, name, mod)


def load_custom_code(app: Flask, project: PsiturkProject) -> Callable[[str], tuple[int, int]] | None:
    """Register ``custom.py``'s blueprint; returns its ``custom_get_condition`` if it has one."""
    path = project.custom_py
    if not path.is_file():
        return None
    install_psiturk_modules(project)
    name = "custom"
    sys.path.insert(0, str(project.root))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # any failure of user code: skip it, never crash
        sys.modules.pop(name, None)
        message = f"{path}: not served ({type(exc).__name__}: {exc}); its routes are unavailable"
        log.warning(message)
        app.extensions.setdefault("psiturk_warnings", []).append(message)
        return None
    finally:
        if str(project.root) in sys.path:
            sys.path.remove(str(project.root))
    blueprint = getattr(module, "custom_code", None)
    if isinstance(blueprint, Blueprint):
        from humanlike.server.extensions import csrf

        csrf.exempt(blueprint)
        app.register_blueprint(blueprint)
    init = getattr(module, "init_app", None)
    if callable(init):
        init(app)
    condition = getattr(module, "custom_get_condition", None)
    return condition if callable(condition) else None
