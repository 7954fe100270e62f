"""``Idempotency-Key`` for the researcher API's actions: the first request with a key acts and
its answer is kept; a repeat with the same key and request gets that answer again without
acting, a concurrent repeat gets 409 (retry shortly), and the key with another request 422. The
row is claimed by an INSERT under a unique (token, key), so of many concurrent repeats exactly one
acts, on SQLite and PostgreSQL alike (draft-ietf-httpapi-idempotency-key-header)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from flask import jsonify, request
from sqlalchemy.exc import IntegrityError

from humanlike.server.errors import api_abort
from humanlike.server.extensions import db
from humanlike.server.tables.api_tokens import ApiIdempotency

HEADER = "Idempotency-Key"
MAX_KEY = 128


def _request_hash() -> str:
    body = request.get_data(cache=True)
    return hashlib.sha256(b"\n".join([request.method.encode(), request.path.encode(), body])
                          ).hexdigest()


def once(token_id: int, act: Callable[[], tuple[dict[str, Any], int]]):
    """Answer with ``act()``'s (body, status), done at most once per ``Idempotency-Key``."""
    key = (request.headers.get(HEADER) or "").strip()
    if not key or len(key) > MAX_KEY:
        api_abort(400, "idempotency_key_required",
                  f"send an {HEADER} header (1 to {MAX_KEY} characters, e.g. a UUID): a repeat "
                  "with the same key is answered without acting again")
    digest = _request_hash()
    row = ApiIdempotency(token_id=token_id, key=key, request_hash=digest)
    db.session.add(row)
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        first = db.session.execute(sa.select(ApiIdempotency).where(
            ApiIdempotency.token_id == token_id, ApiIdempotency.key == key)).scalar_one()
        if first.request_hash != digest:
            api_abort(422, "idempotency_key_reused",
                      f"this {HEADER} was used for another request (method, path or body)")
        if first.status is None:
            api_abort(409, "in_progress", f"the first request with this {HEADER} is still "
                                          "working: retry in a moment")
        response = jsonify(first.body)
        response.status_code = first.status
        response.headers["Idempotent-Replayed"] = "true"
        return response
    row_id = row.id
    try:
        body, status = act()
    except Exception:
        db.session.rollback()  # nothing kept: the key may be tried again
        db.session.execute(sa.delete(ApiIdempotency).where(ApiIdempotency.id == row_id))
        db.session.commit()
        raise
    db.session.execute(sa.update(ApiIdempotency).where(ApiIdempotency.id == row_id)
                       .values(status=status, body=json.loads(json.dumps(body, default=str))))
    db.session.commit()
    response = jsonify(body)
    response.status_code = status
    return response
