"""mypy passes on humanlike.analysis and humanlike.server (STYLE.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_mypy_is_clean_on_analysis_and_server(tmp_path):
    # the repository maps folders onto the humanlike namespace (pyproject package-dir), which mypy
    # cannot follow, so it checks a tree of links laid out the way the wheel installs them
    package = tmp_path / "humanlike"
    package.mkdir()
    (package / "__init__.py").write_text((REPO / "humanlike" / "__init__.py").read_text())
    for folder in ("analysis", "server", "stimuli", "deploy"):
        (package / folder).symlink_to(REPO / folder, target_is_directory=True)
    (package / "cli").symlink_to(REPO / "humanlike" / "cli", target_is_directory=True)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-incremental",
         "-p", "humanlike.analysis", "-p", "humanlike.server", "-p", "humanlike.cli"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
