"""The trial-type registry is finished: timelines, manifest checks, block settings and simulated
answers dispatch through it, psiTurk's records are an entry that reads its own storage, and no
module outside the registry compares a trial type to a literal (the lint below).

The lint's rule, over every module of server/, analysis/, stimuli/, deploy/ and humanlike/ but the
registry (``server/trial_types/registry.py``):

* a trial type's name (a key of ``TRIAL_TYPES``: rating, triad, classification, odd_one_out,
  debrief) may not be an operand of a comparison (``==``, ``!=``, ``in``, ``not in``, ``is``; alone or inside a tuple,
  list or set literal), of a set comparison (``&``, ``-``, ``^`` with a collection literal), of a
  comparing call (``.isin``, ``.in_``, ``.eq``, ``.issubset``, ...) or a ``match`` case, whatever the
  other side is: those names mean nothing but a trial type, so any such comparison switches on one;
* the name of a ``STORED_RECORDS`` entry (``psiturk``) is also an experiment kind, a blueprint, an
  extension key and an export format, so it is an offence only where the other side reads a kind or
  a type (a ``kind``/``type``/``trial_type`` name, attribute, key or ``.get`` argument), as in
  ``exp.spec.get("kind") == "psiturk"``; ``fmt == "psiturk"`` (the CLI's export format) is not.

A name bound to a constant first and compared later escapes the lint; the registry's functions
(``TRIAL_TYPES[name]``, ``rated_types()``, ``internal_types()``, ``block_settings()``, ...) are the
way to ask about a type."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from humanlike.server.export.codebook import codebook
from humanlike.server.export.stored_records import (
    STORED_RECORDS,
    StoredRecords,
    psiturk_records,
    stored_record_tables,
)
from humanlike.server.participants.payloads import TrialIn
from humanlike.server.study.experiments import load_experiment
from humanlike.server.study.spec import SpecError
from humanlike.server.study.timeline import estimated_minutes, generate_timeline
from humanlike.server.trial_types.base import TrialType
from humanlike.server.trial_types.rating import rating_frame
from humanlike.server.trial_types.registry import (
    TRIAL_TYPES,
    block_settings,
    block_trial_types,
    browser_trial_types,
    check_trial_type,
)

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("server", "analysis", "stimuli", "deploy", "humanlike")
REGISTRY = {p.relative_to(REPO).as_posix() for p in (REPO / "server" / "trial_types").glob("*.py")}
KIND_WORDS = {"kind", "kinds", "type", "types", "trial_type", "trial_types"}
COMPARING_CALLS = {"isin", "in_", "not_in", "notin_", "eq", "ne", "__eq__", "__ne__",
                   "__contains__", "issubset", "issuperset", "isdisjoint", "intersection",
                   "difference", "symmetric_difference", "startswith", "endswith"}
SET_OPERATORS = (ast.BitAnd, ast.Sub, ast.BitXor)


def _collection(node: ast.AST) -> list[ast.AST] | None:
    """The elements of a tuple, list or set literal (or of ``set(...)``/``frozenset(...)`` of one)."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return list(node.elts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("set", "frozenset", "tuple", "list") and len(node.args) == 1):
        return _collection(node.args[0])
    return None


