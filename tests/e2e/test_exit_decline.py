"""The consent refusal in a real browser (issue 41 item 1): with ``[completion.exits.no_consent]``
declared, "I do not agree" takes the participant to Prolific's completion URL with the
no-consent code the server chose (consent.js follows the API's ``next``), not to a page asking
them to return the study by hand."""

from __future__ import annotations

import pytest

from humanlike.server.demo.build import PROLIFIC_CODE, build_demo
from tests.e2e.conftest import serving
from tests.server.test_exits import EXITS

pytestmark = pytest.mark.browser


def test_declining_consent_lands_on_prolific_with_the_no_consent_code(database_url, chromium,
                                                                       tmp_path):
    spec = build_demo(tmp_path / "demo", controversial=False, mlds=False, classification=False)
    spec.write_text(spec.read_text() + EXITS.replace("{completed}", PROLIFIC_CODE))
    with serving(database_url, spec) as server:
        context = chromium.new_context()
        context.route("https://app.prolific.com/**", lambda route: route.fulfill(
            body="<h1>Prolific (test double)</h1>", content_type="text/html"))
        page = context.new_page()
        page.set_default_timeout(30000)
        page.goto(f"{server.url}/start/demo?PROLIFIC_PID=p1&STUDY_ID=s1&SESSION_ID=x1")
        page.click("#consent-decline")
        page.wait_for_url("https://app.prolific.com/**")
        assert page.url == "https://app.prolific.com/submissions/complete?cc=NOCONSNT"
        context.close()
