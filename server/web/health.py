"""``/healthz``: liveness and database reachability, as JSON (for load balancers and probes)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from humanlike.server.database import ping
from humanlike.server.errors import json_errors

bp = Blueprint("health", __name__)
json_errors(bp)


@bp.get("/healthz")
def healthz():
    """Liveness and database reachability."""
    ok = ping()
    return jsonify(status="ok" if ok else "degraded", db="ok" if ok else "unreachable"), (
        200 if ok else 503
    )
