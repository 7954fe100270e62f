"""Fixtures for server tests: a small rating experiment on disk and an app on each database."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from humanlike.server import create_app, database
from humanlike.server.study import experiments

SMALL_SPEC = """\
slug = "small"
title = "Small rating test"
platform = "prolific"
consent = "consent.md"
instructions = "instructions.md"
manifest = "stimuli/manifest.csv"

[presentation]
mode = "until_response"

[completion]
prolific_code = "CODE1234"

{categories}
[[blocks]]
name = "ratings"
trial_type = "rating"
kinds = ["natural"]
practice = 1
catch_trials = 2
repeats = 2

[[conditions]]
name = "A"

[[conditions]]
name = "B"

[[debrief]]
name = "strategy"
text = "How did you decide?"

[exclusion]
min_catch_accuracy = 0.5
"""


def write_small_experiment(dest: Path, per_class: int = 1) -> Path:
    """A 10-category digit rating experiment: 10 natural images, 10 catch prototypes."""
    from humanlike.stimuli.digits import build_digit_stimuli

    stim = dest / "stimuli"
    stim.mkdir(parents=True)
    build_digit_stimuli(stim, per_class=per_class, catch_per_class=1, seed=1).to_csv(
        stim / "manifest.csv", index=False
    )
    cats = "".join(f'[[categories]]\nlabel = "{d}"\nkey = "{d}"\n\n' for d in range(10))
    (dest / "experiment.toml").write_text(SMALL_SPEC.format(categories=cats))
    (dest / "consent.md").write_text("# Consent\n\nYou agree <script>alert(1)</script>.\n")
    (dest / "instructions.md").write_text("# Instructions\n\nRate the digits.\n")
    return dest / "experiment.toml"


@pytest.fixture(scope="session")
def small_experiment(tmp_path_factory) -> Path:
    return write_small_experiment(tmp_path_factory.mktemp("small"))


@pytest.fixture
def app(database_url, small_experiment, tmp_path):
    application = create_app({
        "TESTING": True,
        "SECRET_KEY": "test-secret",
        "SQLALCHEMY_DATABASE_URI": database_url,
        "EXPERIMENT_PATHS": [str(small_experiment)],
    })
    database.upgrade(application)
    experiments.sync_all(application)
    yield application
    database.dispose(application)


@pytest.fixture
def client(app):
    return app.test_client()


def enter(client, query: str = "PROLIFIC_PID=abc123&STUDY_ID=s1&SESSION_ID=x1"):
    """Follow a study link to the task page; return (pid, token)."""
    resp = client.get(f"/start/small?{query}")
    assert resp.status_code == 302, resp.get_data(as_text=True)
    pid = resp.headers["Location"].split("#")[0].rstrip("/").split("/")[-1]
    page = client.get(f"/task/{pid}").get_data(as_text=True)
    token = re.search(r'"token": ?"([^"]+)"', page).group(1)
    return pid, token


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def built_study(app, study_snapshots):
    """``built_study(name, build)``: ``build(app)``'s result with the database as it left it, built
    once per session and backend (tests/conftest.py StudySnapshots); a test may write to its copy."""
    return lambda name, build: study_snapshots.get(app, name, build)
