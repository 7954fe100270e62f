"""Rehearsal participants (``humanlike simulate``): the simulator proves a rehearsal with a key only
the researcher holds, an HMAC of the study's slug with the server's ``SECRET_KEY``, sent in the
``X-Humanlike-Rehearsal`` header of the study link; the server records ``Participant.simulated`` at
arrival only when that key verifies, and says so in the ``X-Humanlike-Simulated`` reply header. A
flag anyone can send (a query parameter, an event) marks nothing.

A logged-in researcher's own try of a study link (a preview) is marked the same way at arrival,
with a ``preview`` event, so the export leaves it out of the analysed set like a rehearsal."""

from __future__ import annotations

import hashlib
import hmac

from flask import Response, after_this_request, current_app, request

from humanlike.server.extensions import db
from humanlike.server.tables.core import Event, Participant, utcnow

REHEARSAL_HEADER = "X-Humanlike-Rehearsal"
SIMULATED_HEADER = "X-Humanlike-Simulated"
PREVIEW_EVENT = "preview"
_PURPOSE = b"humanlike rehearsal key\x00"


def rehearsal_key(secret_key: str | bytes, slug: str) -> str:
    """The study's rehearsal key: HMAC-SHA256(SECRET_KEY, purpose + slug), hex."""
    secret = secret_key.encode() if isinstance(secret_key, str) else secret_key
    return hmac.new(secret, _PURPOSE + slug.encode(), hashlib.sha256).hexdigest()


def is_rehearsal(slug: str) -> bool:
    """Whether this request carries the study's rehearsal key (compared in constant time)."""
    sent = request.headers.get(REHEARSAL_HEADER, "")
    if not sent:
        return False
    expected = rehearsal_key(current_app.config["SECRET_KEY"], slug)
    return hmac.compare_digest(sent.strip().encode(), expected.encode())


def mark_arrival(participant: Participant, slug: str, preview_by: int | None = None) -> None:
    """At arrival (the flag itself is written by ``allocation.allocate``): say so in a
    rehearsal's reply; record a researcher's preview (``preview_by``: the logged-in user's id)
    with a ``preview`` event; anyone else is left as they are."""
    if is_rehearsal(slug):
        @after_this_request
        def _say_so(response: Response) -> Response:
            response.headers[SIMULATED_HEADER] = "1"
            return response
    elif preview_by is not None:
        participant.simulated = True
        db.session.add(Event(participant_id=participant.id, type=PREVIEW_EVENT,
                             value={"user_id": preview_by, "link": participant.platform},
                             server_time=utcnow()))
        db.session.commit()
