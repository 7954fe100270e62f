"""Error responses: JSON ``{"error", "detail"}`` from the blueprints that ask for it
(``json_errors``), friendly pages everywhere else (``init_app``)."""

from __future__ import annotations

from typing import Any, NoReturn

from flask import Blueprint, Flask, abort, current_app, jsonify, render_template, request
from flask_babel import gettext
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException


class APIError(Exception):
    """An API failure with an HTTP status, a short error code and a human-readable detail."""

    def __init__(self, status: int, error: str, detail: Any = None):
        super().__init__(error)
        self.status, self.error, self.detail = status, error, detail


def api_abort(status: int, error: str, detail: Any = None) -> NoReturn:
    """Stop the request with a JSON error body."""
    raise APIError(status, error, detail)


def json_errors(bp: Blueprint) -> None:
    """Make every error raised in ``bp``'s views a JSON ``{"error", "detail"}`` response."""

    @bp.errorhandler(APIError)
    def _api_error(exc: APIError):
        return jsonify(error=exc.error, detail=exc.detail), exc.status

    @bp.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        response = exc.get_response()
        response.data = jsonify(error=exc.name.lower().replace(" ", "_"),
                                detail=exc.description).get_data()
        response.content_type = "application/json"
        return with_allow(exc, response)

    @bp.errorhandler(Exception)
    def _unexpected(exc: Exception):
        current_app.logger.exception("unhandled error")
        return jsonify(error="internal_error", detail="the server failed; nothing was stored"), 500


def undecodable_path(raw: str) -> bool:
    """True when a WSGI ``PATH_INFO`` (its bytes as latin-1) holds a NUL or is not UTF-8 (or holds
    U+FFFD, the replacement a decoding layer put there): no route names such a resource, and
    PostgreSQL refuses NUL in text (a 500 where a 404 is meant)."""
    data = raw.encode("latin-1", "replace")
    if b"\x00" in data:
        return True
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return "\ufffd" in text  # what a WSGI layer that decoded with errors="replace" left of them


def refuse_undecodable_paths() -> None:
    """``before_request``: a path with a NUL or bytes that are not UTF-8 is a 404 (JSON on the API),
    before any view looks it up."""
    if undecodable_path(request.environ.get("PATH_INFO", "")):
        abort(404)


def with_allow(exc: HTTPException, response: Any) -> Any:
    """A 405 answer names the methods the resource accepts (RFC 9110, 15.5.6)."""
    methods = getattr(exc, "valid_methods", None)
    if exc.code == 405 and methods and "Allow" not in response.headers:
        response.headers["Allow"] = ", ".join(sorted(methods))
    return response


def init_app(app: Flask) -> None:
    """Register the page handlers (HTML) for everything outside the JSON blueprints."""
    app.before_request(refuse_undecodable_paths)

    @app.errorhandler(CSRFError)
    def _csrf_error(exc: CSRFError):
        return render_template("message.html", title=gettext("Form expired"),
                               message=gettext("The form expired; go back and try again.")), 400

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        page = render_template("message.html", title=exc.name, message=exc.description)
        return with_allow(exc, app.make_response((page, exc.code or 500)))

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        app.logger.exception("unhandled error")
        return render_template("message.html", title=gettext("Something went wrong"),
                               message=gettext("The server failed. Please try again in a moment.")), 500
