"""Protocol holes closed for issue 25: NUL and other undecodable bytes in the URL path are a 404 on
both backends (nothing written, no 500), and every 405 answer carries ``Allow``."""

from __future__ import annotations

import pytest

from tests.server.conftest import auth, enter

PATHS = ["/api/v1/participants/{bad}/timeline", "/api/v1/participants/{bad}/trials",
         "/run/{bad}", "/task/{bad}", "/done/{bad}", "/stimuli/small/{bad}.png",
         "/stimuli/{bad}/x.png", "/start/{bad}", "/api/v1/participants/{pid}{bad}/timeline"]
BAD = ["%00", "a%00b", "%ff", "%c3%28", "%ed%a0%80", "%f4%90%80%80"]


@pytest.mark.parametrize("bad", BAD)
def test_undecodable_or_nul_path_bytes_are_a_404(client, bad):
    pid, token = enter(client)
    for template in PATHS:
        path = template.format(bad=bad, pid=pid)
        for method in ("GET", "POST"):
            answer = client.open(path, method=method, headers=auth(token), json={})
            assert answer.status_code in (404, 405), (method, path, answer.status_code,
                                                      answer.get_data(as_text=True)[:200])
            if answer.status_code == 405:
                assert answer.headers.get("Allow"), (method, path)
    # the participant is untouched and the server still answers
    assert client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).status_code == 200


def test_every_405_carries_allow(client):
    pid, token = enter(client)
    for method, path in [("DELETE", f"/api/v1/participants/{pid}/trials"),
                         ("PUT", f"/api/v1/participants/{pid}/timeline"),
                         ("POST", "/admin/login/x"), ("PATCH", "/admin/login"),
                         ("POST", f"/task/{pid}"), ("DELETE", "/healthz")]:
        answer = client.open(path, method=method, headers=auth(token))
        if answer.status_code == 405:
            allow = {m.strip() for m in answer.headers.get("Allow", "").split(",") if m.strip()}
            assert allow and method not in allow, (method, path, answer.headers)
    answer = client.delete(f"/api/v1/participants/{pid}/trials", headers=auth(token))
    assert answer.status_code == 405 and "POST" in answer.headers["Allow"]
    assert answer.is_json and answer.json["error"] == "method_not_allowed"


def test_raw_path_bytes_from_a_real_http_client_are_a_404(app):
    """The same through a real server and a raw HTTP request line (no client-side decoding)."""
    import http.client

    from tests.e2e.conftest import LiveServer

    live = LiveServer(app)
    try:
        host, port = live.url.removeprefix("http://").split(":")
        for path in ("/run/%00", "/task/a%00b", "/stimuli/small/%ff.png", "/done/%c3%28",
                     "/api/v1/participants/%00/timeline", "/start/small%ed%a0%80"):
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            conn.putrequest("GET", path, skip_accept_encoding=True)
            conn.endheaders()
            answer = conn.getresponse()
            assert answer.status == 404, (path, answer.status, answer.read()[:200])
            conn.close()
    finally:
        live.stop()
