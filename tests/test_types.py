"""mypy passes on humanlike.analysis, humanlike.server and humanlike.cli (STYLE.md), run on the
checkout as it is: humanlike/ holds the package's directory links, so no link tree is needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_mypy_is_clean_on_analysis_and_server():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--no-incremental",
         "-p", "humanlike.analysis", "-p", "humanlike.server", "-p", "humanlike.cli"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_pyright_resolves_every_import_of_the_package():
    """pyright (the engine behind VS Code, from npm) on the checkout with pyrightconfig.json: type
    checking off, so the only errors it reports are imports it cannot resolve."""
    pyright = REPO / "node_modules" / ".bin" / "pyright"
    result = subprocess.run([str(pyright), "--outputjson"], cwd=REPO, capture_output=True,
                            text=True, check=False)
    report = json.loads(result.stdout)
    unresolved = [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
                  for d in report["generalDiagnostics"]]
    assert report["summary"]["filesAnalyzed"] > 200, report["summary"]
    assert not unresolved, "\n".join(unresolved[:50])
