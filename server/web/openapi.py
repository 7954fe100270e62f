"""The participant API as an OpenAPI 3.1 document: request bodies are the pydantic models of
``payloads`` (their JSON Schema), responses the shapes ``api`` answers with."""

from __future__ import annotations

import copy
import functools
from typing import Any

from pydantic.json_schema import models_json_schema

from humanlike.server.participants.display import DisplayIn
from humanlike.server.participants.payloads import CompleteIn, ConsentIn, EventIn, TrialIn
from humanlike.server.trial_types.registry import TRIAL_TYPES

_REF = "#/components/schemas/{model}"

_RESPONSE_SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object", "required": ["error", "detail"],
        "properties": {"error": {"type": "string"}, "detail": {}},
    },
    "TrialAck": {
        "type": "object", "required": ["trial_index"],
        "properties": {"trial_index": {"type": "integer", "minimum": 0}},
    },
    "Status": {"type": "object", "required": ["status"], "properties": {
        "status": {"type": "string"},
        "next": {"type": ["object", "null"],
                 "description": "a declared exit (a refusal of consent): the platform page with "
                                "its code"}}},
    "Stored": {"type": "object", "required": ["stored"], "properties": {
        "stored": {"type": "boolean"},
        "next": {"type": ["object", "null"],
                 "description": "a declared exit (a display refused): the platform page with its "
                                "code"}}},
    "Completion": {
        "type": "object", "required": ["status", "next"],
        "properties": {"status": {"type": "string"}, "next": {"type": "object"}},
    },
    "Timeline": {
        "type": "object",
        "required": ["participant", "status", "trials", "acknowledged", "next_index", "n_trials"],
        "properties": {
            "participant": {"type": "string"}, "status": {"type": "string"},
            "condition": {"type": ["string", "null"]},
            "trials": {"type": "array", "items": {"type": "object"}},
            "acknowledged": {"type": "array", "items": {"type": "integer"}},
            "next_index": {"type": "integer"}, "n_trials": {"type": "integer"},
        },
    },
}


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=schema)}}}


def _errors(*codes: int) -> dict[str, Any]:
    described = {
        400: "malformed JSON or a body the JSON policy refuses (NUL, NaN/Infinity, lone surrogate, "
             "nesting deeper than 32)",
        401: "no 'Authorization: Bearer <token>' header",
        403: "the token does not open this participant (unknown and foreign ids alike)",
        409: "the participant's state does not allow this, or a different trial holds this index",
        410: "the participant's experiment is not served here",
        411: "a chunked body the server cannot read",
        413: "body over the size limit",
        422: "a body that does not match its schema, or breaks a rule of the operation's "
             "x-refusals",
    }
    return {str(code): {"description": described[code], "content": _json("Error")} for code in codes}


JSON_POLICY: dict[str, tuple[int, str]] = {
    "nul_character": (400, "no string or key anywhere in the body may contain NUL (U+0000)"),
    "lone_surrogate": (400, "no string or key may hold a lone UTF-16 surrogate"),
    "non_finite_number": (400, "numbers must be finite (NaN, Infinity and overflowing numbers "
                               "such as 1e400 are refused)"),
    "too_deep": (400, "JSON nested deeper than 32 levels is refused"),
}
"""The JSON policy every body passes before its schema (``payloads``)."""
STRICT_INTEGER = "Input should be a valid integer"
"""pydantic's strict-mode problem for an integer written as a float (0.0): JSON Schema counts 0.0 as
an integer, the server wants 0."""
REFUSALS: dict[str, dict[str, tuple[int, str]]] = {
    "trials": {
        "trial_index_out_of_range": (422, "trial_index must be below the participant's n_trials"),
        "wrong_trial_type": (422, "trial_type must be the type of the timeline's trial at "
                                  "trial_index"),
        "invalid_response": (422, "response must be what the trial type records, with the "
                                  "participant's category labels"),
        "invalid_trial": (422, "an integer is written without a fraction (0, not 0.0)"),
    },
    "events": {"event_too_large": (413, "an event's value must stay under 4000 characters"),
               "invalid_event": (422, "an integer is written without a fraction (0, not 0.0)")},
    "display": {"invalid_display": (422, "refresh_hz * frame_ms must be 1000 (within 1%), and a "
                                         "calibration's derived numbers must follow from its "
                                         "answers; an integer is written without a fraction")},
    "consent": {},
    "complete": {"invalid_body": (422, "an integer is written without a fraction (0, not 0.0)")},
}
"""The rules beyond each body's JSON Schema that the server applies (they depend on the
participant's timeline, relate fields to each other, or are the JSON policy, which JSON Schema
cannot say): error code -> (status, rule), published as the operation's ``x-refusals``. A
schema-valid body is accepted or refused for one of these (or 401/403/409 for the token and the
participant's state)."""
STRICT_ONLY = {"invalid_trial", "invalid_event", "invalid_body"}
"""Schema error codes that, for a schema-valid body, can only mean ``STRICT_INTEGER``."""


