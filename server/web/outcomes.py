"""A participant's way out of a study, as the participant routes end it: the outcome recorded
(``participants/exits.py``), SONA's credit where the spec grants one for that exit, and where the
participant goes next (the platform with the exit's code, ``platforms.exit_target``)."""

from __future__ import annotations

from typing import Any

from humanlike.server.extensions import db
from humanlike.server.participants import exits
from humanlike.server.platforms import Exit, exit_target
from humanlike.server.sources import sona
from humanlike.server.tables.core import Participant


def leave(participant: Participant, exit: Exit) -> dict[str, Any] | None:
    """End the participant's study by ``exit`` (the first outcome stays), committed; the platform
    target to send them to, or None where the spec declares no outcome for it."""
    exits.record(participant, exit)
    sona.record_pending(participant)  # only where this exit is credited (platforms.server_completion_url)
    db.session.commit()
    sona.send_for(participant)
    return exit_target(participant)
