"""Helpers for the dashboard tests: an admin login with CSRF, a participant who does the whole task
through the API."""

from __future__ import annotations

import re

from humanlike.server.extensions import db
from humanlike.server.tables.core import AdminUser
from tests.server.conftest import auth, enter

LABELS = [str(d) for d in range(10)]
CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"')


def csrf_from(html: str) -> str:
    match = CSRF.search(html)
    assert match, "no CSRF token on the page"
    return match.group(1) or match.group(2)


def add_admin(app, name: str = "alice", password: str = "correct horse battery") -> None:
    with app.app_context():
        user = AdminUser(username=name)
        user.set_password(password)
        db.session.add(user)
        db.session.commit()


def login(app, client, name: str = "alice", password: str = "correct horse battery") -> None:
    add_admin(app, name, password)
    token = csrf_from(client.get("/admin/login").get_data(as_text=True))
    resp = client.post("/admin/login", data={"username": name, "password": password,
                                             "csrf_token": token})
    assert resp.status_code == 302, resp.get_data(as_text=True)


def rating(index: int, level: float = 0.75, rt: float = 1234.5, label: str = "3") -> dict:
    return {"trial_index": index, "trial_type": "rating",
            "response": {"ratings": {lab: 0.0 for lab in LABELS} | {label: level}},
            "rt_ms": rt, "first_rt_ms": 400.0, "presented_ms": 1230.0, "frames": 74,
            "client_time": 1.7e12}


def run_participant(client, query: str, answer: str = "looked closely", n: int | None = None,
                    complete: bool = True, user_agent: str | None = None,
                    careful: bool = False) -> str:
    """Enter, consent and post ``n`` trials (all by default, the debrief with ``answer``). A
    ``careful`` participant rates the digit shown (passes the catch trials); a careless one rates
    the next digit (fails them)."""
    if user_agent is not None:
        client.environ_base["HTTP_USER_AGENT"] = user_agent
    pid, token = enter(client, query)
    client.post(f"/api/v1/participants/{pid}/consent", json={"agree": True}, headers=auth(token))
    tl = client.get(f"/api/v1/participants/{pid}/timeline", headers=auth(token)).get_json()
    url = f"/api/v1/participants/{pid}/trials"
    for t in tl["trials"][:n]:
        if t["type"] == "rating":
            digit = re.search(r"digit(\d)", t["stimulus"]).group(1)
            wrong = str((int(digit) + 1) % 10)
            body = rating(t["index"], 1.0, label=digit) if careful else rating(t["index"],
                                                                                label=wrong)
        else:
            body = {"trial_index": t["index"], "trial_type": "debrief",
                    "response": {"answers": {"strategy": answer}}}
        assert client.post(url, json=body, headers=auth(token)).status_code == 201
    if complete and n is None:
        assert client.post(f"/api/v1/participants/{pid}/complete",
                           headers=auth(token)).status_code == 200
    client.environ_base.pop("HTTP_USER_AGENT", None)
    return pid
