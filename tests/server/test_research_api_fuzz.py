"""schemathesis against the researcher API's own OpenAPI document (issue 40): schema-valid and
schema-invalid requests from an owner's full token, with a completed participant in the study,
never get a server error, and every answer matches the document's declared statuses and
schemas. SQLite: the API's input handling is under test, not the backend."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from humanlike.server.research_api.openapi import openapi_document
from tests.server.admin.dashboard_helpers import run_participant
from tests.server.test_research_api import person

schema = schemathesis.openapi.from_dict(openapi_document())
schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE,
                                       schemathesis.GenerationMode.NEGATIVE])


@pytest.fixture
def owner_token(app):
    run_participant(app.test_client(), "PROLIFIC_PID=fuzz1&STUDY_ID=s&SESSION_ID=x")
    return person(app, "olga", "owner", None, scopes=("view", "act", "spend", "reveal", "delete"))


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@schema.parametrize()
@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_never_get_a_server_error(case, app, owner_token):
    if "slug" in (case.path_parameters or {}):
        case.path_parameters["slug"] = "small"
    headers = {"Authorization": f"Bearer {owner_token}"}
    response = case.call(app=app, headers=headers)
    case.validate_response(response, checks=[not_a_server_error, status_code_conformance,
                                              response_schema_conformance])
