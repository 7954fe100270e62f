"""The participant API's OpenAPI document, and a schema-driven fuzz (schemathesis, in-process over
WSGI) with a fresh participant's token: no request may end in a server error (5xx), and the
document matches what the server accepts both ways: a body the schema refuses is refused (4xx), and
a body it allows is accepted, or refused only for the token, the participant's state (409) or a
rule the operation's ``x-refusals`` publishes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
)
from schemathesis.config import SchemathesisConfig

from humanlike.server.web.openapi import openapi_document
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
CONFIG = Path(__file__).resolve().parents[2] / "schemathesis.toml"
"""The repository's schemathesis configuration (``st run`` reads it from the root): which statuses
refuse schema-valid data for each operation (its published ``x-refusals``)."""
schema = schemathesis.openapi.from_dict(openapi_document(),
                                        config=SchemathesisConfig.from_path(str(CONFIG)))
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
    case.validate_response(response, checks=[not_a_server_error, negative_data_rejection,
                                              positive_data_acceptance,
                                              response_headers_conformance])
    documented_acceptance(None, response, case)


def test_the_published_refusals_are_the_servers(app, client):
    """Each ``x-refusals`` code is one the server answers with at the published status: api.py's
    ``api_abort`` calls, and the JSON policy's codes (payloads.py), which api.py answers with 400."""
    import re
    from pathlib import Path

    server = Path(__file__).resolve().parents[2] / "server"
    raised = {(code, int(status)) for status, code in re.findall(
        r'api_abort\((\d{3}), "([a-z_]+)"', (server / "web" / "api.py").read_text())}
    raised |= {(code, 400) for code in re.findall(
        r'JSONPolicyError\("([a-z_]+)"', (server / "participants" / "payloads.py").read_text())}
    doc = client.get("/api/v1/openapi.json").get_json()
    published = {(code, r["status"]) for item in doc["paths"].values() for op in item.values()
                 if isinstance(op, dict) for code, r in op.get("x-refusals", {}).items()}
    assert len(published) >= 8 and published <= raised, published - raised


def test_the_schemathesis_config_allows_exactly_the_published_refusals_of_each_operation():
    """schemathesis' own ST202 check (schema-valid data accepted) knows, per operation, the statuses
    of the rules JSON Schema cannot say (``x-refusals``) besides the token's and the state's."""
    doc = openapi_document()
    tuned = {op["include-path"]: set(op["checks"]["positive_data_acceptance"]["expected-statuses"])
             for op in tomllib.loads(CONFIG.read_text())["operations"]}
    assert set(tuned) <= set(doc["paths"])
    for path, item in doc["paths"].items():
        (op,) = (o for m, o in item.items() if m != "parameters")  # one method a path: filters by
        statuses = {str(r["status"]) for r in op.get("x-refusals", {}).values()}  # path suffice
        if statuses:
            assert tuned[path] == {"2xx", "401", "403", "409"} | statuses, path
        else:
            assert path not in tuned, path
    assert tuned["/api/v1/participants/{pid}/trials"] == {"2xx", "400", "401", "403", "409", "422"}


def test_options_allows_exactly_the_documented_methods(client, participant):
    """schemathesis ST205: an OPTIONS answer's Allow lists the path's documented methods (and
    HEAD, OPTIONS), not those of the catch-all that answers unknown URLs."""
    pid, _ = participant
    for path, item in openapi_document()["paths"].items():
        documented = {m.upper() for m in item if m != "parameters"}
        resp = client.open(path.replace("{pid}", pid), method="OPTIONS")
        allow = {m.strip() for m in resp.headers["Allow"].split(",")}
        assert allow - {"HEAD", "OPTIONS"} == documented, (path, resp.headers["Allow"])
    resp = client.open(f"/api/v1/participants/{pid}/nothing", method="OPTIONS")
    assert resp.status_code == 404 and resp.get_json()["error"] == "not_found"


def test_the_timeline_is_never_cached_and_the_document_says_so(client, participant):
    pid, token = participant
    resp = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token))
    assert resp.status_code == 200 and resp.headers["Cache-Control"] == "no-store"
    ok = openapi_document()["paths"]["/api/v1/participants/{pid}/timeline"]["get"]["responses"]["200"]
    header = ok["headers"]["Cache-Control"]
    assert header["required"] is True and re.fullmatch(header["schema"]["pattern"], "no-store")