def _operation(summary: str, ok: dict[str, Any], body: str | None = None,
               errors: tuple[int, ...] = (400, 401, 403, 409, 413, 422),
               body_required: bool = True, refusals: str | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "responses": ok | _errors(*errors)}
    if body is not None:
        operation["requestBody"] = {"required": body_required, "content": _json(body)}
    if refusals is not None:
        operation["x-refusals"] = {
            code: {"status": status, "rule": rule,
                   **({"problems": [STRICT_INTEGER]} if code in STRICT_ONLY else {})}
            for code, (status, rule) in (JSON_POLICY | REFUSALS[refusals]).items()}
    return operation


@functools.cache
def _document() -> dict[str, Any]:
    _, defs = models_json_schema(
        [(TrialIn, "validation"), (EventIn, "validation"), (ConsentIn, "validation"),
         (CompleteIn, "validation"), (DisplayIn, "validation")],
        ref_template=_REF,
    )
    schemas = dict(defs.get("$defs", {})) | _RESPONSE_SCHEMAS
    schemas["TrialIn"]["properties"]["trial_type"]["enum"] = sorted(TRIAL_TYPES)  # the registry's names
    pid = {"name": "pid", "in": "path", "required": True, "schema": {"type": "string"},
           "description": "the participant's public id"}
    base = "/api/v1/participants/{pid}"
    return {
        "openapi": "3.1.0",
        "info": {"title": "humanlike participant API", "version": "1"},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            f"{base}/timeline": {"parameters": [pid], "get": _operation(
                "the participant's timeline and which trials are stored",
                {"200": {"description": "the timeline", "content": _json("Timeline"),
                         "headers": {"Cache-Control": {
                             "description": "the answer is the participant's alone: never stored "
                                            "by a cache", "required": True,
                             "schema": {"type": "string", "pattern": "no-store"}}}}},
                errors=(401, 403, 410))},
            f"{base}/consent": {"parameters": [pid], "post": _operation(
                "record consent or its refusal",
                {"200": {"description": "the new status", "content": _json("Status")}}, "ConsentIn",
                refusals="consent")},
            f"{base}/trials": {"parameters": [pid], "post": _operation(
                "store one finished trial (idempotent on trial_index)",
                {"201": {"description": "stored", "content": _json("TrialAck")},
                 "200": {"description": "the same trial was already stored", "content": _json("TrialAck")}},
                "TrialIn", refusals="trials")},
            f"{base}/events": {"parameters": [pid], "post": _operation(
                "log a browser event",
                {"201": {"description": "stored", "content": _json("Stored")}}, "EventIn",
                refusals="events")},
            f"{base}/display": {"parameters": [pid], "post": _operation(
                "store the display measured before the first trial (refresh rate, calibration)",
                {"201": {"description": "stored", "content": _json("Stored")}}, "DisplayIn",
                refusals="display")},
            f"{base}/complete": {"parameters": [pid], "post": _operation(
                "mark the participant completed once every trial is stored",
                {"200": {"description": "where to go next", "content": _json("Completion")}},
                "CompleteIn", body_required=False, refusals="complete")},
        },
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the participant API under ``/api/v1`` (a fresh copy)."""
    return copy.deepcopy(_document())
