"""docs/architecture.md's server module table is generated from each module's docstring (its first sentence),
in floor order (tests/test_layers.py), so it cannot go stale: this test fails when the page and the
code differ. ``python -m tests.test_architecture_doc`` rewrites the table."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.test_layers import FLOORS

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "server"
DOC = REPO / "docs" / "architecture.md"
START, END = "<!-- server-modules: start (generated) -->", "<!-- server-modules: end -->"


def first_sentence(path: Path) -> str:
    """The docstring's first sentence (its first paragraph up to ". ", lines joined)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert doc, f"{path.relative_to(REPO)} has no docstring"
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = paragraph.split(". ")[0].rstrip(".")
    return sentence.replace("|", "\\|") + "."


def units() -> list[str]:
    return [name for floor in FLOORS for name in floor]


def module_table() -> str:
    """One row per server module, floor by floor (highest first), folder by folder."""
    rows = ["| floor | module | what it holds (its docstring's first sentence) |", "| --- | --- | --- |"]
    for level, floor in enumerate(FLOORS):
        for name in floor:
            if name == "":
                paths = [SERVER / "__init__.py"]
            elif (SERVER / name).is_dir():
                paths = sorted((SERVER / name).glob("*.py"),
                               key=lambda p: (p.name != "__init__.py", p.name))
            else:
                paths = [SERVER / f"{name}.py"]
            for path in paths:
                rel = path.relative_to(REPO).as_posix()
                rows.append(f"| {level} | `{rel}` | {first_sentence(path)} |")
    return "\n".join(rows)


def generated_section() -> str:
    return f"{START}\n{module_table()}\n{END}"


def current_section(text: str) -> str:
    assert START in text and END in text, f"{DOC} lacks the markers {START} ... {END}"
    return text[text.index(START):text.index(END) + len(END)]


def test_every_server_module_is_in_the_table_under_its_floor():
    listed = {p for p in SERVER.rglob("*.py") if "__pycache__" not in p.parts}
    table = module_table()
    missing = [p.relative_to(REPO).as_posix() for p in sorted(listed)
               if f"`{p.relative_to(REPO).as_posix()}`" not in table]
    assert not missing, missing


def test_the_architecture_page_shows_the_table_as_the_code_has_it():
    assert current_section(DOC.read_text(encoding="utf-8")) == generated_section(), (
        "docs/architecture.md's module table is stale: run `python -m tests.test_architecture_doc`")


if __name__ == "__main__":
    text = DOC.read_text(encoding="utf-8")
    DOC.write_text(text.replace(current_section(text), generated_section()), encoding="utf-8")
    sys.exit(0)
