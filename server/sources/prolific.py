"""Prolific's researcher API (https://docs.prolific.com/api-reference): draft study from the spec's
``[recruitment.prolific]`` table, publish / pause / stop, places, submissions, approve / reject,
two-step bonuses, participant groups (a completers group the completion code fills; earlier
experiments' participants blocklisted).

The API token is read from ``PROLIFIC_TOKEN`` only (never stored in the database, the repo or a log;
dry-run output shows ``Token ***``); the base URL from ``PROLIFIC_API_URL`` (default Prolific's own)
so that staging and tests can point elsewhere. Rate limits (429) and 5xx are retried a bounded number
of times with exponential backoff, except the bonus pay step on a 5xx (Prolific documents it as not
idempotent: an ambiguous failure is reported as ``unknown``, never retried blindly; before a bonus is
sent again the submission's ``bonus_payments`` are read); a 4xx becomes a ``ProlificError`` naming
the field Prolific rejected. Approve and reject read the submission's status first."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import httpx
import sqlalchemy as sa

from humanlike.server.extensions import db
from humanlike.server.lifecycle import APPROVE, REJECT, RETURN, SUBMIT, TIME_OUT, Transition
from humanlike.server.participants.actions import (
    BATCH_REF,
    PaymentStatus,
    PlatformError,
    shares_platform_ref,
    validate_rejection,
)

if TYPE_CHECKING:
    from humanlike.server.study.spec import ExperimentSpec, ProlificCompletionCode
    from humanlike.server.tables.core import Experiment, Participant, Payment

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.prolific.com"
URL_PARAMETERS = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
"""Placeholders Prolific fills in the study link (docs: the study object, external_study_url)."""
STUDY_ACTIONS = ("PUBLISH", "PAUSE", "START", "STOP")
"""Study transitions (POST /api/v1/studies/{id}/transition/)."""
STATUS_TRANSITIONS: dict[str, Transition | None] = {
    "RESERVED": None, "ACTIVE": None, "AWAITING REVIEW": SUBMIT, "RETURNED": RETURN,
    "TIMED-OUT": TIME_OUT, "APPROVED": APPROVE, "REJECTED": REJECT,
    "PARTIALLY APPROVED": APPROVE, "SCREENED OUT": None,
}
"""A submission's Prolific status -> the participant transition ``sync`` applies (None: no change;
a screened-out submission is reported, the researcher decides)."""


def api_origin(url: str) -> str:
    """The API's origin from ``PROLIFIC_API_URL``, which may be the origin or the documented base
    ``https://api.prolific.com/api/v1/`` (the paths here carry ``/api/v1/`` themselves)."""
    url = url.strip().rstrip("/")
    return url.removesuffix("/api/v1").rstrip("/")


def error_text(body: Any) -> str:
    """Prolific's own words from an error body (``{"error": {"title", "detail"}}`` or DRF's
    ``{"detail": ...}``), or the body's text; never a Python repr."""
    if isinstance(body, dict):
        inner = body.get("error")
        if not isinstance(inner, dict):
            inner = body
        parts = [str(inner[k]) for k in ("title", "detail", "message")
                 if isinstance(inner.get(k), str | int | float) and str(inner[k]).strip()]
        if parts:
            return ": ".join(dict.fromkeys(parts))
        return json.dumps(body)
    return str(body)


class ProlificError(PlatformError):
    """Prolific refused or failed a request; ``fields`` names what it rejected (4xx)."""

    def __init__(self, message: str, reply: dict[str, Any] | None = None,
                 status: int | None = None, fields: tuple[str, ...] = (), unknown: bool = False):
        super().__init__(message, reply, unknown=unknown or (status is not None and status >= 500))
        self.status = status
        self.fields = fields


def _rejected_fields(body: Any) -> dict[str, str]:
    """Field -> message from a Prolific error body (``{"error": {"detail": {...}}}``, or DRF's
    ``{"field": ["message"]}``)."""
    detail = body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        detail = body["error"].get("detail", body["error"])
    if not isinstance(detail, dict):
        return {}
    out = {}
    for key, value in detail.items():
        if key in ("status", "error_code", "title", "traceback", "additional_information"):
            continue
        text = "; ".join(map(str, value)) if isinstance(value, list) else str(value)
        out[str(key)] = text
    return out


