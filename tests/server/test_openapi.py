"""The participant API's OpenAPI document, and a schema-driven fuzz (schemathesis, in-process over
WSGI) with a fresh participant's token: no request may end in a server error (5xx)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

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
# does not run under pytest 9 (it sets Function._nodeid)
schema = schemathesis.openapi.from_dict(openapi_document())


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_never_get_a_server_error(case, app, participant):
    pid, token = participant
    case.path_parameters = {"pid": pid}
    response = case.call(app=app, headers=auth(token))
    case.validate_response(response, checks=[not_a_server_error])
