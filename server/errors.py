"""Error responses: JSON ``{"error", "detail"}`` from the blueprints that ask for it
(``json_errors``), friendly pages everywhere else (``init_app``)."""

from __future__ import annotations

from typing import Any, NoReturn

from flask import Blueprint, Flask, current_app, jsonify, render_template
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
        return response

    @bp.errorhandler(Exception)
    def _unexpected(exc: Exception):
        current_app.logger.exception("unhandled error")
        return jsonify(error="internal_error", detail="the server failed; nothing was stored"), 500


def init_app(app: Flask) -> None:
    """Register the page handlers (HTML) for everything outside the JSON blueprints."""

    @app.errorhandler(CSRFError)
    def _csrf_error(exc: CSRFError):
        return render_template("message.html", title="Form expired",
                               message="The form expired; go back and try again."), 400

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        return render_template("message.html", title=exc.name, message=exc.description), exc.code

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        app.logger.exception("unhandled error")
        return render_template("message.html", title="Something went wrong",
                               message="The server failed. Please try again in a moment."), 500
