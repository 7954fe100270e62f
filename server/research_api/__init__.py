"""The researcher API under ``/api/research/v1`` (issue 40): scripts read and act on the studies
their login may, with a personal token (``Authorization: Bearer hl_...``, made on the dashboard's
tokens page or by ``humanlike token create``). A token's scopes cap its login's permissions in
each study (``humanlike.server.lab.access``), so a token never does more than its person could on the
dashboard. Actions go through ``participants.actions``, the dashboard's code path, and each takes
an ``Idempotency-Key``: a repeat (or one of many concurrent repeats) gets the first answer and
does nothing again. Limited per token (``RESEARCH_API_RATE_LIMIT``). Every answer is JSON; the
document is at ``/api/research/v1/openapi.json``."""

from __future__ import annotations

from humanlike.server.research_api.routes import bp

__all__ = ["bp"]
