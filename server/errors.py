"""Error responses: JSON ``{"error", "detail"}`` under /api, friendly pages elsewhere."""

from __future__ import annotations

from typing import Any, NoReturn

from flask import Flask, jsonify, render_template, request
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


def _wants_json() -> bool:
    return request.path.startswith("/api/") or request.path == "/healthz"


def init_app(app: Flask) -> None:
    """Register the handlers."""

    @app.errorhandler(APIError)
    def _api_error(exc: APIError):
        return jsonify(error=exc.error, detail=exc.detail), exc.status

    @app.errorhandler(CSRFError)
    def _csrf_error(exc: CSRFError):
        return render_template("message.html", title="Form expired",
                               message="The form expired; go back and try again."), 400

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if _wants_json():
            return jsonify(error=exc.name.lower().replace(" ", "_"), detail=exc.description), exc.code
        return render_template("message.html", title=exc.name, message=exc.description), exc.code

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        app.logger.exception("unhandled error")
        if _wants_json():
            return jsonify(error="internal_error", detail="the server failed; nothing was stored"), 500
        return render_template("message.html", title="Something went wrong",
                               message="The server failed. Please try again in a moment."), 500
