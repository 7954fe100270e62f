"""Who a participant's write token opens, cached per process: the participant's immutable data
(allocation, timeline designs, categories) and token hash, so a trial costs one insert. Entries are
dropped when a token is reissued (``forget``: a resume) and reloaded when a token does not match
the cached hash (another process may have reissued it)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.participants.tokens import hash_token, token_matches
from humanlike.server.study.timeline import design_of
from humanlike.server.tables.core import Participant


@dataclass
class ParticipantAuth:
    """What the API needs to know about a participant on every request (immutable after
    allocation, but for ``status``, which the API refreshes as it learns it)."""

    id: int
    public_id: str
    token_hash: str
    slug: str
    n_trials: int
    designs: list[dict[str, Any]]
    stimulus_ids: list[int | None]
    labels: list[str]
    status: str
    attempt: int = 0
    """Block restarts so far: read again whenever a trial names another attempt or is not stored."""


class AuthCache:
    """A small per-process LRU of participants' immutable data."""

    def __init__(self, size: int = 4096):
        self.size, self.lock = size, threading.Lock()
        self.items: OrderedDict[str, ParticipantAuth] = OrderedDict()

    def get(self, key: str) -> ParticipantAuth | None:
        with self.lock:
            item = self.items.get(key)
            if item is not None:
                self.items.move_to_end(key)
            return item

    def put(self, key: str, value: ParticipantAuth) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)

    def pop(self, key: str) -> None:
        with self.lock:
            self.items.pop(key, None)


_cache = AuthCache()
_NO_ONE = hash_token("no participant has this token")


def forget(public_id: str) -> None:
    """Drop a participant's cached data (its token was reissued, or its row is gone)."""
    _cache.pop(public_id)


def _load(public_id: str) -> ParticipantAuth | None:
    row = db.session.execute(
        sa.select(Participant).where(Participant.public_id == public_id)
    ).scalar_one_or_none()
    if row is None:
        return None
    timeline = row.timeline
    return ParticipantAuth(
        id=row.id,
        public_id=row.public_id,
        token_hash=row.token_hash,
        slug=row.experiment.slug,
        n_trials=row.n_trials,
        designs=[design_of(entry) for entry in timeline["trials"]],
        stimulus_ids=[entry.get("stimulus_id") for entry in timeline["trials"]],
        labels=[c["label"] for c in timeline["categories"]],
        status=row.status,
        attempt=row.attempt,
    )


def opened_by(public_id: str, token: str) -> ParticipantAuth | None:
    """The participant ``public_id`` when ``token`` is theirs, else None (alike whether the id is
    unknown or the token belongs to someone else; compared in constant time either way)."""
    auth = _cache.get(public_id)
    if auth is None:
        auth = _load(public_id)
        if auth is not None:
            _cache.put(public_id, auth)
    if auth is not None and not token_matches(auth.token_hash, token):
        fresh = _load(public_id)  # another process may have reissued the token (resume)
        if fresh is not None:
            _cache.put(public_id, fresh)
            auth = fresh
    if not token_matches(auth.token_hash if auth else _NO_ONE, token) or auth is None:
        return None
    return auth
