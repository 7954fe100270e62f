"""The researcher API as an OpenAPI 3.1 document: bodies and answers are the pydantic models the
handlers use (``models``: their JSON Schema), as ``server/web/openapi.py`` does for the
participant API."""

from __future__ import annotations

import functools
from typing import Any

from pydantic.json_schema import models_json_schema

from humanlike.server.lifecycle import ParticipantStatus
from humanlike.server.research_api import models

_REF = "#/components/schemas/{model}"
PREFIX = "/api/research/v1"
ERRORS = {
    400: "malformed JSON, or no Idempotency-Key on an action",
    401: "no live token: missing, unknown, revoked or expired",
    403: "the token's scopes or its login's membership lack the permission (nothing changed)",
    404: "no such experiment or participant, or a study the login is not a member of",
    409: "the participant's state does not allow the action, or the first request with this "
         "Idempotency-Key is still working",
    422: "a body or query that does not match its schema, or an Idempotency-Key used for "
         "another request",
    429: "over the token's rate limit (Retry-After)",
}


def _json(model: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=model)}}}


def _op(summary: str, answer: str | None, scope: str | None, *codes: int, body: str | None = None,
        array: bool = False, idempotent: bool = False) -> dict[str, Any]:
    content = ({"application/json": {"schema": {"type": "array", "items": {
        "$ref": _REF.format(model=answer)}}}} if array else _json(answer)) if answer else {
        "application/zip": {"schema": {"type": "string", "contentMediaType": "application/zip"}}}
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": {"description": "done", "content": content}}
        | {str(c): {"description": ERRORS[c], "content": _json("ErrorOut")}
           for c in sorted({401, 429, *codes})},
    }
    if scope:
        op["x-scope"] = scope
        op["description"] = f"Needs the '{scope}' scope and permission in the study."
    if body:
        op["requestBody"] = {"required": True, "content": _json(body)}
    if idempotent:
        op["parameters"] = [{"name": "Idempotency-Key", "in": "header", "required": True,
                             "schema": {"type": "string", "minLength": 1, "maxLength": 128},
                             "description": "a repeat with the same key is answered without "
                                            "acting again"}]
        op["responses"]["502"] = {"description": "the platform refused or did not answer "
                                                 "(the result says which; ok is false)",
                                  "content": _json("ActionOut")}
    return op


def _param(name: str, where: str = "path", **schema: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path",
            "schema": schema or {"type": "string"}}


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The document (built once per process)."""
    _, defs = models_json_schema(
        [(m, "validation") for m in models.BODIES] + [(m, "serialization") for m in models.ANSWERS],
        ref_template=_REF)
    slug = _param("slug")
    pid = _param("public_id")
    exp = f"{PREFIX}/experiments/{{slug}}"
    one = f"{exp}/participants/{{public_id}}"
    listing = _op("a page of participants with their QC", "ParticipantPage", "view", 404, 422)
    listing["parameters"] = [
        _param("status", "query", type="string", enum=[s.value for s in ParticipantStatus]),
        _param("qc", "query", type="string", enum=["failed", "passed"]),
        _param("excluded", "query", type="string", enum=["yes", "no"]),
        _param("page", "query", type="integer", minimum=1),
        _param("per_page", "query", type="integer", minimum=1, maximum=1000)]
    export = _op("the export as a streamed zip", None, "view", 403, 404)
    export["parameters"] = [_param("pseudonymise", "query", type="string", enum=["1"])]
    export["description"] = ("Needs 'view'; without pseudonymise=1 (platform ids in the files) "
                             "also 'reveal'.")
    actions = {
        "approve": ("approve a completed participant", None, "act"),
        "reject": ("reject a submission", "RejectIn", "act"),
        "exclude": ("exclude from analysis", "ExcludeIn", "act"),
        "bonus": ("pay a bonus (once per reason and per Idempotency-Key)", "BonusIn", "spend"),
    }
    paths: dict[str, Any] = {
        f"{PREFIX}/experiments": {"get": _op("the experiments the token's login may see",
                                             "ExperimentOut", None, array=True)},
        exp: {"parameters": [slug], "get": _op("one experiment", "ExperimentOut", "view", 404)},
        f"{exp}/status": {"parameters": [slug], "post": _op(
            "switch to draft, live or closed", "ExperimentOut", "act", 400, 403, 404, 422,
            body="StatusIn")},
        f"{exp}/participants": {"parameters": [slug], "get": listing},
        f"{exp}/export.zip": {"parameters": [slug], "post": export},
        f"{exp}/panel": {"parameters": [slug], "get": _op("the live panel's stored result",
                                                          "PanelOut", "view", 404)},
    }
    for name, (summary, body, scope) in actions.items():
        paths[f"{one}/{name}"] = {"parameters": [slug, pid], "post": _op(
            summary, "ActionOut", scope, 400, 403, 404, 409, 422, body=body, idempotent=True)}
    return {
        "openapi": "3.1.0",
        "info": {"title": "humanlike researcher API", "version": "1",
                 "description": "Personal tokens (docs/lab.md); scopes cap the login's "
                                "permissions in each study."},
        "components": {"schemas": dict(defs.get("$defs", {})),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    }
