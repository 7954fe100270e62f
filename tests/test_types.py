"""mypy passes on humanlike.analysis, humanlike.server and humanlike.cli (STYLE.md), run on the
checkout as it is: humanlike/ holds the package's directory links, so no link tree is needed."""

from __future__ import annotations

import ast
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


def test_pyright_resolves_every_import_of_the_package(tmp_path):
    """pyright (the engine behind VS Code, from npm) resolves every ``humanlike.*`` import statement
    of the package (collected from every module, ``TYPE_CHECKING`` blocks included, one line each
    in one file) against the checkout as it is: the module and each imported name. One file rather
    than the 277 modules (the repository's pyrightconfig.json, for editors) keeps it to seconds;
    type checking is off, so any error is an import that does not resolve."""
    statements: set[str] = set()
    for folder in ("server", "analysis", "stimuli", "deploy", "migrations", "humanlike/cli"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (
                        node.module or "").startswith("humanlike"):
                    statements.update(f"from {node.module} import {a.name}" for a in node.names)
                elif isinstance(node, ast.Import):
                    statements.update(f"import {a.name}" for a in node.names
                                      if a.name.startswith("humanlike"))
    assert len(statements) > 500, len(statements)
    (tmp_path / "imports.py").write_text("\n".join(sorted(statements)) + "\n")
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({
        "include": ["imports.py"], "extraPaths": [str(REPO)], "venvPath": str(REPO),
        "venv": ".venv", "typeCheckingMode": "off", "useLibraryCodeForTypes": False,
        "reportMissingImports": "error", "reportMissingModuleSource": "none",
        "reportAttributeAccessIssue": "error"}))
    pyright = REPO / "node_modules" / ".bin" / "pyright"
    result = subprocess.run([str(pyright), "-p", str(tmp_path / "pyrightconfig.json"),
                             "--outputjson"], cwd=REPO, capture_output=True, text=True, check=False)
    report = json.loads(result.stdout)
    unresolved = [f"line {d['range']['start']['line'] + 1}: {d['message']}"
                  for d in report["generalDiagnostics"]]
    assert report["summary"]["filesAnalyzed"] == 1, report["summary"]
    assert not unresolved, "\n".join(unresolved[:50])