@dataclass
class Request:
    """One request as it would go out (``--dry-run`` prints it, token redacted)."""

    method: str
    url: str
    json: Any = None
    params: dict[str, Any] | None = None

    def describe(self) -> str:
        query = "" if not self.params else "?" + str(httpx.QueryParams(self.params))
        lines = [f"{self.method} {self.url}{query}", "Authorization: Token ***"]
        if self.json is not None:
            lines += ["Content-Type: application/json", json.dumps(self.json, indent=2)]
        return "\n".join(lines)


class ProlificClient:
    """A thin, retrying client for the endpoints humanlike uses (``dry_run``: print, send nothing)."""

    def __init__(self, token: str | None = None, base_url: str | None = None, *,
                 dry_run: bool = False, echo: Callable[[str], None] = print,
                 transport: httpx.BaseTransport | None = None, retries: int = 4,
                 backoff: float = 0.5, sleep: Callable[[float], None] = time.sleep,
                 timeout: float = 30.0):
        token = token or os.environ.get("PROLIFIC_TOKEN") or ""
        if not token and not dry_run:
            raise ProlificError("PROLIFIC_TOKEN is not set: create a token in Prolific's settings "
                                "and export it (it is read from the environment only)")
        self.base_url = api_origin(base_url or os.environ.get("PROLIFIC_API_URL")
                                   or DEFAULT_API_URL)
        self.dry_run, self.echo = dry_run, echo
        self.last_headers: httpx.Headers = httpx.Headers()
        self.retries, self.backoff, self.sleep = retries, backoff, sleep
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                  headers={"Authorization": f"Token {token}",
                                           "Accept": "application/json"})

    def __repr__(self) -> str:
        return f"ProlificClient({self.base_url!r}, dry_run={self.dry_run})"

    def close(self) -> None:
        self._http.close()

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        after = response.headers.get("Retry-After") if response is not None else None
        if after and after.isdigit():
            return min(float(after), 60.0)
        return min(self.backoff * 2 ** attempt, 30.0)

    def request(self, method: str, path: str, *, json: Any = None,
                params: dict[str, Any] | None = None, idempotent: bool = True) -> Any:
        """Send one request (retrying 429 always, 5xx and lost answers only when ``idempotent``)."""
        req = Request(method, self.base_url + path, json, params)
        if self.dry_run:
            self.echo(req.describe())
            return None
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._http.request(method, path, json=json, params=params)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent
                if last:
                    raise ProlificError(f"{method} {path}: Prolific unreachable "
                                        f"({type(exc).__name__})") from exc
                self.sleep(self._delay(attempt, None))
                continue
            except httpx.TransportError as exc:
                if not idempotent or last:
                    raise ProlificError(f"{method} {path}: no answer from Prolific "
                                        f"({type(exc).__name__}); it may or may not have acted",
                                        unknown=True) from exc
                self.sleep(self._delay(attempt, None))
                continue
            status = response.status_code
            self.last_headers = response.headers
            log.info("prolific %s %s -> %s", method, path, status)
            retryable = status == 429 or (status >= 500 and idempotent)
            if retryable and not last:
                self.sleep(self._delay(attempt, response))
                continue
            if status >= 400:
                raise self._error(method, path, response, attempts=attempt + 1)
            if not response.content:
                return None
            try:
                return response.json()
            except ValueError:
                return response.text
        raise AssertionError("unreachable")

    @staticmethod
    def _error(method: str, path: str, response: httpx.Response, attempts: int) -> ProlificError:
        try:
            body = response.json()
        except ValueError:
            body = response.text[:500]
        reply = {"status": response.status_code, "body": body}
        status = response.status_code
        if status == 429 or status >= 500:
            return ProlificError(f"{method} {path}: HTTP {status} from Prolific after {attempts} "
                                 "attempt(s)", reply, status)
        fields = _rejected_fields(body)
        if fields:
            named = "; ".join(f"field {k!r}: {v}" for k, v in fields.items())
            return ProlificError(f"Prolific refused {method} {path} (HTTP {status}): {named}",
                                 reply, status, tuple(fields))
        return ProlificError(f"Prolific refused {method} {path} (HTTP {status}): "
                             f"{error_text(body)}", reply, status)

    # studies ----------------------------------------------------------------------------------
    def create_study(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a draft (UNPUBLISHED) study; returns Prolific's study object."""
        return self.request("POST", "/api/v1/studies/", json=body) or {"id": "<dry-run>"}

    def get_study(self, study_id: str) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/studies/{study_id}/") or {}

    def transition_study(self, study_id: str, action: str) -> dict[str, Any]:
        """PUBLISH, PAUSE, START (resume) or STOP a study."""
        if action not in STUDY_ACTIONS:
            raise ValueError(f"study action must be one of {STUDY_ACTIONS}, not {action!r}")
        return self.request("POST", f"/api/v1/studies/{study_id}/transition/",
                            json={"action": action}) or {}

    def set_places(self, study_id: str, total: int) -> dict[str, Any]:
        """Raise the study's total places (Prolific only allows increasing them)."""
        return self.request("PATCH", f"/api/v1/studies/{study_id}/",
                            json={"total_available_places": int(total)}) or {}

    # submissions ------------------------------------------------------------------------------
    def submissions(self, study_id: str, page_size: int = 100) -> Iterator[dict[str, Any]]:
        """Every submission of the study, page by page (``page`` / ``page_size``)."""
        page = 1
        while True:
            data = self.request("GET", "/api/v1/submissions/",
                                params={"study": study_id, "page": page, "page_size": page_size})
            if not data:
                return
            results = data.get("results", [])
            yield from results
            links = data.get("_links") or {}
            following = (links.get("next") or {}).get("href") if links else None
            if not results or (links and not following) or (not links and len(results) < page_size):
                return
            page += 1

    def get_submission(self, submission_id: str) -> dict[str, Any]:
        """One submission: its ``status`` and ``bonus_payments`` (amounts paid, minor units)."""
        return self.request("GET", f"/api/v1/submissions/{submission_id}/") or {}

    def approve_submission(self, submission_id: str) -> dict[str, Any]:
        return self.request("POST", f"/api/v1/submissions/{submission_id}/transition/",
                            json={"action": "APPROVE"}) or {}

    def reject_submission(self, submission_id: str, message: str,
                          category: str | None) -> dict[str, Any]:
        """Reject, after checking locally what Prolific would refuse (message >= 100 characters,
        a known rejection category): a bad one raises ActionError and sends nothing."""
        validate_rejection(message, category, "prolific")
        return self.request("POST", f"/api/v1/submissions/{submission_id}/transition/",
                            json={"action": "REJECT", "message": message.strip(),
                                  "rejection_category": category}) or {}

    def bulk_approve(self, submission_ids: list[str]) -> Any:
        """Approve many submissions in one request (Prolific recommends submission ids)."""
        if not submission_ids:
            return None
        return self.request("POST", "/api/v1/submissions/bulk-approve/",
                            json={"submission_ids": list(submission_ids)})

    # participant groups -----------------------------------------------------------------------
    def participant_groups(self, workspace_id: str) -> list[dict[str, Any]]:
        """The workspace's participant groups (id, name, participant_count, ...)."""
        data = self.request("GET", "/api/v1/participant-groups/",
                            params={"workspace_id": workspace_id}) or {}
        return list(data.get("results", []))

    def create_participant_group(self, workspace_id: str, name: str,
                                 description: str | None = None) -> dict[str, Any]:
        """A new, empty group in the workspace (not retried on a 5xx: a repeat would make a
        second group; look it up by name first)."""
        body = {"name": name, "workspace_id": workspace_id}
        if description:
            body["description"] = description
        return self.request("POST", "/api/v1/participant-groups/", json=body,
                            idempotent=False) or {"id": "<group-id>", "name": name}

    def add_to_participant_group(self, group_id: str, participant_ids: list[str]) -> Any:
        """Append participants to the group (members already there are ignored: safe to repeat)."""
        return self.request("POST", f"/api/v1/participant-groups/{group_id}/participants/",
                            json={"participant_ids": list(participant_ids)})

    # test runs --------------------------------------------------------------------------------
    def create_test_participant(self, email: str) -> dict[str, Any]:
        """A test participant account (Prolific enables this per workspace); returns its id."""
        return self.request("POST", "/api/v1/researchers/participants/", idempotent=False,
                            json={"email": email}) or {}

    def create_test_study(self, study_id: str) -> dict[str, Any]:
        """Publish a copy of the draft study to the workspace's test participants (the path is
        documented without a trailing slash)."""
        return self.request("POST", f"/api/v1/studies/{study_id}/test-study", json={}) or {}

    # messages ---------------------------------------------------------------------------------
    def message(self, study_id: str, participant_ids: list[str], body: str) -> Any:
        """Send ``body`` to these participants of the study (Prolific's bulk message)."""
        return self.request("POST", "/api/v1/messages/bulk/", idempotent=False,
                            json={"ids": list(participant_ids), "body": body,
                                  "study_id": study_id})

    # webhooks ---------------------------------------------------------------------------------
    def create_hook_secret(self, workspace_id: str) -> dict[str, Any]:
        """Create (or replace) the workspace's webhook secret; returns ``{"id", "value"}``."""
        return self.request("POST", "/api/v1/hooks/secrets/",
                            json={"workspace_id": workspace_id}) or {}

    def hook_subscriptions(self, workspace_id: str) -> list[dict[str, Any]]:
        """The workspace's enabled subscriptions (the listing's ``is_enabled`` filter defaults to
        true). Whether one was confirmed is not shown: an unconfirmed one is listed all the same."""
        data = self.request("GET", "/api/v1/hooks/subscriptions/",
                            params={"workspace_id": workspace_id}) or {}
        return list(data.get("results", []))

    def hook_subscription(self, subscription_id: str) -> dict[str, Any]:
        """One subscription as Prolific holds it now (".../webhooks/get-subscription")."""
        return self.request("GET", f"/api/v1/hooks/subscriptions/{subscription_id}/") or {}

    def delete_subscription(self, subscription_id: str) -> None:
        """Delete a subscription (".../webhooks/delete-subscription")."""
        self.request("DELETE", f"/api/v1/hooks/subscriptions/{subscription_id}/")

    def subscribe(self, workspace_id: str, event_type: str, target_url: str) -> dict[str, Any]:
        """Create a subscription and confirm it with the ``X-Hook-Secret`` its creation answered
        (".../webhooks/subscribing"); returns the confirmed subscription."""
        created = self.request("POST", "/api/v1/hooks/subscriptions/", idempotent=False,
                               json={"workspace_id": workspace_id, "event_type": event_type,
                                     "target_url": target_url})
        if self.dry_run:
            return {"id": "<subscription-id>", "event_type": event_type}
        if isinstance(created, dict) and "results" in created and "id" not in created:
            created = created["results"][0]
        secret = self.last_headers.get("X-Hook-Secret")
        if not secret:
            raise ProlificError("Prolific created the subscription without an X-Hook-Secret to "
                                "confirm it with", {"body": created})
        return self.request("POST", f"/api/v1/hooks/subscriptions/{created['id']}/",
                            json={"secret": secret}) or created

    def failed_deliveries(self, subscription_id: str) -> list[dict[str, Any]]:
        """Deliveries of the subscription that failed (``status=FAILED``)."""
        data = self.request("GET", f"/api/v1/hooks/subscriptions/{subscription_id}/events/",
                            params={"status": "FAILED"}) or {}
        return list(data.get("results", []))

    # bonuses ----------------------------------------------------------------------------------
    def create_bonus(self, study_id: str, participant_id: str, amount: Decimal) -> dict[str, Any]:
        """Step 1: set up a bonus (nothing is paid); returns its id."""
        csv = f"{participant_id},{Decimal(str(amount)).quantize(Decimal('0.01'))}"
        return self.request("POST", "/api/v1/submissions/bonus-payments/",
                            json={"study_id": study_id, "csv_bonuses": csv}) or {"id": "<dry-run>"}

    def create_bonuses(self, study_id: str, rows: list[tuple[str, Decimal]]) -> dict[str, Any]:
        """Step 1 for many participants of one study: one ``<participant_id>,<amount>`` CSV line
        each (https://docs.prolific.com/api-reference/bonuses/create-bonus-payments); one id."""
        csv = "\n".join(f"{who},{Decimal(str(amount)).quantize(Decimal('0.01'))}"
                         for who, amount in rows)
        return self.request("POST", "/api/v1/submissions/bonus-payments/",
                            json={"study_id": study_id, "csv_bonuses": csv}) or {"id": "<dry-run>"}

    def pay_bonus(self, bonus_id: str) -> Any:
        """Step 2: pay a bonus set up before. Not idempotent at Prolific: never retried on 5xx."""
        return self.request("POST", f"/api/v1/bulk-bonus-payments/{bonus_id}/pay/",
                            idempotent=False)


def study_link(public_url: str, slug: str) -> str:
    """The study URL Prolific sends participants to, with its placeholders."""
    return f"{public_url.rstrip('/')}/start/{slug}?{URL_PARAMETERS}"


def study_body(spec: ExperimentSpec, public_url: str | None = None, *,
               exclude: list[dict[str, Any]] | None = None,
               completers_group: str | None = None) -> dict[str, Any]:
    """The create-study request body from the spec's ``[recruitment.prolific]`` table
    (https://docs.prolific.com/api-reference/studies/create-study), with ``exclude``'s filters
    (``exclusion_filters``) and the completion code adding completers to ``completers_group``
    (https://docs.prolific.com/api-reference/participant-groups)."""
    from humanlike.server.participants.actions import ActionError

    recruitment = spec.recruitment
    table = recruitment.prolific if recruitment is not None else None
    if table is None:
        raise ActionError(f"{spec.slug}: the spec has no [recruitment.prolific] table",
                          "recruitment.prolific")
    base = public_url or (recruitment.public_url if recruitment else None)
    if not base or not base.startswith("https://"):
        raise ActionError("recruitment.public_url must be the server's https:// address "
                          f"(got {base!r})", "recruitment.public_url")
    codes = [(c.code, c.code_type, [_code_action(c, a) for a in c.actions])
             for c in table.completion_codes]
    if not codes and spec.completion.prolific_code:
        codes = [(spec.completion.prolific_code, "COMPLETED", [{"action": "MANUALLY_REVIEW"}])]
    if spec.completion.prolific_code not in [c[0] for c in codes]:
        raise ActionError(f"completion.prolific_code {spec.completion.prolific_code!r} (where the "
                          "server sends finished participants) is not among "
                          "recruitment.prolific.completion_codes",
                          "recruitment.prolific.completion_codes")
    body: dict[str, Any] = {
        "name": table.name,
        "internal_name": table.internal_name or spec.slug,
        "description": table.description,
        "external_study_url": study_link(base, spec.slug),
        "prolific_id_option": "url_parameters",
        "completion_codes": [{"code": code, "code_type": kind,
                              "actions": actions + (
                                  [{"action": "ADD_TO_PARTICIPANT_GROUP",
                                    "participant_group": completers_group}]
                                  if completers_group and code == spec.completion.prolific_code
                                  else [])}
                             for code, kind, actions in codes],
        "total_available_places": table.places,
        "estimated_completion_time": table.estimated_minutes,
        "reward": table.reward,
        "device_compatibility": list(table.device_compatibility),
        "filters": merged_filters([f.model_dump(exclude_none=True) for f in table.filters],
                                  exclude or []),
    }
    if table.maximum_minutes is not None:
        body["maximum_allowed_time"] = table.maximum_minutes
    return body


def _code_action(code: ProlificCompletionCode, action: str) -> dict[str, Any]:
    """One completion-code action as Prolific takes it: a paid screen-out carries its fixed reward
    and its slots (Prolific's custom screening, ``FIXED_SCREEN_OUT_PAYMENT``)."""
    if action == "FIXED_SCREEN_OUT_PAYMENT":
        return {"action": action, "fixed_screen_out_reward": code.fixed_screen_out_reward,
                "slots": code.slots}
    return {"action": action}


def merged_filters(own: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spec's filters, then ``more``; a filter id given in both once, its values joined."""
    out = [dict(f) for f in own]
    for f in more:
        same = next((o for o in out if o["filter_id"] == f["filter_id"]), None)
        if same is None:
            out.append(dict(f))
        else:
            same["selected_values"] = list(dict.fromkeys([*same.get("selected_values", []),
                                                          *f["selected_values"]]))
    return out


def exclusion_filters(spec: ExperimentSpec, where: str) -> list[dict[str, Any]]:
    """``participant_group_blocklist`` (the earlier experiments' completers groups) and
    ``previous_studies_blocklist`` (every Prolific study they listed) for the experiments named in
    ``recruitment.prolific.exclude_previous``, then a wave's allowlist (``wave_filters``);
    ``where`` (the spec file) prefixes the errors."""
    import sqlalchemy as sa

    from humanlike.server.participants.actions import ActionError
    from humanlike.server.tables.core import Experiment as ExperimentRow

    field = "recruitment.prolific.exclude_previous"
    table = spec.recruitment.prolific if spec.recruitment else None
    groups: list[str] = []
    studies: list[str] = []
    for slug in (table.exclude_previous if table else []):
        if slug == spec.slug:
            raise ActionError(f"{where}: {field}: {slug!r} names this experiment itself",
                              field)
        row = db.session.execute(sa.select(ExperimentRow).where(ExperimentRow.slug == slug)
                                 ).scalar_one_or_none()
        if row is None:
            known = db.session.execute(sa.select(ExperimentRow.slug).where(
                ExperimentRow.slug != spec.slug).order_by(ExperimentRow.slug)).scalars().all()
            raise ActionError(f"{where}: {field}: no experiment {slug!r} is served here (known: "
                              f"{', '.join(known) or 'none'})", field)
        if row.platform != "prolific":
            raise ActionError(f"{where}: {field}: experiment {slug!r} recruits on "
                              f"{row.platform!r}: its participants have no Prolific ids", field)
        meta = row.recruitment_meta or {}
        group = (meta.get("completers_group") or {}).get("id")
        listed = [s for s in [*meta.get("studies", []), row.recruitment_ref] if s]
        if not group and not listed:
            raise ActionError(f"{where}: {field}: experiment {slug!r} has no Prolific listing or "
                              "participant group yet, so there is nobody to keep out", field)
        groups += [group] if group else []
        studies += listed
    out = []
    if groups:
        out.append({"filter_id": "participant_group_blocklist",
                    "selected_values": list(dict.fromkeys(groups))})
    if studies:
        out.append({"filter_id": "previous_studies_blocklist",
                    "selected_values": list(dict.fromkeys(studies))})
    return out + wave_filters(spec, where)


def wave_filters(spec: ExperimentSpec, where: str) -> list[dict[str, Any]]:
    """For wave k of a study (``recruitment.prolific.wave``, ``previous_wave``): a
    ``participant_group_allowlist`` of wave k-1's completers group, so that only they see this
    listing (Prolific's participant groups as allowlist,
    https://docs.prolific.com/api-reference/participant-groups). Refused, naming the field, when
    wave k-1 is not served here, is not on Prolific, is not wave k-1, or has no group yet."""
    from humanlike.server.participants.actions import ActionError
    from humanlike.server.tables.core import Experiment as ExperimentRow

    table = spec.recruitment.prolific if spec.recruitment else None
    if table is None or table.previous_wave is None:
        return []
    field, slug = "recruitment.prolific.previous_wave", table.previous_wave
    if slug == spec.slug:
        raise ActionError(f"{where}: {field}: {slug!r} names this experiment itself", field)
    row = db.session.execute(sa.select(ExperimentRow).where(ExperimentRow.slug == slug)
                             ).scalar_one_or_none()
    if row is None:
        raise ActionError(f"{where}: {field}: no experiment {slug!r} is served here", field)
    if row.platform != "prolific":
        raise ActionError(f"{where}: {field}: experiment {slug!r} recruits on {row.platform!r}: "
                          "its participants have no Prolific ids", field)
    theirs = int((row.recruitment_meta or {}).get("wave") or 1)  # stored by its create
    if theirs != (table.wave or 1) - 1:
        raise ActionError(f"{where}: {field}: experiment {slug!r} is wave {theirs}, not wave "
                          f"{(table.wave or 1) - 1}", field)
    group = ((row.recruitment_meta or {}).get("completers_group") or {}).get("id")
    if not group:
        raise ActionError(f"{where}: {field}: wave {slug!r} has no completers group on Prolific "
                          "yet: set its recruitment.prolific.completers_group and run create "
                          "(or group) for it first", field)
    return [{"filter_id": "participant_group_allowlist", "selected_values": [str(group)]}]


def wave_recipients(experiment: Experiment, spec: ExperimentSpec) -> list[Participant]:
    """Who a reminder that wave k (``experiment``) is open goes to: wave k-1's participants who
    finished it (``FINISHED_STATUSES``: its completers, the group wave k allows) and have not
    started wave k, in the order they joined; refused, naming the field, for a spec that is no
    later wave or a wave k that has no Prolific listing yet."""
    from humanlike.server.participants.actions import ActionError
    from humanlike.server.tables.core import Experiment as ExperimentRow
    from humanlike.server.tables.core import Participant as ParticipantRow
    from humanlike.vocabulary import FINISHED_STATUSES

    table = spec.recruitment.prolific if spec.recruitment else None
    if table is None or table.previous_wave is None:
        raise ActionError(f"{spec.slug}: recruitment.prolific.previous_wave is not set: this is "
                          "no later wave, there is nobody to remind", "recruitment.prolific")
    if not experiment.recruitment_ref:
        raise ActionError(f"{spec.slug} has no Prolific listing yet: create and publish it, then "
                          "remind", "recruitment_ref", 409)
    previous = db.session.execute(sa.select(ExperimentRow).where(
        ExperimentRow.slug == table.previous_wave)).scalar_one_or_none()
    if previous is None:
        raise ActionError(f"recruitment.prolific.previous_wave: no experiment "
                          f"{table.previous_wave!r} is served here", "recruitment.prolific")
    started = sa.select(ParticipantRow.platform_id).where(
        ParticipantRow.experiment_id == experiment.id)
    return list(db.session.execute(sa.select(ParticipantRow).where(
        ParticipantRow.experiment_id == previous.id,
        ParticipantRow.status.in_(sorted(FINISHED_STATUSES)),
        ParticipantRow.platform_id.not_in(started)).order_by(ParticipantRow.id)).scalars())


def completers_group(client: ProlificClient, experiment: Experiment, name: str,
                     workspace: str | None, where: str, save: Callable[[], None]) -> str:
    """The id of the group ``name`` this experiment's completers join: the one stored for it, else
    the workspace's group of that name, else a new one; stored (``save``) before it is used."""
    from humanlike.server.participants.actions import ActionError

    meta = experiment.recruitment_meta or {}
    stored = meta.get("completers_group") or {}
    if stored.get("id") and stored.get("name") == name:
        return str(stored["id"])
    if not workspace:
        raise ActionError(f"{where}: recruitment.prolific.completers_group {name!r}: give the "
                          "Prolific workspace it belongs to (--workspace or "
                          "PROLIFIC_WORKSPACE_ID)", "recruitment.prolific.completers_group")
    found = [g for g in client.participant_groups(workspace)
             if g.get("name") == name and not g.get("is_deleted")]
    if len(found) > 1:
        raise ActionError(f"{where}: recruitment.prolific.completers_group {name!r}: workspace "
                          f"{workspace} has {len(found)} groups of that name ("
                          f"{', '.join(str(g['id']) for g in found)}); rename one on Prolific",
                          "recruitment.prolific.completers_group")
    group = found[0] if found else client.create_participant_group(
        workspace, name, f"Completers of {experiment.slug} (humanlike)")
    if client.dry_run:
        return "<group-id>"
    experiment.recruitment_meta = {**meta, "completers_group": {
        "id": str(group["id"]), "name": name, "workspace": workspace}}
    save()
    return str(group["id"])


def _submission_id(participant: Participant) -> str:
    if not participant.session_id:
        raise PlatformError(f"participant {participant.public_id} has no Prolific SESSION_ID "
                            "(the submission id): they did not arrive through the study link")
    return participant.session_id


class ProlificRecruiter:
    """``server.actions``' Recruiter for Prolific experiments."""

    def __init__(self, client: ProlificClient, experiment: Experiment):
        self.client, self.experiment = client, experiment

    def _unless_already(self, participant: Participant, target: str) -> dict[str, Any] | None:
        """Read the submission first: Prolific's reply to an earlier call may have been lost. Its
        status if already ``target``; a refusal if it was decided the other way; else None."""
        if self.client.dry_run:
            return None
        submission = self.client.get_submission(_submission_id(participant))
        status = submission.get("status")
        if status == target:
            return {"already": status, "checked": "submission read first; nothing sent"}
        if status in ("APPROVED", "REJECTED"):
            raise PlatformError(f"the submission is already {status} on Prolific: nothing sent",
                                {"status": status})
        return None

    def approve(self, participant: Participant) -> dict[str, Any]:
        return (self._unless_already(participant, "APPROVED")
                or self.client.approve_submission(_submission_id(participant)))

    def reject(self, participant: Participant, message: str,
               category: str | None) -> dict[str, Any]:
        validate_rejection(message, category, "prolific")
        return (self._unless_already(participant, "REJECTED")
                or self.client.reject_submission(_submission_id(participant), message, category))

    def message(self, participants: list[Participant], body: str) -> dict[str, Any]:
        """One message to these participants, one bulk request per study they took part in."""
        by_study: dict[str, list[str]] = {}
        for p in participants:
            study = p.study_id or self.experiment.recruitment_ref
            if not study:
                raise PlatformError(f"no Prolific study id for participant {p.public_id}")
            by_study.setdefault(study, []).append(p.platform_id)
        for study, ids in by_study.items():
            self.client.message(study, ids, body)
        return {"studies": sorted(by_study), "recipients": len(participants)}

    def bonus_paid(self, participant: Participant, payment: Payment) -> bool:
        """Whether Prolific shows ``payment`` paid: the submission's ``bonus_payments`` (minor units)
        hold more of its amount than the bonuses of that amount recorded paid here before it."""
        from humanlike.server.tables.core import Payment as PaymentRow

        submission = self.client.get_submission(_submission_id(participant))
        cents = int((Decimal(str(payment.amount)) * 100).to_integral_value())
        there = sum(1 for amount in submission.get("bonus_payments") or []
                    if round(float(amount)) == cents)
        here = db.session.execute(sa.select(sa.func.count()).select_from(PaymentRow).where(
            PaymentRow.participant_id == participant.id, PaymentRow.id != payment.id,
            PaymentRow.amount == payment.amount, PaymentRow.status == PaymentStatus.PAID)
        ).scalar_one()
        return there > here

    def pay_bonus(self, participant: Participant, payment: Payment,
                  save: Callable[[], None]) -> dict[str, Any]:
        """Create the bonus (its id stored and committed), then pay it; a retry after a failed or
        interrupted pay step pays the bonus already created, never a second one."""
        study = participant.study_id or self.experiment.recruitment_ref
        if not study:
            raise PlatformError(f"no Prolific study id for participant {participant.public_id}")
        created = None
        if payment.platform_ref is not None and shares_platform_ref(payment):
            payment.platform_ref = None  # a batch's bonus: paying it would pay the whole batch
        if payment.platform_ref is None:
            created = self.client.create_bonus(study, participant.platform_id,
                                               Decimal(str(payment.amount)))
            payment.platform_ref = str(created["id"])
            save()
        paid = self.client.pay_bonus(payment.platform_ref)
        return {"bonus_id": payment.platform_ref, "created": created, "paid": paid}

    def bonus_batch_key(self, participant: Participant) -> str:
        """Bonuses share a bulk bonus payment only within one Prolific study."""
        return participant.study_id or self.experiment.recruitment_ref or ""

    def pay_bonuses(self, pairs: list[tuple[Participant, Payment]],
                    save: Callable[[], None]) -> dict[str, Any]:
        """One bulk bonus payment for these participants of one study (its id stored on every
        payment and saved before the pay step), paid once: Prolific's advice for many bonuses
        (https://docs.prolific.com/api-reference/bonuses, "You can bulk pay bonuses via the API")."""
        studies = {self.bonus_batch_key(p) for p, _ in pairs}
        if len(studies) != 1 or "" in studies:
            raise PlatformError("a bulk bonus pays participants of one Prolific study; got "
                                f"{sorted(studies)}")
        [study] = studies
        created = self.client.create_bonuses(study, [(p.platform_id, Decimal(str(pay.amount)))
                                                     for p, pay in pairs])
        for _, payment in pairs:
            payment.platform_ref = BATCH_REF + str(created["id"])
        save()
        paid = self.client.pay_bonus(str(created["id"]))
        return {"bonus_id": str(created["id"]), "created": created, "paid": paid,
                "batch": len(pairs)}

