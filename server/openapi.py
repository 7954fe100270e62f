"""The participant API as an OpenAPI 3.1 document: request bodies are the pydantic models of
``payloads`` (their JSON Schema), responses the shapes ``api`` answers with."""

from __future__ import annotations

import copy
import functools
from typing import Any

from pydantic.json_schema import models_json_schema

from humanlike.server.display import DisplayIn
from humanlike.server.payloads import CompleteIn, ConsentIn, EventIn, TrialIn
from humanlike.server.trial_types import TRIAL_TYPES

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
    "Status": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
    "Stored": {"type": "object", "required": ["stored"], "properties": {"stored": {"type": "boolean"}}},
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
        422: "a body that does not match its schema",
    }
    return {str(code): {"description": described[code], "content": _json("Error")} for code in codes}


def _operation(summary: str, ok: dict[str, Any], body: str | None = None,
               errors: tuple[int, ...] = (400, 401, 403, 409, 413, 422),
               body_required: bool = True) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "responses": ok | _errors(*errors)}
    if body is not None:
        operation["requestBody"] = {"required": body_required, "content": _json(body)}
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
                {"200": {"description": "the timeline", "content": _json("Timeline")}},
                errors=(401, 403, 410))},
            f"{base}/consent": {"parameters": [pid], "post": _operation(
                "record consent or its refusal",
                {"200": {"description": "the new status", "content": _json("Status")}}, "ConsentIn")},
            f"{base}/trials": {"parameters": [pid], "post": _operation(
                "store one finished trial (idempotent on trial_index)",
                {"201": {"description": "stored", "content": _json("TrialAck")},
                 "200": {"description": "the same trial was already stored", "content": _json("TrialAck")}},
                "TrialIn")},
            f"{base}/events": {"parameters": [pid], "post": _operation(
                "log a browser event",
                {"201": {"description": "stored", "content": _json("Stored")}}, "EventIn")},
            f"{base}/display": {"parameters": [pid], "post": _operation(
                "store the display measured before the first trial (refresh rate, calibration)",
                {"201": {"description": "stored", "content": _json("Stored")}}, "DisplayIn")},
            f"{base}/complete": {"parameters": [pid], "post": _operation(
                "mark the participant completed once every trial is stored",
                {"200": {"description": "where to go next", "content": _json("Completion")}},
                "CompleteIn", body_required=False)},
        },
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the participant API under ``/api/v1`` (a fresh copy)."""
    return copy.deepcopy(_document())