def _strings(node: ast.AST, alone: bool = True) -> list[str]:
    """String constants an operand compares with: itself (when ``alone``) or its elements."""
    if alone and isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    elements = _collection(node)
    return [e.value for e in elements or [] if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _reads_a_kind(node: ast.AST) -> bool:
    """Whether an expression reads a kind or a type: a name, attribute, key or argument so called."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in KIND_WORDS:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in KIND_WORDS:
            return True
        if isinstance(sub, ast.Constant) and sub.value in KIND_WORDS:
            return True
    return False


def _pattern_strings(pattern: ast.pattern) -> list[str]:
    if isinstance(pattern, ast.MatchValue):
        return _strings(pattern.value)
    if isinstance(pattern, ast.MatchOr):
        return [s for p in pattern.patterns for s in _pattern_strings(p)]
    if isinstance(pattern, ast.MatchAs) and pattern.pattern is not None:
        return _pattern_strings(pattern.pattern)
    return []


def literal_comparisons(source: str, filename: str, trial_types: set[str],
                        stored: set[str]) -> list[str]:
    """``file:line: code`` of every comparison of a trial type (or, against a kind or a type, of a
    stored-records entry) with a string literal in ``source`` (the rule in the module docstring)."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    found: list[tuple[int, str]] = []

    def check(at: ast.AST, groups: list[tuple[list[str], list[ast.AST]]]) -> None:
        """``groups``: the strings of one operand and the operands on the other side."""
        for strings, others in groups:
            hit = set(strings) & trial_types or (
                set(strings) & stored and any(_reads_a_kind(o) for o in others))
            if hit:
                line = getattr(at, "lineno", 0)
                found.append((line, lines[line - 1].strip() if line else ""))
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            check(node, [(_strings(op), [o for o in operands if o is not op]) for op in operands])
        elif isinstance(node, ast.BinOp) and isinstance(node.op, SET_OPERATORS):
            check(node, [(_strings(node.left, alone=False), [node.right]),
                         (_strings(node.right, alone=False), [node.left])])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in COMPARING_CALLS):
            check(node, [(_strings(arg), [node.func.value]) for arg in node.args])
        elif isinstance(node, ast.Match):
            check(node, [(_pattern_strings(case.pattern), [node.subject]) for case in node.cases])
    return [f"{filename}:{line}: {code}" for line, code in sorted(set(found))]


def _modules() -> list[Path]:
    return sorted(p for root in ROOTS for p in (REPO / root).rglob("*.py")
                  if p.relative_to(REPO).as_posix() not in REGISTRY)


def _lint(source: str, filename: str = "planted.py") -> list[str]:
    return literal_comparisons(source, filename, set(TRIAL_TYPES), set(STORED_RECORDS))


def test_no_module_outside_the_registry_compares_a_trial_type_to_a_literal():
    modules = _modules()
    assert len(modules) > 100 and REPO / "server" / "study" / "timeline.py" in modules
    offences = [o for path in modules
                for o in _lint(path.read_text(encoding="utf-8"), path.relative_to(REPO).as_posix())]
    assert not offences, ("compare trial types through the registry (server/trial_types/registry.py), not "
                          "to literals:\n" + "\n".join(offences))


@pytest.mark.parametrize("source", [
    'if entry["type"] == "rating": pass',
    'if "debrief" != t.trial_type: pass',
    'ok = kind in ("triad", "classification")',
    'ok = kind not in ["slider", "classification"]',
    'ok = name in {"rating"}',
    'q = sa.select(Trial).where(Trial.trial_type == "rating")',
    'rated = trials[trials["trial_type"].isin(["rating"])]',
    'q = sa.select(Trial).where(Trial.trial_type.in_(("triad",)))',
    'both = types & {"triad", "classification"}',
    'match kind:\n    case "triad" | "other":\n        pass',
    'if x == "rating": pass',  # whatever the other side: the name means a trial type
    'if exp.spec.get("kind") == "psiturk": pass',
    'if experiment.kind != "psiturk": pass',
])
def test_the_lint_catches_a_planted_offender(source):
    found = _lint(f"import x\n{source}\n")
    assert found and found[0].startswith("planted.py:2: "), found


@pytest.mark.parametrize("source", [
    'if fmt == "psiturk": pass',  # an export format, not a kind
    'bp = Blueprint("psiturk", __name__)',
    'row = {"trial_type": "rating", "block": "ratings"}',  # data, not a comparison
    'if TRIAL_TYPES[kind].rated: pass',
    'if column == "ratings": pass',  # a table name, not a type
    'if kind == StimulusKind.CATCH: pass',
])
def test_the_lint_leaves_other_code_alone(source):
    assert _lint(source) == []


