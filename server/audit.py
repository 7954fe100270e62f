"""The audit log: every administrative action on participants or money, one row each."""

from __future__ import annotations

import getpass
from typing import Any

from humanlike.server.extensions import db
from humanlike.server.tables.core import AuditEntry, utcnow


def cli_actor() -> str:
    """Who runs a CLI command: ``cli:<login name>``."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli:unknown"


def record(actor: str, action: str, *, experiment: str | None = None, target: str | None = None,
           detail: dict[str, Any] | None = None) -> AuditEntry:
    """Add an audit row to the current session; the caller commits it with the change it records."""
    entry = AuditEntry(actor=actor[:120], action=action[:64], experiment=experiment,
                       target=target, detail=detail, time=utcnow())
    db.session.add(entry)
    return entry
