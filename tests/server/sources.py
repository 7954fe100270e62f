"""Helpers for the participant-source tests: a spec with another platform, apps serving it, and a
participant answering through the API."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

from humanlike.server import create_app, database
from humanlike.server.study import experiments
from tests.server.conftest import auth

LABELS = [str(d) for d in range(10)]


def answer(client, pid: str, token: str, upto: int | None = None) -> int:
    """Consent (once) and store the timeline's trials from the first not stored, ``upto`` of them
    (all: None); returns how many the timeline holds."""
    api = f"/api/v1/participants/{pid}"
    client.post(f"{api}/consent", json={"agree": True}, headers=auth(token))
    timeline = client.get(f"{api}/timeline", headers=auth(token)).get_json()
    todo = [t for t in timeline["trials"] if t["index"] not in set(timeline["acknowledged"])]
    for t in todo[:upto]:
        if t["type"] == "debrief":
            body = {"trial_index": t["index"], "trial_type": "debrief",
                    "response": {"answers": {"strategy": "looked"}}}
        else:
            body = {"trial_index": t["index"], "trial_type": "rating",
                    "response": {"ratings": {label: 0.0 for label in LABELS} | {"3": 0.75}},
                    "rt_ms": 1200.0, "first_rt_ms": 400.0, "presented_ms": 1190.0, "frames": 71,
                    "client_time": 1.7e12}
        response = client.post(f"{api}/trials", json=body, headers=auth(token))
        assert response.status_code in (200, 201), response.get_data(as_text=True)
    return len(timeline["trials"])


def spec_with(small_experiment: Path, dest: Path, platform_toml: str) -> Path:
    """The small experiment copied to ``dest`` with its ``platform = "prolific"`` line replaced."""
    shutil.copytree(small_experiment.parent, dest)
    spec = dest / "experiment.toml"
    text = spec.read_text().replace('platform = "prolific"\n', "")
    if platform_toml.startswith("["):  # a table goes last, a plain key before the first table
        spec.write_text(text + "\n" + platform_toml)
    else:
        spec.write_text(platform_toml + text)
    return spec


@contextmanager
def app_factory(database_url, tmp_path, monkeypatch):
    """``make(spec_path)``: an app serving that spec on the test database (disposed at the end)."""
    made = []

    def make(spec_path: Path):
        monkeypatch.setenv("HUMANLIKE_INSTANCE", str(tmp_path / "instance"))
        application = create_app({"TESTING": True, "SECRET_KEY": "test-secret",
                                  "SQLALCHEMY_DATABASE_URI": database_url,
                                  "EXPERIMENT_PATHS": [str(spec_path)]})
        database.upgrade(application)
        experiments.sync_all(application)
        made.append(application)
        return application

    yield make
    for application in made:
        database.dispose(application)