def test_the_lint_names_the_file_and_line_of_each_offender():
    source = 'a = 1\nif t == "triad":\n    b = t != "debrief"\n'
    assert _lint(source, "server/x.py") == ['server/x.py:2: if t == "triad":',
                                           'server/x.py:3: b = t != "debrief"']


# the registry's entries: what each type builds, checks and answers


def test_every_type_declares_its_timeline_manifest_and_simulation():
    for t in TRIAL_TYPES.values():
        assert t.simulate is not None, t.name
        assert (t.closing_entry is not None) == t.internal, t.name
    assert TRIAL_TYPES["triad"].designed_trials is not None
    assert {name: t.seconds_per_trial for name, t in TRIAL_TYPES.items()} == {
        "rating": 8.0, "triad": 3.0, "classification": 2.5, "odd_one_out": 4.0, "debrief": 60.0}
    assert block_settings() == {"classification": ["classification"], "odd_one_out": ["odd_one_out"]}


def test_a_new_type_builds_its_entries_and_closing_entry_through_the_registry(
        small_experiment, monkeypatch):
    """A type added as one entry: its blocks' entries and catch trials from ``entry``, its practice
    from the spare catch stimuli, its seconds in the estimate; a new internal type's closing entry."""
    loaded = load_experiment(small_experiment)

    def slider_entry(block, rec, rng, practice=False):
        return {"type": "slider", "block": block.name, "stimulus": rec.key, "kind": rec.kind,
                "start": float(rng.random()), "shown_as_practice": practice}

    slider = TrialType(name="slider", validate=lambda response, labels: None, table="sliders",
                       columns={}, frame=rating_frame, browser=True, entry=slider_entry,
                       seconds_per_trial=1.0)
    outro = TrialType(name="outro", validate=lambda response, labels: None, table="outro",
                      columns={}, frame=rating_frame, browser=True, internal=True,
                      closing_entry=lambda spec: {"type": "outro", "block": "outro"})
    monkeypatch.setitem(TRIAL_TYPES, "slider", slider)
    monkeypatch.setitem(TRIAL_TYPES, "outro", outro)
    spec = loaded.spec.model_copy(update={"blocks": [
        b.model_copy(update={"trial_type": "slider"}) for b in loaded.spec.blocks]})
    timeline = generate_timeline(spec, list(loaded.stimuli), "A", seed=4)
    trials = timeline["trials"]
    block_trials = [t for t in trials if t["block"] == "ratings"]
    assert {t["type"] for t in block_trials} == {"slider"}
    assert all(0 <= t["start"] < 1 for t in block_trials)
    practice = [t for t in block_trials if t["practice"]]
    assert len(practice) == 1 and practice[0]["shown_as_practice"] is True
    assert practice[0]["kind"] == "catch"  # drawn from the catch stimuli the catch trials left
    assert sum(t["kind"] == "catch" and not t["practice"] for t in block_trials) == 2
    assert [t["type"] for t in trials[-2:]] == ["debrief", "outro"]
    assert trials[-1]["index"] == len(trials) - 1
    n_block = len(block_trials)
    assert estimated_minutes(trials, spec.presentation, None) == int(np.ceil(
        (90 + n_block * 1.0 + 60 + 5.0) / 60))  # outro: the default 5 s, counted as internal


def test_the_timeline_is_unchanged_by_the_registry(small_experiment):
    """The same seed gives the same entries (the registry builds what timeline.py built)."""
    loaded = load_experiment(small_experiment)
    timeline = generate_timeline(loaded.spec, list(loaded.stimuli), "B", seed=11)
    first = timeline["trials"][0]
    assert set(first) == {"type", "block", "stimulus", "kind", "practice", "is_repeat",
                          "repeat_of", "index"}
    assert timeline["trials"][-1] == {"index": len(timeline["trials"]) - 1, "type": "debrief",
                                      "block": "debrief", "practice": False, "is_repeat": False,
                                      "repeat_of": None}
    again = generate_timeline(loaded.spec, list(loaded.stimuli), "B", seed=11)
    assert json.dumps(again) == json.dumps(timeline)


