"""Amazon Mechanical Turk from humanlike, legacy: MTurk closed permanently on 2026-09-30, so every
requester-API client stops with ``CLOSED_NOTICE`` unless ``HUMANLIKE_MTURK_ENDPOINT`` names an
endpoint explicitly (an archive or an MTurk-compatible service; docs/mturk-legacy.md). With one:
boto3's ``mturk`` client, credentials from the standard AWS chain: a HIT whose ExternalQuestion opens ``<public_url>/start/<slug>`` (HTTPS only), sandbox or
live; assignments (paginated), approve (``OverrideRejection`` to un-reject), reject (feedback
required), bonus (``UniqueRequestToken`` = the payment's idempotency key), expire, extend, notify.

Every request is checked against botocore's service model, in ``dry_run`` too (which prints the
operation, endpoint and parameters and sends nothing)."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError
from botocore.validate import validate_parameters

from humanlike.server.lifecycle import APPROVE, REJECT, SUBMIT, UNREJECT, Transition
from humanlike.server.participants import actions
from humanlike.server.participants.actions import ActionError, PlatformError

if TYPE_CHECKING:
    from humanlike.server.study.spec import ExperimentSpec, MTurkQualification
    from humanlike.server.tables.core import Experiment, Participant, Payment

REGION = "us-east-1"
ENDPOINTS = {True: "https://mturk-requester-sandbox.us-east-1.amazonaws.com",
             False: "https://mturk-requester.us-east-1.amazonaws.com"}
EXTERNAL_QUESTION_SCHEMA = ("http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/"
                            "2006-07-14/ExternalQuestion.xsd")
SYSTEM_QUALIFICATIONS = {"approval_rate": "000000000000000000L0",
                         "number_approved": "00000000000000000040",
                         "locale": "00000000000000000071"}
"""MTurk's system qualification type ids (the same in sandbox and live)."""
MASTERS = {True: "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6", False: "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH"}
"""The Masters qualification type id: sandbox (True) and live (False) differ."""
STATUS_TRANSITIONS: dict[str, Transition | None] = {
    "Submitted": SUBMIT, "Approved": APPROVE, "Rejected": REJECT}
"""An assignment's status -> the participant transition ``sync`` applies."""
MAX_FEEDBACK = 1024


class MTurkError(PlatformError):
    """MTurk refused or failed a call (its error code and message), or botocore refused the
    parameters before sending (naming the parameter)."""


ENDPOINT_VARIABLE = "HUMANLIKE_MTURK_ENDPOINT"
CLOSED_NOTICE = (
    "Amazon Mechanical Turk closed permanently on 2026-09-30 (AWS: \"Amazon Mechanical Turk will "
    "permanently close on September 30, 2026\"); its requester API no longer answers, so nothing "
    f"was sent. To call an archive or an MTurk-compatible service, set {ENDPOINT_VARIABLE}="
    "https://... . Recruit on Prolific, SONA, a panel or in the lab instead "
    "(docs/participant-sources.md); old MTurk data and the psiTurk protocol: docs/mturk-legacy.md.")


class MTurkClosed(MTurkError):
    """A requester-API call with no explicit endpoint: MTurk has closed."""


def requester_endpoint() -> str:
    """The explicitly configured requester endpoint (``HUMANLIKE_MTURK_ENDPOINT``, https://), or
    ``MTurkClosed`` with the closure notice."""
    endpoint = os.environ.get(ENDPOINT_VARIABLE, "").strip()
    if not endpoint:
        raise MTurkClosed(CLOSED_NOTICE)
    parts = urlsplit(endpoint)
    if parts.scheme != "https" or not parts.hostname:
        raise MTurkClosed(f"{ENDPOINT_VARIABLE} must be an https:// URL, not {endpoint!r}")
    return endpoint


def task_url(public_url: str, slug: str) -> str:
    """``<public_url>/start/<slug>``, refused unless it is an absolute https:// URL."""
    url = f"{public_url.rstrip('/')}/start/{slug}"
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ActionError(f"MTurk shows the task in an HTTPS frame: the study URL must be https://, "
                          f"not {url!r}", "recruitment.public_url")
    return url


def external_question(url: str, frame_height: int = 0) -> str:
    """The ExternalQuestion XML for ``url`` (frame height 0: MTurk sizes the frame to the window)."""
    return (f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_SCHEMA}">'
            f"<ExternalURL>{escape(url)}</ExternalURL>"
            f"<FrameHeight>{int(frame_height)}</FrameHeight></ExternalQuestion>")


