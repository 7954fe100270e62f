"""The researcher's dashboard (one blueprint for the admin audience), one module per part: ``auth``
(login, logout, the login gate on every route), ``oidc`` (sign-in with the lab's OpenID Connect
provider), ``permissions`` (what each route needs: roles and
study membership, issue 40), ``users`` (logins and study members), ``tokens`` (personal tokens for the researcher API), ``experiments`` (the experiments page and status
switch), ``participants`` (an experiment's participants table and one participant's page),
``actions`` (approve, reject, bonus, exclude / include, with confirmation), ``jobs`` (the
progress of bulk actions run in the background), ``listing`` (the
Prolific listing: its numbers, "Sync now", publish / pause / resume / stop / places), ``safety``
(the circuit breaker's banner and resume, refusals on return, withdrawals, SONA grants), ``downloads``
(the streamed export zip) and ``panel`` (the live analysis panel and its stopping indicator); ``qc`` and
``stats`` hold the queries the pages share."""

from __future__ import annotations

from humanlike.server.admin import (  # the modules add their routes to bp
    actions,
    auth,
    downloads,
    experiments,
    jobs,
    listing,
    oidc,
    panel_views,
    participants,
    permissions,
    safety,
    tokens,
    users,
)
from humanlike.server.admin.blueprint import bp

__all__ = ["actions", "auth", "bp", "downloads", "experiments", "jobs", "listing", "oidc", "panel_views",
           "participants", "permissions", "safety", "tokens", "users"]