def test_a_types_manifest_check_and_practice_supply_are_its_entrys(small_experiment, monkeypatch):
    def refuse(block, records):
        return f"block {block.name} refuses {records[0].key!r}"

    monkeypatch.setitem(TRIAL_TYPES, "rating", replace(TRIAL_TYPES["rating"], check_manifest=refuse))
    with pytest.raises(SpecError, match=r"manifest\.csv: block ratings refuses '"):
        load_experiment(small_experiment)
    monkeypatch.setitem(TRIAL_TYPES, "rating", replace(
        TRIAL_TYPES["rating"], practice_supply=lambda block, records: 0))
    with pytest.raises(SpecError, match=r"blocks\.0 \(ratings\)\.practice: asks for 1 practice trials but the "
                                        r"manifest supplies 0"):
        load_experiment(small_experiment)


def test_triads_need_each_mlds_stimulus_sequence_and_level():
    check = TRIAL_TYPES["triad"].check_manifest
    assert check is not None
    block = SimpleNamespace(kinds=["mlds"], catch_trials=0)
    ok = SimpleNamespace(key="a.png", kind="mlds", meta={"sequence": "s", "level": 1})
    bad = SimpleNamespace(key="b.png", kind="mlds", meta={"level": 2})
    assert check(block, [ok]) is None
    assert check(block, [ok, bad]) == "mlds stimulus 'b.png' needs columns sequence and level"
    levels = [SimpleNamespace(key=f"{i}", kind="mlds", meta={"sequence": "s", "level": i})
              for i in range(1, 6)]
    assert TRIAL_TYPES["triad"].practice_supply(block, levels) == 10  # C(5, 3)


def test_block_settings_belong_to_the_types_that_accept_them(small_experiment, monkeypatch):
    text = small_experiment.read_text().replace(
        "repeats = 2\n", "repeats = 2\n\n[blocks.classification]\nduration_ms = 100\n", 1)
    bad = small_experiment.parent / "settings.toml"
    bad.write_text(text)
    try:
        with pytest.raises(SpecError, match=r"blocks\[ratings\]\.classification needs trial_type "
                                            r"= 'classification'"):
            load_experiment(bad)
        monkeypatch.setitem(TRIAL_TYPES, "rating", replace(TRIAL_TYPES["rating"],
                                                           settings=("classification",)))
        assert block_settings() == {"classification": ["rating", "classification"],
                                    "odd_one_out": ["odd_one_out"]}
        assert load_experiment(bad).spec.blocks[0].classification is not None
    finally:
        bad.unlink()


def test_a_simulated_answer_is_its_types_entry(monkeypatch):
    from humanlike.server.demo.agents import HumanAgent
    from humanlike.server.demo.simulate import SimulatedStudy

    study = SimulatedStudy.__new__(SimulatedStudy)
    study.agent = HumanAgent(study)  # the noisy human answers through its type's entry
    seen = []
    monkeypatch.setitem(TRIAL_TYPES, "triad", replace(
        TRIAL_TYPES["triad"],
        simulate=lambda observer, entry, fails: seen.append((observer, entry, fails)) or {"x": 1}))
    entry = {"type": "triad", "sequence": "s"}
    assert study.answer(entry, True) == {"x": 1} and seen == [(study, entry, True)]
    monkeypatch.setitem(TRIAL_TYPES, "triad", replace(TRIAL_TYPES["triad"], simulate=None))
    with pytest.raises(ValueError, match="no simulated answer for trial type 'triad'"):
        study.answer(entry, False)
    with pytest.raises(ValueError, match="no simulated answer for trial type 'slider'"):
        study.answer({"type": "slider"}, False)


