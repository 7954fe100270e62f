"""A local fake of Prolific's researcher API (werkzeug, 127.0.0.1) that checks every path, header
and body against Prolific's documentation and keeps state (studies, submissions, bonuses paid).

Rules and where they are documented:
- every request: ``Authorization: Token <token>``
  (https://docs.prolific.com/api-reference/introduction, "Header authentication of the form Token")
- POST /api/v1/studies/ (create a draft, status UNPUBLISHED): name, description, external_study_url,
  completion_codes [{code, code_type, actions: [{action}]}] (MANUALLY_REVIEW and
  AUTOMATICALLY_APPROVE exclude each other), total_available_places, estimated_completion_time and
  maximum_allowed_time in minutes, reward in minor units (cents/pence, an integer),
  device_compatibility (desktop / tablet / mobile), filters [{filter_id, selected_values |
  selected_range}]; placeholders {{%PROLIFIC_PID%}}, {{%STUDY_ID%}}, {{%SESSION_ID%}}
  (https://docs.prolific.com/api-reference/studies/the-study-object,
  https://docs.prolific.com/api-reference/studies/get-study)
- completion codes (https://docs.prolific.com/api-reference/studies/the-study-object,
  completion_codes): ``code_type`` one of COMPLETED, FAILED_ATTENTION_CHECK, FOLLOW_UP_STUDY,
  GIVE_BONUS, INCOMPATIBLE_DEVICE, NO_CONSENT, OTHER, FIXED_SCREENOUT; ``actor`` participant |
  researcher; the custom screening action ``FIXED_SCREEN_OUT_PAYMENT`` carries
  ``fixed_screen_out_reward`` (minor units, at least 10: Prolific's least screen-out pay is
  £0.10 / $0.14) and ``slots`` (screen-outs allowed before Prolific pauses the study), and goes on
  a single code ("except when using a custom screening action, which is limited to a single code";
  Prolific's custom screening notes, https://prolific.notion.site/New-Custom-Screening-July-2025-
  23770df1d20280c29cdee4cea83f2371). A participant submitting a code: AUTOMATICALLY_APPROVE ->
  APPROVED; FIXED_SCREEN_OUT_PAYMENT -> SCREENED OUT, paid the fixed reward automatically;
  REQUEST_RETURN -> AWAITING REVIEW with a return requested; otherwise AWAITING REVIEW
  (https://docs.prolific.com/api-reference/submissions/submission-object).
- POST /api/v1/studies/{id}/transition/ {"action": PUBLISH | PAUSE | START | STOP}
  (https://docs.prolific.com/documentation/core-concepts/reviewing-submissions-and-rewards)
- PATCH /api/v1/studies/{id}/ total_available_places may only increase (Prolific only allows
  increasing places; after publishing only internal_name and total_available_places change)
- GET /api/v1/submissions/?study=&page=&page_size= (default page_size 20)
  (https://docs.prolific.com/api-reference/submissions/get-submissions); statuses RESERVED, ACTIVE,
  TIMED-OUT, AWAITING REVIEW, APPROVED, RETURNED, REJECTED, SCREENED OUT
  (https://docs.prolific.com/api-reference/submissions/submission-object)
- POST /api/v1/submissions/{id}/transition/ {"action": APPROVE | REJECT, message (REJECT: >= 100
  characters), rejection_category (REJECT)}
  (https://docs.prolific.com/api-reference/submissions/transition-submission)
- POST /api/v1/submissions/bulk-approve/ {"submission_ids": [...]} or {"study_id", "participant_ids"}
  (https://docs.prolific.com/api-reference/submissions/bulk-approve-submissions)
- POST /api/v1/submissions/bonus-payments/ {"study_id", "csv_bonuses": "<participant_id>,<amount>\\n"}
  one line per participant or submission of the study ("Set up bonus payments to one or more
  participants/submissions in a study"), amounts decimal in the study currency, every id must have
  taken part (else 400 "which explains which IDs are incorrect": all of them are named) -> 201
  {id, study, amount, fees, total_amount (minor units)}
  (https://docs.prolific.com/api-reference/bonuses/create-bonus-payments)
- POST /api/v1/bulk-bonus-payments/{id}/pay/ -> 202; NOT idempotent: paying twice pays every row
  twice; payments are made asynchronously "in the following minutes"
  (https://docs.prolific.com/api-reference/bonuses/pay-bonus-payments). Bonuses for many
  participants go in one bulk payment ("You can bulk pay bonuses via the API",
  https://docs.prolific.com/api-reference/bonuses; "Use bulk endpoints", payments contend for the
  workspace's wallet: https://docs.prolific.com/documentation/core-concepts/managing-high-loads);
  the fake answers one request at a time, as the docs ask ("We do not support concurrent
  requests").
- GET /api/v1/submissions/{id}/ -> the submission object, whose ``bonus_payments`` lists the bonuses
  paid on it (amounts in minor units) (https://docs.prolific.com/api-reference/submissions/get-submission,
  https://docs.prolific.com/api-reference/submissions/submission-object)
- test runs (https://docs.prolific.com/api-reference/users/create-test-participant-for-researcher,
  https://docs.prolific.com/api-reference/studies/create-test-study): POST
  /api/v1/researchers/participants/ {"email"} (not one registered already) -> {"participant_id"};
  POST /api/v1/studies/{id}/test-study (documented without the trailing slash) on a draft study,
  once a test participant exists -> {"study_id", "study_url"}
- POST /api/v1/messages/bulk/ {"ids": [participant ids], "body", "study_id"} (all required) -> 204
  (https://docs.prolific.com/api-reference/messages/bulk-message-participants)
- webhooks (https://docs.prolific.com/api-reference/webhooks/subscribing and the pages beside it):
  POST /api/v1/hooks/secrets/ {"workspace_id"} -> {"id", "value", "workspace_id"} (one secret per
  workspace, replaced on each call); POST /api/v1/hooks/subscriptions/ {"event_type", "target_url",
  "workspace_id"} (a secret must exist; target_url https:// and publicly reachable, not localhost)
  and the optional "is_enabled" (default true) -> 201 {"results": [the subscription with an
  ``id``]} and an ``X-Hook-Secret`` header (".../create-subscription"); POST
  /api/v1/hooks/subscriptions/{id}/ {"secret": <X-Hook-Secret>} confirms it (only a confirmed
  subscription is delivered to; nothing in the API shows whether one is); GET
  /api/v1/hooks/subscriptions/?workspace_id=&is_enabled= lists them (``is_enabled`` defaults to
  true: only enabled ones, ".../get-subscriptions"); GET and DELETE
  /api/v1/hooks/subscriptions/{id}/ retrieve and delete one; GET
  /api/v1/hooks/subscriptions/{id}/events/?status= lists deliveries. A delivery is a POST of
  {"resource_id", "event_type", "status"} with X-Prolific-Request-Signature = base64(HMAC-SHA256(
  secret, X-Prolific-Request-Timestamp + body)) (".../webhooks/verifying"; the timestamp is a UNIX
  time of when the request was sent, so each retry is signed anew), X-Event-ID (the same on every
  retry of one event, ".../idempotency-and-the-x-event-id-header") and X-Timestamp (when the event
  was sent, ".../handling-event-order-with-x-timestamp"); neither of the last two is signed.
- participant groups (https://docs.prolific.com/api-reference/participant-groups and the pages
  beside it): POST /api/v1/participant-groups/ {"name" (required), "workspace_id" |
  "organisation_id" | the deprecated "project_id" (one required), "description"?,
  "participant_ids"?} -> 201 the group {id, name, description, workspace_id, organisation_id,
  project_id, participant_count, is_deleted, feeder_studies}; GET /api/v1/participant-groups/
  ?workspace_id= | ?project_id= -> {"results": [...]}; GET /api/v1/participant-groups/{id}/;
  GET / POST / DELETE /api/v1/participant-groups/{id}/participants/ (POST and DELETE
  {"participant_ids": [...]}: append, members already there ignored / remove, non-members
  ignored) -> {"results": [...]}. A study's filters {"filter_id": "participant_group_blocklist" |
  "participant_group_allowlist", "selected_values": [group ids]} and
  {"filter_id": "previous_studies_blocklist" | "previous_studies_allowlist", "selected_values":
  [study ids]}; a completion code's action {"action": "ADD_TO_PARTICIPANT_GROUP" |
  "REMOVE_FROM_PARTICIPANT_GROUP", "participant_group": <group id>} changes the group when a
  participant submits with that code, and studies filtering on the group follow at once
  (eligibility modelled simply: ``available`` lists the active studies a participant may take,
  ``join`` refuses any other).
Undocumented here, so chosen: the members list's items ``{"participant_id", "datetime_created"}``,
the error body shape ``{"error": {"status", "title", "detail":
{field: [messages]}}}`` and the list's ``_links.next.href`` paging links.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import threading
import time
from decimal import Decimal, InvalidOperation
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

REJECTION_CATEGORIES = {"TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL",
                        "FAILED_CHECK", "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE",
                        "NO_DATA", "UNSUPP_DEVICE", "OTHER"}
CODE_ACTIONS = {"MANUALLY_REVIEW", "AUTOMATICALLY_APPROVE", "REQUEST_RETURN",
                "ADD_TO_PARTICIPANT_GROUP", "REMOVE_FROM_PARTICIPANT_GROUP", "DYNAMIC_PAYMENT",
                "FIXED_SCREEN_OUT_PAYMENT"}
STUDY_FIELDS = {"name", "internal_name", "description", "external_study_url", "prolific_id_option",
                "completion_codes", "total_available_places", "estimated_completion_time",
                "maximum_allowed_time", "reward", "device_compatibility", "filters",
                "peripheral_requirements", "project", "study_labels", "content_warnings"}
PLACEHOLDERS = ("{{%PROLIFIC_PID%}}", "{{%STUDY_ID%}}", "{{%SESSION_ID%}}")
EVENT_TYPES = {"study.status.change", "submission.status.change", "study.has_high_return_rate",
               "study.progress.change"}
CODE_TYPES = {"COMPLETED", "FAILED_ATTENTION_CHECK", "FOLLOW_UP_STUDY", "GIVE_BONUS",
              "INCOMPATIBLE_DEVICE", "NO_CONSENT", "OTHER", "FIXED_SCREENOUT"}
SCREEN_OUT_MIN_REWARD = 10
GROUP_ACTIONS = {"ADD_TO_PARTICIPANT_GROUP", "REMOVE_FROM_PARTICIPANT_GROUP"}
GROUP_FILTERS = {"participant_group_blocklist", "participant_group_allowlist"}
STUDY_FILTERS = {"previous_studies_blocklist", "previous_studies_allowlist"}
GROUP_FIELDS = {"name", "workspace_id", "organisation_id", "project_id", "description",
                "participant_ids"}
STUDY_TRANSITIONS = {"PUBLISH": "ACTIVE", "PAUSE": "PAUSED", "START": "ACTIVE",
                     "STOP": "AWAITING REVIEW"}


class NotEligible(AssertionError):
    """The study is hidden from this participant (a filter excludes them)."""


class Refused(Exception):
    def __init__(self, status: int, detail: dict[str, Any] | str):
        self.status, self.detail = status, detail


def _field_error(field: str, message: str) -> Refused:
    return Refused(400, {field: [message]})


class FakeProlific:
    """State + WSGI app. ``fail_next``: status codes answered (and nothing done) for the next
    requests; ``fail_pay``: how many pay calls answer 503 without paying; ``lose_pay_reply``: how
    many pay calls pay and then answer 503 (the reply lost after the change was applied, as a
    gateway time-out in front of Prolific does); ``fail_transition``: how many submission
    transitions answer 503 without acting; ``pay_faults``: pay call number (1-based) -> "fail"
    (503, nothing paid) or "lose" (paid, then 503), to inject a fault mid-way through batches."""

    def __init__(self, token: str):
        self.token = token
        self.studies: dict[str, dict[str, Any]] = {}
        self.submissions: dict[str, dict[str, Any]] = {}
        self.bonuses: dict[str, dict[str, Any]] = {}
        self.paid: list[str] = []
        self.log: list[tuple[str, str, Any]] = []
        self.fail_next: list[int] = []
        self.fail_pay = 0
        self.lose_pay_reply = 0
        self.fail_transition = 0
        self.pay_faults: dict[int, str] = {}
        self.pay_calls = 0
        self.secrets: dict[str, str] = {}
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.hook_secrets: dict[str, str] = {}
        self.confirmed: set[str] = set()
        """Subscriptions confirmed with their X-Hook-Secret: only these are delivered to (the API
        shows no such flag: an unconfirmed subscription is listed ``is_enabled`` all the same)."""
        self.lose_hook_reply = 0
        self.deliveries: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.test_participants: dict[str, str] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.members: dict[str, list[str]] = {}
        self._ids = itertools.count(1)
        self.lock = threading.Lock()

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):022x}"[:24]

    # participants' side ----------------------------------------------------------------------
    def join(self, study_id: str, participant_id: str) -> tuple[str, str]:
        """A participant takes a place: returns (submission id, the study URL they are sent to)."""
        study = self.studies[study_id]
        assert study["status"] == "ACTIVE", "participants only see published, active studies"
        if not self.eligible(study, participant_id):
            raise NotEligible(f"study {study_id} is hidden from {participant_id} by its filters")
        sid = self.new_id("5")
        study["places_taken"] = study.get("places_taken", 0) + 1
        self.submissions[sid] = {"id": sid, "participant_id": participant_id, "study_id": study_id,
                                 "status": "ACTIVE", "study_code": None, "bonus_payments": []}
        url = (study["external_study_url"].replace("{{%PROLIFIC_PID%}}", participant_id)
               .replace("{{%STUDY_ID%}}", study_id).replace("{{%SESSION_ID%}}", sid))
        return sid, url

    def complete(self, submission_id: str, code: str) -> None:
        """The participant lands on app.prolific.com/submissions/complete?cc=<code>."""
        sub = self.submissions[submission_id]
        codes = {c["code"]: c for c in self.studies[sub["study_id"]]["completion_codes"]}
        sub["study_code"] = code if code in codes else "NOCODE"
        steps = codes[code]["actions"] if code in codes else []
        actions = {a["action"] for a in steps}
        sub["status"] = "APPROVED" if "AUTOMATICALLY_APPROVE" in actions else "AWAITING REVIEW"
        sub["return_requested"] = "REQUEST_RETURN" in actions
        for step in steps:
            if step["action"] == "FIXED_SCREEN_OUT_PAYMENT":  # paid at once, no review
                sub["status"] = "SCREENED OUT"
                sub["screen_out_reward"] = step["fixed_screen_out_reward"]
                study = self.studies[sub["study_id"]]
                study["screened_out"] = study.get("screened_out", 0) + 1
                if study["screened_out"] >= step["slots"] and study["status"] == "ACTIVE":
                    study["status"] = "PAUSED"  # the screen-out slots are used up
        for step in steps:  # Prolific keeps the groups itself, as the participant submits
            members = self.members[step["participant_group"]] if step["action"] in \
                GROUP_ACTIONS else None
            if step["action"] == "ADD_TO_PARTICIPANT_GROUP" and sub["participant_id"] not in members:
                members.append(sub["participant_id"])
            elif step["action"] == "REMOVE_FROM_PARTICIPANT_GROUP" and \
                    sub["participant_id"] in members:
                members.remove(sub["participant_id"])

    def eligible(self, study: dict[str, Any], participant_id: str) -> bool:
        """Whether the study's group and previous-study filters let this participant see it."""
        def took_part(ids: list[str]) -> bool:
            return any(s["participant_id"] == participant_id and s["study_id"] in ids
                       for s in self.submissions.values())

        def in_group(ids: list[str]) -> bool:
            return any(participant_id in self.members.get(g, []) for g in ids)

        for f in study.get("filters", []):
            ids = f.get("selected_values") or []
            if f["filter_id"] == "participant_group_blocklist" and in_group(ids):
                return False
            if f["filter_id"] == "participant_group_allowlist" and not in_group(ids):
                return False
            if f["filter_id"] == "previous_studies_blocklist" and took_part(ids):
                return False
            if f["filter_id"] == "previous_studies_allowlist" and not took_part(ids):
                return False
        return True

    def available(self, participant_id: str) -> list[str]:
        """The active studies this participant is shown."""
        return [sid for sid, s in self.studies.items()
                if s["status"] == "ACTIVE" and self.eligible(s, participant_id)]

    def set_status(self, submission_id: str, status: str) -> None:
        self.submissions[submission_id]["status"] = status

    # WSGI ------------------------------------------------------------------------------------
    def __call__(self, environ: Any, start_response: Any) -> Any:
        request = Request(environ)
        with self.lock:
            response = self.handle(request)
        return response(environ, start_response)

    def handle(self, request: Request) -> Response:
        body = request.get_data(as_text=True)
        payload = json.loads(body) if body else None
        self.log.append((request.method, request.full_path.rstrip("?"), payload))
        if request.headers.get("Authorization") != f"Token {self.token}":
            return self.json({"error": {"status": 401, "title": "Not authenticated",
                                        "detail": "Authentication credentials were not provided."}},
                             401)
        if self.fail_next:
            status = self.fail_next.pop(0)
            return self.json({"error": {"status": status, "title": "try later"}}, status,
                             {"Retry-After": "0"} if status == 429 else None)
        if payload is not None and request.mimetype != "application/json":
            return self.json({"error": {"status": 415, "title": "JSON only"}}, 415)
        self.reply_headers: dict[str, str] = {}
        try:
            data, status = self.route(request, payload)
        except Refused as exc:
            return self.json({"error": {"status": exc.status, "title": "Invalid request",
                                        "detail": exc.detail}}, exc.status)
        return self.json(data, status, self.reply_headers or None)

    @staticmethod
    def json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        if status == 204:
            return Response(status=204, headers=headers)
        return Response(json.dumps(data), status=status, mimetype="application/json",
                        headers=headers)

    def route(self, request: Request, body: Any) -> tuple[Any, int]:
        path, method = request.path, request.method
        if (m := re.fullmatch(r"/api/v1/studies/(\w+)/test-study", path)) and method == "POST":
            return self.test_study(self.study(m[1])), 200
        if not path.endswith("/"):
            raise Refused(404, "Prolific's paths end with a slash")
        if (method, path) == ("POST", "/api/v1/researchers/participants/"):
            return self.test_participant(body), 201
        if (method, path) == ("POST", "/api/v1/studies/"):
            return self.create_study(body), 201
        if path.startswith("/api/v1/participant-groups/"):
            return self.participant_groups(request, method, path, body)
        if m := re.fullmatch(r"/api/v1/studies/(\w+)/", path):
            study = self.study(m[1])
            if method == "GET":
                return study, 200
            if method == "PATCH":
                return self.patch_study(study, body), 200
        if (m := re.fullmatch(r"/api/v1/studies/(\w+)/transition/", path)) and method == "POST":
            return self.transition_study(self.study(m[1]), body), 200
        if (method, path) == ("POST", "/api/v1/messages/bulk/"):
            return self.bulk_message(body), 204
        if path.startswith("/api/v1/hooks/"):
            return self.hooks(request, method, path, body)
        if (method, path) == ("GET", "/api/v1/submissions/"):
            return self.list_submissions(request), 200
        if (m := re.fullmatch(r"/api/v1/submissions/(\w+)/", path)) and method == "GET":
            return self.get_submission(m[1]), 200
        if (m := re.fullmatch(r"/api/v1/submissions/(\w+)/transition/", path)) and method == "POST":
            return self.transition_submission(m[1], body), 200
        if (method, path) == ("POST", "/api/v1/submissions/bulk-approve/"):
            return self.bulk_approve(body), 200
        if (method, path) == ("POST", "/api/v1/submissions/bonus-payments/"):
            return self.create_bonus(body), 201
        if (m := re.fullmatch(r"/api/v1/bulk-bonus-payments/(\w+)/pay/", path)) and method == "POST":
            return self.pay(m[1]), 202
        raise Refused(404, f"no such endpoint: {method} {path}")

    def test_participant(self, body: Any) -> dict[str, Any]:
        email = (body or {}).get("email")
        if set(body or {}) != {"email"} or not isinstance(email, str) or "@" not in email:
            raise _field_error("email", "Enter a valid email address.")
        if email in self.test_participants:
            raise _field_error("email", "This email is already registered with Prolific.")
        self.test_participants[email] = self.new_id("t")
        return {"participant_id": self.test_participants[email]}

    def test_study(self, study: dict[str, Any]) -> dict[str, Any]:
        if study["status"] != "UNPUBLISHED":
            raise _field_error("status", "Only a draft study can be tested.")
        if not self.test_participants:
            raise Refused(400, "Create a test participant first.")
        copy = {**study, "id": self.new_id("6"), "status": "ACTIVE", "test_of": study["id"]}
        self.studies[copy["id"]] = copy
        return {"study_id": copy["id"],
                "study_url": f"https://app.prolific.com/studies/{copy['id']}"}

    def bulk_message(self, body: Any) -> None:
        body = body or {}
        if set(body) != {"ids", "body", "study_id"}:
            raise _field_error(sorted({"ids", "body", "study_id"} ^ set(body))[0],
                               "ids, body and study_id are required.")
        if not isinstance(body["ids"], list) or not body["ids"]:
            raise _field_error("ids", "A list of participant ids is required.")
        if not str(body["body"]).strip():
            raise _field_error("body", "This field may not be blank.")
        self.study(body["study_id"])
        took_part = {s["participant_id"] for s in self.submissions.values()
                     if s["study_id"] == body["study_id"]}
        for who in body["ids"]:
            if who not in took_part:
                raise _field_error("ids", f"{who} did not take part in the study.")
        self.messages.append(body)

    # participant groups ----------------------------------------------------------------------
    def live_groups(self) -> set[str]:
        return {g for g, row in self.groups.items() if not row["is_deleted"]}

    def group(self, gid: str) -> dict[str, Any]:
        if gid not in self.groups or self.groups[gid]["is_deleted"]:
            raise Refused(404, f"participant group {gid} not found")
        return {**self.groups[gid], "participant_count": len(self.members[gid]),
                "feeder_studies": [
                    {"id": sid, "name": s["name"]} for sid, s in self.studies.items()
                    if any(a.get("participant_group") == gid for c in s["completion_codes"]
                           for a in c["actions"])]}

    @staticmethod
    def _participant_ids(body: Any, required: bool) -> list[str]:
        ids = (body or {}).get("participant_ids")
        if ids is None and not required:
            return []
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i
                                                            for i in ids):
            raise _field_error("participant_ids", "A list of participant ids is required.")
        return ids

    def participant_groups(self, request: Request, method: str, path: str,
                           body: Any) -> tuple[Any, int]:
        if path == "/api/v1/participant-groups/" and method == "POST":
            body = body or {}
            for field in sorted(set(body) - GROUP_FIELDS):
                raise _field_error(field, "Unknown field.")
            if not isinstance(body.get("name"), str) or not body["name"].strip():
                raise _field_error("name", "This field is required.")
            owners = [k for k in ("workspace_id", "organisation_id", "project_id") if body.get(k)]
            if len(owners) != 1:
                raise _field_error("workspace_id", "Either a workspace or organisation ID must "
                                                   "be specified.")
            gid = self.new_id("a")
            self.groups[gid] = {"id": gid, "name": body["name"],
                                "description": body.get("description"),
                                "workspace_id": body.get("workspace_id"),
                                "organisation_id": body.get("organisation_id"),
                                "project_id": body.get("project_id"), "is_deleted": False}
            self.members[gid] = list(dict.fromkeys(self._participant_ids(body, False)))
            return self.group(gid), 201
        if path == "/api/v1/participant-groups/" and method == "GET":
            scope = {k: request.args[k] for k in ("workspace_id", "project_id", "organisation_id")
                     if k in request.args}
            if len(scope) != 1:
                raise _field_error("workspace_id", "A workspace_id or project_id is required.")
            [(key, value)] = scope.items()
            return {"results": [self.group(g) for g, row in self.groups.items()
                                if row[key] == value and not row["is_deleted"]]}, 200
        if (m := re.fullmatch(r"/api/v1/participant-groups/(\w+)/", path)) and method == "GET":
            return self.group(m[1]), 200
        if m := re.fullmatch(r"/api/v1/participant-groups/(\w+)/participants/", path):
            self.group(m[1])
            members = self.members[m[1]]
            if method == "POST":
                for who in self._participant_ids(body, True):
                    if who not in members:
                        members.append(who)
            elif method == "DELETE":
                for who in self._participant_ids(body, True):
                    if who in members:
                        members.remove(who)
            elif method != "GET":
                raise Refused(405, f"{method} not allowed")
            return {"results": [{"participant_id": who, "datetime_created": None}
                                for who in members]}, 200
        raise Refused(404, f"no such endpoint: {method} {path}")

    # webhooks --------------------------------------------------------------------------------
    def hooks(self, request: Request, method: str, path: str, body: Any) -> tuple[Any, int]:
        if (method, path) == ("POST", "/api/v1/hooks/secrets/"):
            if set(body or {}) != {"workspace_id"}:
                raise _field_error("workspace_id", "This field is required.")
            value = base64.urlsafe_b64encode(self.new_id("s").encode()).decode()
            self.secrets[body["workspace_id"]] = value
            return {"id": self.new_id("9"), "value": value,
                    "workspace_id": body["workspace_id"]}, 201
        if (method, path) == ("POST", "/api/v1/hooks/subscriptions/"):
            body = body or {}
            if set(body) - {"event_type", "target_url", "workspace_id", "is_enabled"}:
                raise _field_error(sorted(set(body) - {"event_type", "target_url", "workspace_id",
                                                       "is_enabled"})[0], "Unknown field.")
            for field in ("event_type", "target_url", "workspace_id"):
                if not body.get(field):
                    raise _field_error(field, "This field is required.")
            if body["event_type"] not in EVENT_TYPES:
                raise _field_error("event_type", "Unknown event type.")
            url = body["target_url"]
            if not url.startswith("https://") or re.match(r"https://(localhost|127\.)", url):
                raise _field_error("target_url", "Must use https:// and be publicly accessible.")
            if body["workspace_id"] not in self.secrets:
                raise _field_error("workspace_id", "Create a secret for the workspace first.")
            sub = {"id": self.new_id("8"), "event_type": body["event_type"], "target_url": url,
                   "workspace_id": body["workspace_id"],
                   "is_enabled": bool(body.get("is_enabled", True))}
            self.subscriptions[sub["id"]] = sub
            self.hook_secrets[sub["id"]] = self.new_id("h")
            if self.lose_hook_reply:  # created, but the answer (and its X-Hook-Secret) is lost
                self.lose_hook_reply -= 1
                raise Refused(504, "upstream timed out")
            self.reply_headers = {"X-Hook-Secret": self.hook_secrets[sub["id"]]}
            return {"results": [sub]}, 201
        if m := re.fullmatch(r"/api/v1/hooks/subscriptions/(\w+)/", path):
            sub = self.subscriptions.get(m[1])
            if sub is None:
                raise Refused(404, "subscription not found")
            if method == "GET":
                return sub, 200
            if method == "DELETE":
                del self.subscriptions[m[1]]
                self.confirmed.discard(m[1])
                return None, 204
            if method != "POST":
                raise Refused(405, f"{method} not allowed")
            if (body or {}).get("secret") != self.hook_secrets[m[1]]:
                raise _field_error("secret", "Does not match the X-Hook-Secret of the subscription.")
            self.confirmed.add(m[1])
            return sub, 200
        if (method, path) == ("GET", "/api/v1/hooks/subscriptions/"):
            ws = request.args.get("workspace_id")
            enabled = request.args.get("is_enabled", "true").lower() != "false"
            return {"results": [s for s in self.subscriptions.values()
                                if (ws is None or s["workspace_id"] == ws)
                                and s["is_enabled"] == enabled]}, 200
        if (m := re.fullmatch(r"/api/v1/hooks/subscriptions/(\w+)/events/", path)) \
                and method == "GET":
            status = request.args.get("status")
            return {"results": [d for d in self.deliveries if d["subscription_id"] == m[1]
                                and (status is None or d["status"] == status)]}, 200
        raise Refused(404, f"no such endpoint: {method} {path}")

    def delivering(self, event_type: str, target_url: str) -> list[str]:
        """The subscriptions that would deliver ``event_type`` to ``target_url``: enabled and
        confirmed."""
        return [sid for sid, s in self.subscriptions.items()
                if (s["event_type"], s["target_url"]) == (event_type, target_url)
                and s["is_enabled"] and sid in self.confirmed]

    def event(self, event_type: str, resource_id: str, status: str | None, when: str,
              event_id: str | None = None, workspace: str = "ws1",
              stamp: int | None = None) -> tuple[bytes, dict[str, str]]:
        """A delivery as Prolific sends it: body and headers, signed with the workspace's secret
        over X-Prolific-Request-Timestamp (when the request is sent: now, unless ``stamp``) and
        the body; X-Event-ID and X-Timestamp (``when``) are not signed."""
        payload: dict[str, Any] = {"resource_id": resource_id, "event_type": event_type}
        if status is not None:
            payload["status"] = status
        body = json.dumps(payload)
        stamp = str(int(time.time()) if stamp is None else stamp)
        digest = hmac.new(self.secrets[workspace].encode(), (stamp + body).encode(),
                          hashlib.sha256).digest()
        return body.encode(), {"Content-Type": "application/json",
                               "X-Prolific-Request-Signature": base64.b64encode(digest).decode(),
                               "X-Prolific-Request-Timestamp": stamp,
                               "X-Event-ID": event_id or self.new_id("e"), "X-Timestamp": when}

    def study(self, study_id: str) -> dict[str, Any]:
        if study_id not in self.studies:
            raise Refused(404, f"study {study_id} not found")
        return self.studies[study_id]

    @staticmethod
    def _positive_int(body: dict[str, Any], field: str) -> None:
        value = body.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise _field_error(field, "A positive integer is required.")

    def create_study(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise Refused(400, "a JSON object is required")
        for field in sorted(set(body) - STUDY_FIELDS):
            raise _field_error(field, "Unknown field.")
        for field in ("name", "description", "external_study_url"):
            if not isinstance(body.get(field), str) or not body[field].strip():
                raise _field_error(field, "This field is required.")
        url = body["external_study_url"]
        if not url.startswith("https://"):
            raise _field_error("external_study_url", "Enter a valid https URL.")
        if body.get("prolific_id_option") not in ("question", "url_parameters", "not_required"):
            raise _field_error("prolific_id_option", "Must be question, url_parameters or "
                                                     "not_required.")
        if body["prolific_id_option"] == "url_parameters" and not all(p in url for p in PLACEHOLDERS):
            raise _field_error("external_study_url", "url_parameters needs the PROLIFIC_PID, "
                                                     "STUDY_ID and SESSION_ID placeholders.")
        for field in ("total_available_places", "estimated_completion_time", "reward"):
            self._positive_int(body, field)
        if "maximum_allowed_time" in body:
            self._positive_int(body, "maximum_allowed_time")
            if body["maximum_allowed_time"] < body["estimated_completion_time"]:
                raise _field_error("maximum_allowed_time", "Must not be below the estimated time.")
        devices = body.get("device_compatibility", [])
        if not isinstance(devices, list) or set(devices) - {"desktop", "tablet", "mobile"}:
            raise _field_error("device_compatibility", "desktop, tablet or mobile.")
        codes = body.get("completion_codes")
        if not isinstance(codes, list) or not codes:
            raise _field_error("completion_codes", "Specify at least one completion code.")
        seen = set()
        screening = 0
        for code in codes:
            if set(code) - {"code", "code_type", "actions", "actor"} or not code.get("code") \
                    or not code.get("code_type") or not isinstance(code.get("actions"), list):
                raise _field_error("completion_codes", "Each needs code, code_type and actions.")
            if code["code_type"] not in CODE_TYPES:
                raise _field_error("completion_codes", f"Unknown code_type {code['code_type']!r}.")
            if code.get("actor", "participant") not in ("participant", "researcher"):
                raise _field_error("completion_codes", "actor is participant or researcher.")
            actions = [a.get("action") if isinstance(a, dict) else None for a in code["actions"]]
            if set(actions) - CODE_ACTIONS:
                raise _field_error("completion_codes", f"Unknown action in {actions}.")
            for step in code["actions"]:
                if step["action"] in GROUP_ACTIONS:
                    if set(step) != {"action", "participant_group"} or \
                            not isinstance(step["participant_group"], str):
                        raise _field_error("completion_codes", f"{step['action']} needs "
                                                               "participant_group (a group id).")
                    if step["participant_group"] not in self.live_groups():
                        raise _field_error("completion_codes", "No participant group "
                                                               f"{step['participant_group']}.")
                elif step["action"] == "FIXED_SCREEN_OUT_PAYMENT":
                    screening += 1
                    reward, slots = step.get("fixed_screen_out_reward"), step.get("slots")
                    if set(step) != {"action", "fixed_screen_out_reward", "slots"} or not all(
                            isinstance(v, int) and not isinstance(v, bool) for v in (reward, slots)):
                        raise _field_error("completion_codes", "FIXED_SCREEN_OUT_PAYMENT needs "
                                           "fixed_screen_out_reward and slots (integers).")
                    if reward < SCREEN_OUT_MIN_REWARD or slots <= 0:
                        raise _field_error("completion_codes", "The screen-out reward is at least "
                                           "10 (minor units) and slots positive.")
                    if screening > 1:
                        raise _field_error("completion_codes", "A custom screening action is "
                                           "limited to a single code.")
                elif step["action"] in ("MANUALLY_REVIEW", "AUTOMATICALLY_APPROVE",
                                        "REQUEST_RETURN") and set(step) != {"action"}:
                    raise _field_error("completion_codes",
                                       f"{step['action']} takes no other field: {sorted(step)}.")
            if {"MANUALLY_REVIEW", "AUTOMATICALLY_APPROVE"} <= set(actions):
                raise _field_error("completion_codes", "MANUALLY_REVIEW and AUTOMATICALLY_APPROVE "
                                                       "cannot be used together.")
            if code["code"] in seen:
                raise _field_error("completion_codes", "Each code must be unique within a study.")
            seen.add(code["code"])
        seen_filters = set()
        for f in body.get("filters", []):
            if "filter_id" not in f or ("selected_values" in f) == ("selected_range" in f):
                raise _field_error("filters", "Each filter needs filter_id and selected_values "
                                              "or selected_range.")
            if f["filter_id"] in seen_filters:
                raise _field_error("filters", f"{f['filter_id']} is given twice.")
            seen_filters.add(f["filter_id"])
            if f["filter_id"] in GROUP_FILTERS | STUDY_FILTERS:
                values = f.get("selected_values")
                if not isinstance(values, list) or not values or \
                        not all(isinstance(v, str) for v in values):
                    raise _field_error("filters", f"{f['filter_id']}: selected_values must be a "
                                                  "non-empty list of id strings.")
                known = self.live_groups() if f["filter_id"] in GROUP_FILTERS else self.studies
                for v in values:
                    if v not in known:
                        raise _field_error("filters", f"{f['filter_id']}: no such id {v!r}.")
        sid = self.new_id("6")
        study = {**body, "id": sid, "status": "UNPUBLISHED", "places_taken": 0}
        self.studies[sid] = study
        return study

    def patch_study(self, study: dict[str, Any], body: Any) -> dict[str, Any]:
        if study["status"] != "UNPUBLISHED" and set(body) - {"internal_name",
                                                              "total_available_places"}:
            raise _field_error(sorted(set(body))[0], "Cannot be changed after publishing.")
        if "total_available_places" in body:
            self._positive_int(body, "total_available_places")
            if body["total_available_places"] < study["total_available_places"]:
                raise _field_error("total_available_places", "Places can only be increased.")
        study.update(body)
        return study

    def transition_study(self, study: dict[str, Any], body: Any) -> dict[str, Any]:
        action = (body or {}).get("action")
        if action not in STUDY_TRANSITIONS:
            raise _field_error("action", "PUBLISH, PAUSE, START or STOP.")
        if action == "PUBLISH" and study["status"] != "UNPUBLISHED":
            raise _field_error("action", "Only a draft study can be published.")
        study["status"] = STUDY_TRANSITIONS[action]
        return study

    def list_submissions(self, request: Request) -> dict[str, Any]:
        study = request.args.get("study")
        if not study:
            raise _field_error("study", "A study id is required.")
        page, size = int(request.args.get("page", 1)), int(request.args.get("page_size", 20))
        rows = [s for s in self.submissions.values() if s["study_id"] == study]
        chunk = rows[(page - 1) * size: page * size]
        more = page * size < len(rows)
        nxt = f"/api/v1/submissions/?study={study}&page={page + 1}&page_size={size}" if more else None
        return {"results": [{k: s[k] for k in ("id", "participant_id", "status", "study_code")}
                            for s in chunk],
                "_links": {"next": {"href": nxt}}, "meta": {"count": len(rows)}}

    def get_submission(self, sid: str) -> dict[str, Any]:
        sub = self.submissions.get(sid)
        if sub is None:
            raise Refused(404, f"submission {sid} not found")
        return {"id": sid, "participant_id": sub["participant_id"], "status": sub["status"],
                "study_id": sub["study_id"], "study_code": sub.get("study_code"),
                "bonus_payments": list(sub.get("bonus_payments", []))}

    def transition_submission(self, sid: str, body: Any) -> dict[str, Any]:
        sub = self.submissions.get(sid)
        if sub is None:
            raise Refused(404, f"submission {sid} not found")
        if self.fail_transition:
            self.fail_transition -= 1
            raise Refused(503, "temporarily unavailable")
        action = (body or {}).get("action")
        if action not in ("APPROVE", "REJECT"):
            raise _field_error("action", "APPROVE or REJECT.")
        if action == "REJECT":
            if len(body.get("message") or "") < 100:
                raise _field_error("message", "It must be at least 100 chars long.")
            if body.get("rejection_category") not in REJECTION_CATEGORIES:
                raise _field_error("rejection_category", "Required if action is 'REJECT'.")
        elif set(body) - {"action"}:
            raise _field_error(sorted(set(body) - {"action"})[0], "Only for REJECT.")
        target = "APPROVED" if action == "APPROVE" else "REJECTED"
        if sub["status"] == target:  # the endpoint is idempotent
            return sub
        if sub["status"] != "AWAITING REVIEW":
            raise _field_error("action", f"Cannot {action} a submission that is {sub['status']}.")
        sub["status"] = target
        return {"id": sid, "status": target, "study_id": sub["study_id"],
                "participant": sub["participant_id"]}

    def bulk_approve(self, body: Any) -> str:
        if set(body) == {"submission_ids"}:
            ids = body["submission_ids"]
        elif set(body) == {"study_id", "participant_ids"}:
            ids = [s["id"] for s in self.submissions.values() if s["study_id"] == body["study_id"]
                   and s["participant_id"] in body["participant_ids"]]
        else:
            raise _field_error("submission_ids", "submission_ids, or study_id and participant_ids.")
        for sid in ids:
            if sid in self.submissions and self.submissions[sid]["status"] == "AWAITING REVIEW":
                self.submissions[sid]["status"] = "APPROVED"
        return "The request to bulk approve has been made successfully."

    def create_bonus(self, body: Any) -> dict[str, Any]:
        if set(body) != {"study_id", "csv_bonuses"}:
            raise _field_error("csv_bonuses", "study_id and csv_bonuses are required.")
        study = self.study(body["study_id"])
        rows, wrong = [], []
        for line in body["csv_bonuses"].strip().split("\n"):
            try:
                who, amount = line.split(",")
                value = Decimal(amount)
            except (ValueError, InvalidOperation):
                raise _field_error("csv_bonuses", f"Not '<participant_id>,<amount>': {line!r}") from None
            if value <= 0 or value != value.quantize(Decimal("0.01")):
                raise _field_error("csv_bonuses", f"Bad amount {amount!r}.")
            took_part = any(s["study_id"] == study["id"] and who in (s["participant_id"], s["id"])
                            for s in self.submissions.values())
            if not took_part:
                wrong.append(who)
            rows.append((who, value))
        if wrong:
            raise _field_error("csv_bonuses", f"{', '.join(wrong)} did not take part in the study.")
        bid = self.new_id("7")
        cents = float(sum(v for _, v in rows) * 100)
        self.bonuses[bid] = {"id": bid, "study": study["id"], "rows": rows}
        return {"id": bid, "study": study["id"], "amount": cents, "fees": round(cents / 3, 2),
                "total_amount": round(cents * 4 / 3, 2), "vat": 0}

    def pay(self, bid: str) -> str:
        if bid not in self.bonuses:
            raise Refused(404, f"bulk bonus payment {bid} not found")
        self.pay_calls += 1
        fault = self.pay_faults.get(self.pay_calls)
        if self.fail_pay or fault == "fail":
            self.fail_pay -= 0 if fault == "fail" else 1
            raise Refused(503, "temporarily unavailable")
        self.paid.append(bid)  # not idempotent, as documented: a second call pays again
        for who, value in self.bonuses[bid]["rows"]:
            for s in self.submissions.values():
                if who in (s["participant_id"], s["id"]):
                    s["bonus_payments"].append(float(value * 100))
        if self.lose_pay_reply or fault == "lose":
            self.lose_pay_reply -= 0 if fault == "lose" else 1
            raise Refused(503, "upstream timed out")  # paid, but the answer never arrives
        return f"Bulk bonus payment with ID {bid} is being processed asynchronously."


class Server:
    """Serve a FakeProlific on 127.0.0.1 (a free port) in a thread."""

    def __init__(self, fake: FakeProlific):
        self.fake = fake
        self.httpd = make_server("127.0.0.1", 0, fake, threaded=True)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.thread.join(5)