def qualification(q: MTurkQualification, sandbox: bool) -> dict[str, Any]:
    """One QualificationRequirement from the spec (system ones by name, custom ones by id)."""
    if q.qualification == "masters":
        return {"QualificationTypeId": MASTERS[sandbox], "Comparator": "Exists",
                "ActionsGuarded": q.actions_guarded}
    out: dict[str, Any] = {
        "QualificationTypeId": SYSTEM_QUALIFICATIONS.get(q.qualification, q.qualification),
        "Comparator": q.comparator, "ActionsGuarded": q.actions_guarded}
    if q.qualification == "locale":
        out["LocaleValues"] = [dict(zip(("Country", "Subdivision"), loc.split("-", 1)))
                               for loc in q.locales]
    elif q.values:
        out["IntegerValues"] = list(q.values)
    return out


def hit_params(spec: ExperimentSpec, public_url: str | None = None) -> dict[str, Any]:
    """CreateHIT's parameters from the spec's ``[recruitment.mturk]`` table."""
    recruitment = spec.recruitment
    table = recruitment.mturk if recruitment is not None else None
    if table is None:
        raise ActionError(f"{spec.slug}: the spec has no [recruitment.mturk] table",
                          "recruitment.mturk")
    base = public_url or (recruitment.public_url if recruitment else None)
    if not base:
        raise ActionError("recruitment.public_url (the server's https:// address) is not set",
                          "recruitment.public_url")
    params: dict[str, Any] = {
        "Title": table.title, "Description": table.description,
        "Reward": table.reward, "MaxAssignments": table.assignments,
        "AssignmentDurationInSeconds": table.duration_minutes * 60,
        "LifetimeInSeconds": table.lifetime_hours * 3600,
        "AutoApprovalDelayInSeconds": table.auto_approve_hours * 3600,
        "Question": external_question(task_url(base, spec.slug), table.frame_height),
        "RequesterAnnotation": spec.slug,
        "QualificationRequirements": [qualification(q, table.sandbox)
                                      for q in table.qualifications],
    }
    if table.keywords:
        params["Keywords"] = ", ".join(table.keywords)
    return params


def _snake(operation: str) -> str:
    out = []
    for i, ch in enumerate(operation):
        if ch.isupper() and i and (not operation[i - 1].isupper()
                                   or (i + 1 < len(operation) and operation[i + 1].islower())):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