# psiTurk's records: an entry that reads its own storage, invisible to the per-type loops


def test_psiturk_records_are_a_stored_records_entry_not_a_trial_type():
    entry = STORED_RECORDS["psiturk"]
    assert isinstance(entry, StoredRecords) and entry.table == "psiturk_trials"
    assert entry.read is psiturk_records
    assert "psiturk" not in TRIAL_TYPES
    assert "psiturk" not in browser_trial_types() and "psiturk" not in block_trial_types()
    book = codebook()
    assert "psiturk_trials" not in book
    assert book["trials"]["trial_type"] == "rating | triad | classification | odd_one_out | debrief"


def test_a_posted_psiturk_trial_is_refused_as_an_unknown_type():
    with pytest.raises(ValueError, match=r"unknown trial type 'psiturk'; one of \['rating', "
                                         r"'triad', 'classification', 'odd_one_out', 'debrief'\]"):
        check_trial_type("psiturk")
    with pytest.raises(ValueError, match="unknown trial type 'psiturk'"):
        TrialIn.model_validate_json('{"trial_index": 0, "trial_type": "psiturk", "response": {}}')


def test_an_experiment_of_another_kind_has_no_psiturk_table():
    for spec in ({"slug": "small"}, {"kind": "humanlike"}, {}):
        exp = SimpleNamespace(slug="small", spec=spec)
        assert psiturk_records(exp) is None  # type: ignore[arg-type]
        assert stored_record_tables(exp) == {}  # type: ignore[arg-type]


def test_stored_record_tables_reads_only_the_tables_asked_for(monkeypatch):
    calls = []

    def read(exp):
        calls.append(exp)
        return "table"

    monkeypatch.setitem(STORED_RECORDS, "psiturk",
                        replace(STORED_RECORDS["psiturk"], read=read))
    exp = SimpleNamespace(slug="s", spec={})
    assert stored_record_tables(exp, tables=["trials"]) == {}  # type: ignore[arg-type]
    assert calls == []
    assert stored_record_tables(exp) == {"psiturk_trials": "table"}  # type: ignore[arg-type]
    assert stored_record_tables(exp, tables=["psiturk_trials"]) == {  # type: ignore[arg-type]
        "psiturk_trials": "table"}


def test_a_psiturk_experiments_table_is_read_from_psiturk_storage(database_url, tmp_path):
    """What the export writes as psiturk_trials: psiTurk's records as /sync stored them."""
    import sqlalchemy as sa

    from humanlike.server import database
    from humanlike.server.extensions import db
    from humanlike.server.tables.core import Experiment
    from tests.server.psiturk.conftest import WHEEL, make_app, setup_example

    if not WHEEL.is_file():
        pytest.fail(f"{WHEEL} is missing: run `make psiturk-example` (make test does)")
    import zipfile

    with zipfile.ZipFile(WHEEL) as wheel:
        wheel.extractall(tmp_path / "wheel")
    project = setup_example(tmp_path / "wheel" / "psiturk", tmp_path / "project")
    app = make_app(database_url, project)
    try:
        client = app.test_client()
        client.get("/exp?hitId=H&assignmentId=A&workerId=W&mode=live")
        records = [{"uniqueid": "W:A", "current_trial": i, "dateTime": i,
                    "trialdata": {"word": w, "rt": 500 + i}} for i, w in enumerate(["RED", "BLUE"])]
        assert client.put("/sync/W%3AA", json={"data": records}).status_code == 200
        with app.app_context():
            exp = db.session.execute(sa.select(Experiment)).scalar_one()
            tables = stored_record_tables(exp)
        assert list(tables) == ["psiturk_trials"]
        table = tables["psiturk_trials"]
        assert table["word"].tolist() == ["RED", "BLUE"] and table["rt"].tolist() == [500, 501]
        assert set(table["platform_id"]) == {"W"}
    finally:
        database.dispose(app)
