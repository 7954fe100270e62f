"""Every ORM table (DESIGN.md, Storage), one module per concern; importing the package registers
them all on ``db.metadata`` (what migrations and ``create_all`` compare against)."""

from humanlike.server.tables import (  # noqa: F401
    access,
    adaptive,
    api_tokens,
    authenticity,
    breaker,
    core,
    display,
    jobs,
    platform_events,
    psiturk,
    sona,
    withdrawal,
)