class MTurkClient:
    """The MTurk requester operations humanlike uses (``dry_run``: print, send nothing)."""

    def __init__(self, sandbox: bool = True, *, client: Any = None, dry_run: bool = False,
                 echo: Callable[[str], None] = print):
        self.sandbox, self.dry_run, self.echo = sandbox, dry_run, echo
        # a client handed in (tests, an archive's stub) or a dry run (sends nothing) needs no endpoint
        self.endpoint = ENDPOINTS[sandbox] if client is not None or dry_run else requester_endpoint()
        self.client = client or boto3.client(
            "mturk", region_name=REGION, endpoint_url=self.endpoint,
            config=Config(retries={"max_attempts": 5, "mode": "standard"}))

    def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """One operation, its parameters validated against the service model first."""
        shape = self.client.meta.service_model.operation_model(operation).input_shape
        try:
            validate_parameters(params, shape)
        except ParamValidationError as exc:
            raise MTurkError(f"{operation}: {exc}") from exc
        if self.dry_run:
            self.echo(f"{operation} {self.endpoint}\n"
                      + json.dumps(params, indent=2, default=str))
            return {}
        try:
            reply = getattr(self.client, _snake(operation))(**params)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise MTurkError(f"{operation}: {err.get('Code')}: {err.get('Message')}",
                             {"error": err}) from exc
        except BotoCoreError as exc:
            raise MTurkError(f"{operation}: {exc}") from exc
        return {k: v for k, v in reply.items() if k != "ResponseMetadata"}

    def create_hit(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.call("CreateHIT", **params).get("HIT", {"HITId": "<dry-run>"})

    def get_hit(self, hit_id: str) -> dict[str, Any]:
        return self.call("GetHIT", HITId=hit_id).get("HIT", {})

    def assignments(self, hit_id: str, page_size: int = 100) -> Iterator[dict[str, Any]]:
        """Every submitted, approved or rejected assignment of the HIT (NextToken paging)."""
        token: str | None = None
        while True:
            params: dict[str, Any] = {"HITId": hit_id, "MaxResults": page_size,
                                      "AssignmentStatuses": ["Submitted", "Approved", "Rejected"]}
            if token:
                params["NextToken"] = token
            page = self.call("ListAssignmentsForHIT", **params)
            yield from page.get("Assignments", [])
            token = page.get("NextToken")
            if not token or not page.get("Assignments"):
                return

    def approve(self, assignment_id: str, feedback: str | None = None,
                override_rejection: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"AssignmentId": assignment_id}
        if feedback:
            params["RequesterFeedback"] = feedback[:MAX_FEEDBACK]
        if override_rejection:
            params["OverrideRejection"] = True
        return self.call("ApproveAssignment", **params)

    def reject(self, assignment_id: str, feedback: str) -> dict[str, Any]:
        """Reject with the feedback the worker sees (required; refused locally when empty)."""
        if not (feedback or "").strip():
            raise ActionError("MTurk needs feedback for a rejection: say what was wrong",
                              "message")
        if len(feedback) > MAX_FEEDBACK:
            raise ActionError(f"MTurk feedback is at most {MAX_FEEDBACK} characters", "message")
        return self.call("RejectAssignment", AssignmentId=assignment_id,
                         RequesterFeedback=feedback.strip())

    def send_bonus(self, worker_id: str, assignment_id: str, amount: Decimal, reason: str,
                   token: str) -> dict[str, Any]:
        """Pay a bonus once: MTurk refuses a second request with the same UniqueRequestToken."""
        return self.call("SendBonus", WorkerId=worker_id, AssignmentId=assignment_id,
                         BonusAmount=str(Decimal(str(amount)).quantize(Decimal("0.01"))),
                         Reason=reason, UniqueRequestToken=token[:64])

    def expire(self, hit_id: str) -> dict[str, Any]:
        """End the HIT now (an expiry in the past)."""
        return self.call("UpdateExpirationForHIT", HITId=hit_id,
                         ExpireAt=dt.datetime(2015, 1, 1, tzinfo=dt.UTC))

    def extend(self, hit_id: str, hours: int | None = None, assignments: int | None = None,
               token: str | None = None) -> dict[str, Any]:
        """Push the expiry ``hours`` from now and/or add ``assignments`` (idempotent on ``token``)."""
        out: dict[str, Any] = {}
        if hours:
            out["expiration"] = self.call(
                "UpdateExpirationForHIT", HITId=hit_id,
                ExpireAt=dt.datetime.now(dt.UTC) + dt.timedelta(hours=hours))
        if assignments:
            params: dict[str, Any] = {"HITId": hit_id, "NumberOfAdditionalAssignments": assignments}
            if token:
                params["UniqueRequestToken"] = token[:64]
            out["assignments"] = self.call("CreateAdditionalAssignmentsForHIT", **params)
        return out

    def notify(self, worker_ids: list[str], subject: str, text: str) -> list[dict[str, Any]]:
        """Message workers (MTurk takes at most 100 ids per call)."""
        return [self.call("NotifyWorkers", Subject=subject, MessageText=text,
                          WorkerIds=worker_ids[i:i + 100])
                for i in range(0, len(worker_ids), 100)]


def _assignment(participant: Participant) -> str:
    if not participant.assignment_id:
        raise PlatformError(f"participant {participant.public_id} has no MTurk assignmentId")
    return participant.assignment_id


class MTurkRecruiter:
    """``server.actions``' Recruiter for MTurk experiments."""

    def __init__(self, client: MTurkClient, experiment: Experiment):
        self.client, self.experiment = client, experiment

    def approve(self, participant: Participant) -> dict[str, Any]:
        return self.client.approve(_assignment(participant))

    def reject(self, participant: Participant, message: str,
               category: str | None) -> dict[str, Any]:
        return self.client.reject(_assignment(participant), message)

    def unreject(self, participant: Participant) -> dict[str, Any]:
        return self.client.approve(_assignment(participant), override_rejection=True)

    def pay_bonus(self, participant: Participant, payment: Payment,
                  save: Callable[[], None]) -> dict[str, Any]:
        """One step, made idempotent by MTurk on the payment's key: a retry after a call that did
        pay is answered with an error naming the token, taken as "already paid"."""
        try:
            return self.client.send_bonus(participant.platform_id, _assignment(participant),
                                          Decimal(str(payment.amount)), payment.reason,
                                          payment.idempotency_key)
        except MTurkError as exc:
            if "UniqueRequestToken" in str(exc) or payment.idempotency_key in str(exc):
                return {"already_paid": True, "reply": exc.reply}
            raise


def unreject(participant: Participant, actor: str) -> actions.ActionResult:
    """Approve a rejected assignment (``OverrideRejection``): state checked, platform told, audited,
    through the same path as ``server.actions``' approve."""
    return actions._transition(participant, actor, UNREJECT,
                               lambda r: r.unreject(participant),  # type: ignore[attr-defined]
                               {"override_rejection": True})
