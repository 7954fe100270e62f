"""A psiTurk participants.db built with psiTurk's own DDL imports (participants, statuses, data) and
re-exports to the trialdata/questiondata/eventdata CSVs psiTurk's own download code writes from it
(psiTurk 3.3.1's get_trial_data & co., read from its wheel, are the oracle)."""

from __future__ import annotations

import ast
import csv
import io
import json
import sqlite3
import types
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from humanlike.cli import main
from humanlike.server import create_app, database
from humanlike.server.extensions import db
from humanlike.server.tables.core import Participant
from humanlike.server.tables.psiturk import PsiturkAssignment, PsiturkTrial

DDL = Path(__file__).parent / "fixtures" / "psiturk_assignments.sql"


def blob(uid: str, n_trials: int, cond: int) -> dict:
    trials = [{"uniqueid": uid, "current_trial": i, "dateTime": 1700000000000 + 1000 * i,
               "trialdata": {"phase": "TEST", "word": "GRÜN, \"quoted\"\nline", "rt": 512.25 + i,
                             "hit": i % 2 == 0, "extra": None, "nested": {"a": [1, 2.5]}}}
              for i in range(n_trials)]
    events = [{"eventtype": "initialized", "value": None, "timestamp": 1700000000000, "interval": 0},
              {"eventtype": "window_resize", "value": [1280, 720], "timestamp": 1700000000005,
               "interval": 5},
              {"eventtype": "focus", "value": "off", "timestamp": 1700000000100, "interval": 95}]
    return {"condition": cond, "counterbalance": 1, "assignmentId": uid.split(":")[1],
            "workerId": uid.split(":")[0], "hitId": "HIT1", "currenttrial": n_trials, "bonus": 0,
            "data": trials, "questiondata": {"engagement": "5", "comment": "a, b; \"c\"",
                                             "choices": [1, "x"]},
            "eventdata": events, "useragent": "Mozilla/5.0", "mode": "live"}


ROWS = [  # uniqueid, status, mode, trials (None: no datastring)
    ("W1:A1", 4, "live", 12), ("W2:A2", 6, "live", 3), ("W3:A3", 1, "live", None),
    ("W4:A4", 5, "sandbox", 1), ("debugW:debugA", 3, "debug", 2),
]


@pytest.fixture
def psiturk_db(tmp_path) -> Path:
    path = tmp_path / "participants.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(DDL.read_text())
        for i, (uid, status, mode, n) in enumerate(ROWS):
            worker, assignment = uid.split(":")
            conn.execute(
                "INSERT INTO assignments VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (uid, assignment, worker, "debugH" if mode == "debug" else "HIT1", "1.2.3.4",
                 "chrome", "linux", "en", i % 2, 1, "1.0", "2024-01-02 03:04:05.000000",
                 "2024-01-02 03:05:00.000000", "2024-01-02 03:20:00.000000", 0.5, status, mode,
                 None if n is None else json.dumps(blob(uid, n, i % 2))))
    return path


def psiturk_download(wheel: Path, db_path: Path) -> dict[str, bytes]:
    """psiTurk's download_datafiles on this database, run with psiTurk's own three methods."""
    tree = ast.parse((wheel / "models.py").read_text())
    participant = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Participant")
    wanted = [n for n in participant.body if isinstance(n, ast.FunctionDef)
              and n.name in ("get_trial_data", "get_event_data", "get_question_data")]
    namespace: dict = {"json": json, "io": io, "csv": csv}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "psiturk/models.py", "exec"), namespace)
    with sqlite3.connect(db_path) as conn:
        people = [types.SimpleNamespace(uniqueid=u, datastring=d)
                  for u, d in conn.execute("SELECT uniqueid, datastring FROM assignments")]
    out = {}
    for name, fn in (("trialdata", "get_trial_data"), ("eventdata", "get_event_data"),
                     ("questiondata", "get_question_data")):
        out[name] = "".join(namespace[fn](p) for p in people).encode()
    return out


