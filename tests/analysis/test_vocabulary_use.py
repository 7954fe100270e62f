"""The analysis package names participant statuses through humanlike.vocabulary, never by spelling
them: a status spelled in analysis/ drifts from the server's lifecycle the day a status is added."""

from __future__ import annotations

import ast
from pathlib import Path

from humanlike.vocabulary import FINISHED_STATUSES, LEFT_STATUSES, ParticipantStatus

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"
STATUSES = {status.value for status in ParticipantStatus}


def spelled_statuses(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant that is a participant status, docstrings aside."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in STATUSES and id(node) not in docstrings]


def test_the_check_finds_a_spelled_status():
    planted = 'def n(people):\n    """completed"""\n    return people["status"].isin(["completed", "approved"])\n'
    assert spelled_statuses(planted) == [(3, "completed"), (3, "approved")]


def test_no_analysis_module_spells_a_participant_status():
    found = [f"{path.relative_to(ANALYSIS.parent)}:{line}: {text!r}"
             for path in sorted(ANALYSIS.rglob("*.py"))
             for line, text in spelled_statuses(path.read_text())]
    assert not found, "use humanlike.vocabulary's status groups:\n" + "\n".join(found)


def test_status_groups_are_statuses_and_disjoint():
    assert FINISHED_STATUSES <= STATUSES and LEFT_STATUSES <= STATUSES
    assert not FINISHED_STATUSES & LEFT_STATUSES
    assert {str(s) for s in FINISHED_STATUSES} == {"completed", "submitted", "approved"}
