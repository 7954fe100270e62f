"""The dashboard's one blueprint (``/admin``): every admin module adds its routes to ``bp``."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("admin", __name__, url_prefix="/admin")
