"""The audit log: every administrative action on participants or money, one row each, naming the
person (``admin:<login>``, ``token:<login>/<token id>``, ``cli:<os login>[ as <login>]``)."""

from __future__ import annotations

import getpass
import os
from typing import Any

from humanlike.server.extensions import db
from humanlike.server.tables.core import AuditEntry, utcnow

CLI_USER_ENV = "HUMANLIKE_USER"
"""The dashboard login a CLI command acts as (``humanlike --as NAME`` sets it); its permissions
are checked (``humanlike.server.lab.access.require_cli``)."""


def cli_user() -> str | None:
    """The ``--as`` login named for this CLI run, if any."""
    return os.environ.get(CLI_USER_ENV) or None


def cli_actor() -> str:
    """Who runs a CLI command: ``cli:<login name>``, or ``cli:<login name> as <user>`` with ``--as``."""
    try:
        login = getpass.getuser()
    except (KeyError, OSError):
        login = "unknown"
    user = cli_user()
    return f"cli:{login}" + (f" as {user}" if user else "")


def record(actor: str, action: str, *, experiment: str | None = None, target: str | None = None,
           detail: dict[str, Any] | None = None) -> AuditEntry:
    """Add an audit row to the current session; the caller commits it with the change it records."""
    entry = AuditEntry(actor=actor[:120], action=action[:64], experiment=experiment,
                       target=target, detail=detail, time=utcnow())
    db.session.add(entry)
    return entry