def test_psiturk_database_imports_and_reexports_byte_for_byte(database_url, psiturk_db, psiturk_wheel,
                                                              tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["import", "psiturk", str(psiturk_db), "--slug", "stroop",
                                  "--database-url", database_url])
    assert result.exit_code == 0, result.output
    assert "5 participants (18 trial records) imported from table 'assignments'" in result.output
    again = runner.invoke(main, ["import", "psiturk", str(psiturk_db), "--slug", "stroop",
                                 "--database-url", database_url])
    assert "0 participants" in again.output and "5 already there" in again.output

    app = create_app({"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "x"})
    with app.app_context():
        people = {p.uniqueid: p for p in db.session.execute(sa.select(PsiturkAssignment)).scalars()}
        assert set(people) == {r[0] for r in ROWS}
        statuses = {uid: db.session.get(Participant, p.participant_id).status
                    for uid, p in people.items()}
        assert statuses == {"W1:A1": "submitted", "W2:A2": "quit_early", "W3:A3": "allocated",
                            "W4:A4": "approved", "debugW:debugA": "completed"}
        platforms = {uid: db.session.get(Participant, p.participant_id).platform
                     for uid, p in people.items()}
        assert platforms["W1:A1"] == "mturk" and platforms["debugW:debugA"] == "local"
        assert db.session.execute(sa.select(sa.func.count()).select_from(PsiturkTrial)).scalar() == 18
    database.dispose(app)

    out = tmp_path / "out"
    result = runner.invoke(main, ["export", "stroop", "--out", str(out), "--format", "psiturk",
                                  "--database-url", database_url])
    assert result.exit_code == 0, result.output
    expected = psiturk_download(psiturk_wheel, psiturk_db)
    for name, content in expected.items():
        assert (out / f"{name}.csv").read_bytes() == content, name
    assert expected["trialdata"].count(b"\r\n") >= 18
    import pandas as pd

    tidy = pd.read_csv(out / "psiturk_trials.csv")
    assert len(tidy) == 18
    assert {"phase", "word", "rt", "hit", "extra", "nested"} <= set(tidy.columns)
    assert tidy.loc[tidy.platform_id == "W1", "rt"].tolist() == [512.25 + i for i in range(12)]

    # the humanlike export carries the same tidy table next to its own tables
    native = tmp_path / "native"
    result = runner.invoke(main, ["export", "stroop", "--out", str(native), "--database-url",
                                  database_url])
    assert result.exit_code == 0, result.output
    assert "psiturk_trials" in result.output
    table = pd.read_csv(native / "psiturk_trials.csv")
    assert len(table) == 18 and table.loc[table.platform_id == "W1", "word"].nunique() == 1
    participants = pd.read_csv(native / "participants.csv")
    assert sorted(participants.status) == sorted(
        ["submitted", "quit_early", "allocated", "approved", "completed"])


def test_import_names_what_is_wrong(database_url, tmp_path):
    bad = tmp_path / "other.db"
    with sqlite3.connect(bad) as conn:
        conn.execute("CREATE TABLE people (id INTEGER)")
    result = CliRunner().invoke(main, ["import", "psiturk", str(bad), "--database-url", database_url])
    assert result.exit_code != 0
    assert "other.db" in result.output and "no table with psiTurk's participant columns" in result.output
    result = CliRunner().invoke(main, ["import", "psiturk", str(bad), "--table", "people",
                                       "--database-url", database_url])
    assert "lacks psiTurk's columns" in result.output and "datastring" in result.output


def test_tidy_table_of_mixed_trialdata_exports(database_url, stroop_project, tmp_path):
    """Real psiTurk keys hold numbers in one record and text in another: the export still writes."""
    from tests.server.psiturk.conftest import make_app

    app = make_app(database_url, stroop_project)
    client = app.test_client()
    client.get("/exp?hitId=H&assignmentId=A&workerId=W&mode=live")
    records = [{"uniqueid": "W:A", "current_trial": i, "dateTime": i, "trialdata": td}
               for i, td in enumerate([{"response": "", "x": [1]}, {"response": 3, "x": {"k": 1}},
                                       {"response": True, "phase": "END"}])]
    assert client.put("/sync/W%3AA", json={"data": records}).status_code == 200
    database.dispose(app)
    result = CliRunner().invoke(main, ["export", "psiturk-psiturk-example", "--out",
                                       str(tmp_path / "o"), "--database-url", database_url])
    assert result.exit_code == 0, result.output
    import pandas as pd

    table = pd.read_parquet(tmp_path / "o" / "psiturk_trials.parquet")
    assert table["response"].tolist()[1:] == ["3", "True"]
    assert table["x"].tolist()[:2] == ["[1]", '{"k": 1}']
