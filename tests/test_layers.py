"""The server's floors (docs/architecture.md): every import runs down, never up, and no two folders
import each other, directly or round a cycle. Like the registry lint, a new module that breaks a
floor fails here, naming the import.

The graph is grimp's (import-linter's engine) over the checkout as it is: ``humanlike/`` holds a
directory link per part of the namespace, so ``humanlike.server.*`` is the package the wheel ships.
Imports under ``if TYPE_CHECKING:`` are left out: they never run."""

from __future__ import annotations

import functools
import os

import grimp
import pytest

SERVER = "humanlike.server"

# Highest first; folders on one floor are siblings and may not import each other. A root module
# (server/<name>.py) has its own place: words every room uses sit below the tables, the audit log
# and the web hardening (which write rows) above them.
FLOORS: list[tuple[str, ...]] = [
    ("",),  # humanlike.server itself: create_app wires everything
    ("admin", "web", "demo", "research_api"),  # the audiences: researcher, participant,
    # simulation, and the researcher API
    ("live",),  # what watches a running study: QC, panel, stopping, breaker, adaptive, sync
    ("export",),
    ("rights",),  # deletion, withdrawal, retention, pseudonyms
    # where participants come from: recruiters, Prolific, SONA, MTurk, payments; and the psiTurk
    # protocol, whose routes and records need nothing above the participants
    ("sources", "psiturk"),
    ("participants",),
    ("study",),
    ("trial_types",),
    ("security",),  # headers, rate limits, the login throttle (writes audit rows)
    ("lab",),  # who may do what: roles, per-study permissions, API tokens (issue 40)
    ("audit",),
    ("tables",),
    ("database", "platforms"),
    ("lifecycle", "errors", "config", "extensions"),
]


@functools.cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("humanlike", include_external_packages=False,
                             exclude_type_checking_imports=True)


def unit(module: str) -> str | None:
    """The floor unit of a server module: its folder, its root module's name, or "" for the
    package itself; None outside the server."""
    if module == SERVER:
        return ""
    if not module.startswith(SERVER + "."):
        return None
    return module.removeprefix(SERVER + ".").split(".")[0]


def floor_of(name: str) -> int:
    for level, names in enumerate(FLOORS):
        if name in names:
            return level
    raise AssertionError(f"server/{name} has no floor: add it to FLOORS in tests/test_layers.py")


def server_imports() -> list[tuple[str, str, str, str]]:
    """(importer, imported, importer's unit, imported's unit) for every import between two units."""
    g = graph()
    out = []
    for importer in sorted(g.modules):
        a = unit(importer)
        if a is None:
            continue
        for imported in sorted(g.find_modules_directly_imported_by(importer)):
            b = unit(imported)
            if b is not None and b != a:
                out.append((importer, imported, a, b))
    return out


def test_every_server_folder_and_root_module_has_a_floor():
    units = {unit(m) for m in graph().modules} - {None}
    for name in units:
        floor_of(name)  # raises naming the missing one


def test_imports_only_run_down():
    up = [f"{importer} imports {imported} ({a} is below {b})"
          for importer, imported, a, b in server_imports() if floor_of(a) >= floor_of(b)]
    assert not up, "\n".join(up)


def test_no_cycle_between_folders():
    edges: dict[str, set[str]] = {}
    for _, _, a, b in server_imports():
        edges.setdefault(a, set()).add(b)
    # a unit that reaches itself through others (Tarjan would list them; one path is enough)
    for start in edges:
        seen, stack = set(), [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in edges.get(node, ()):
                assert nxt != start, "cycle: " + " -> ".join([*path, start])
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))


def test_the_server_root_holds_at_most_twelve_modules_and_never_imports_deploy():
    root = os.path.join(os.path.dirname(__file__), "..", "server")
    modules = sorted(f for f in os.listdir(root) if f.endswith(".py"))
    assert len(modules) <= 12, modules
    deploy = [f"{importer} imports {imported}" for importer in graph().modules
              if importer.startswith(SERVER)
              for imported in graph().find_modules_directly_imported_by(importer)
              if imported.startswith("humanlike.deploy")]
    assert not deploy, "\n".join(deploy)


@pytest.mark.parametrize("folder", ["analysis", "stimuli"])
def test_analysis_and_stimuli_never_import_the_server(folder):
    g = graph()
    wrong = [f"{m} imports {t}" for m in g.modules if m.startswith(f"humanlike.{folder}")
             for t in g.find_modules_directly_imported_by(m) if t.startswith(SERVER)]
    assert not wrong, "\n".join(wrong)
