"""psiTurk 3.3.1's own example project (the Stroop task inside its wheel, fetched by
`make psiturk-example`, never committed), set up as `psiturk setup-example` does, and an app serving it."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from humanlike.server import create_app, database

REPO = Path(__file__).resolve().parents[3]
WHEEL = REPO / "build" / "psiturk" / "PsiTurk-3.3.1-py3-none-any.whl"


@pytest.fixture(scope="session")
def psiturk_wheel(tmp_path_factory) -> Path:
    """The unpacked psiTurk 3.3.1 wheel."""
    if not WHEEL.is_file():
        pytest.fail(f"{WHEEL} is missing: run `make psiturk-example` (make test does)")
    dest = tmp_path_factory.mktemp("psiturk-wheel")
    with zipfile.ZipFile(WHEEL) as wheel:
        wheel.extractall(dest)
    return dest / "psiturk"


def setup_example(wheel: Path, dest: Path) -> Path:
    """psiTurk's `psiturk setup-example`: copy example/, the two .sample files renamed."""
    shutil.copytree(wheel / "example", dest)
    (dest / "config.txt.sample").rename(dest / "config.txt")
    (dest / "custom.py.sample").rename(dest / "custom.py")
    return dest


@pytest.fixture
def stroop_project(psiturk_wheel, tmp_path) -> Path:
    return setup_example(psiturk_wheel, tmp_path / "psiturk-example")


def make_app(database_url: str, project: Path, **extra):
    app = create_app({"TESTING": True, "SECRET_KEY": "psiturk-test",
                      "SQLALCHEMY_DATABASE_URI": database_url, "PSITURK_PROJECT": str(project),
                      **extra})
    database.upgrade(app)
    return app


@pytest.fixture
def psiturk_app(database_url, stroop_project):
    app = make_app(database_url, stroop_project)
    yield app
    database.dispose(app)


@pytest.fixture
def client(psiturk_app):
    return psiturk_app.test_client()
