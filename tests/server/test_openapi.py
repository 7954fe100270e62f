"""The participant API's OpenAPI document, and a schema-driven fuzz (schemathesis, in-process over
WSGI) with a fresh participant's token: no request may end in a server error (5xx), and the
document matches what the server accepts both ways: a body the schema refuses is refused (4xx), and
a body it allows is accepted, or refused only for the token, the participant's state (409) or a
rule the operation's ``x-refusals`` publishes."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, not_a_server_error

from humanlike.server.openapi import openapi_document
from tests.server.conftest import auth, enter


def test_the_openapi_document_is_served_without_a_token_and_names_every_participant_route(app, client):
    resp = client.get("/api/v1/openapi.json")
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    doc = resp.get_json()
    assert doc["openapi"].startswith("3.")
    documented = {(path.removeprefix("/api/v1"), method.upper())
                  for path, item in doc["paths"].items() for method in item if method != "parameters"}
    served = {(rule.rule.removeprefix("/api/v1").replace("<pid>", "{pid}"), method)
              for rule in app.url_map.iter_rules() if rule.endpoint.startswith("api.")
              and rule.endpoint not in ("api.unknown", "api.openapi")
              for method in rule.methods - {"HEAD", "OPTIONS"}}
    assert documented == served
    assert doc == openapi_document()


def test_the_request_bodies_are_the_pydantic_models(client):
    schemas = client.get("/api/v1/openapi.json").get_json()["components"]["schemas"]
    trial = schemas["TrialIn"]
    assert set(trial["required"]) == {"trial_index", "trial_type", "response"}
    assert trial["additionalProperties"] is False
    assert {"rating", "triad"} <= set(trial["properties"]["trial_type"]["enum"])
    assert schemas["ConsentIn"]["properties"]["agree"]["type"] == "boolean"
    assert "environment" in schemas["EventIn"]["properties"]["type"]["enum"]


@pytest.fixture
def participant(client):
    pid, token = enter(client)
    resp = client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    assert resp.status_code == 200
    return pid, token


# the document the app serves (checked above); loaded eagerly, as schemathesis' lazy fixture loader
# does not run under pytest 9 (it sets Function._nodeid); schema-valid and schema-invalid data
schema = schemathesis.openapi.from_dict(openapi_document())
schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE,
                                       schemathesis.GenerationMode.NEGATIVE])


def documented_acceptance(ctx, response, case) -> bool | None:
    """Schema-valid data is accepted (2xx), or refused for the token (401, 403), the participant's
    state (409), or a rule of the operation's published ``x-refusals`` (its code and status)."""
    from schemathesis import GenerationMode

    if case.meta is None or case.meta.generation.mode != GenerationMode.POSITIVE:
        return None
    status = response.status_code
    if status < 300 or status in (401, 403, 409):
        return True
    refusals = case.operation.definition.raw.get("x-refusals", {})
    body = response.json() if "json" in response.headers.get("content-type", [""])[0] else {}
    published = refusals.get((body or {}).get("error"))
    if published is not None and published["status"] == status:
        # a code that is also the schema's own refusal counts only for the published problems
        problems = {d.get("problem") for d in body.get("detail") or [] if isinstance(d, dict)}
        if "problems" not in published or (problems and problems <= set(published["problems"])):
            return True
    raise AssertionError(f"schema-valid {case.method} {case.formatted_path} refused with {status} "
                         f"{response.text[:200]!r}, not a published refusal; body {case.body!r}")


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_never_get_a_server_error(case, app, participant):
    pid, token = participant
    case.path_parameters = {"pid": pid}
    response = case.call(app=app, headers=auth(token))
    case.validate_response(response, checks=[not_a_server_error, negative_data_rejection])
    documented_acceptance(None, response, case)


def test_the_published_refusals_are_the_servers(app, client):
    """Each ``x-refusals`` code is one the server answers with at the published status: api.py's
    ``api_abort`` calls, and the JSON policy's codes (payloads.py), which api.py answers with 400."""
    import re
    from pathlib import Path

    server = Path(__file__).resolve().parents[2] / "server"
    raised = {(code, int(status)) for status, code in re.findall(
        r'api_abort\((\d{3}), "([a-z_]+)"', (server / "api.py").read_text())}
    raised |= {(code, 400) for code in re.findall(
        r'JSONPolicyError\("([a-z_]+)"', (server / "payloads.py").read_text())}
    doc = client.get("/api/v1/openapi.json").get_json()
    published = {(code, r["status"]) for item in doc["paths"].values() for op in item.values()
                 if isinstance(op, dict) for code, r in op.get("x-refusals", {}).items()}
    assert len(published) >= 8 and published <= raised, published - raised
