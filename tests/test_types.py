"""mypy passes on humanlike.analysis, humanlike.server and humanlike.cli (STYLE.md)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _namespace_tree(root: Path) -> None:
    """Links laid out the way the wheel installs the packages, from pyproject's package-dir.

    The repository maps folders onto the `humanlike` namespace (server/ is humanlike.server, and so
    on). mypy resolves modules from paths only: it runs no import hook, so the editable install's
    finder is invisible to it, and neither mypy_path nor explicit package bases can rename a folder.
    """
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    package = root / "humanlike"
    package.mkdir()
    for entry in (REPO / mapping["humanlike"]).iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    for name, folder in mapping.items():
        if name != "humanlike":
            sub = name.removeprefix("humanlike.")
            assert "." not in sub, name  # one folder per direct subpackage
            (package / sub).symlink_to(REPO / folder, target_is_directory=True)


def test_mypy_is_clean_on_analysis_and_server(tmp_path):
    _namespace_tree(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-incremental",
         "-p", "humanlike.analysis", "-p", "humanlike.server", "-p", "humanlike.cli"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
