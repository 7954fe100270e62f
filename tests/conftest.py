"""Shared fixtures: every database test runs on SQLite and on PostgreSQL (mandatory when CI=true);
browser tests run on PostgreSQL only (production's backend; nothing in a browser depends on it).

Migrations run once per session and backend, not once per test. ``database_url`` is still a fresh,
EMPTY database (a migration test can walk it up revision by revision); while a test holds it,
``humanlike.server.database.upgrade`` of an app on that very URL, when the database is still empty,
restores the head schema that the real Alembic migrations built at the start of this session
(per xdist worker): SQLite copies the migrated template file, PostgreSQL replays the statements
Alembic sent while migrating a template schema. Any other call (a partly migrated database, another
URL, ``flask_migrate.upgrade`` itself, a server process) runs the real migrations as before.
``HUMANLIKE_TEST_MIGRATE_EACH=1`` runs the real migrations for every test instead.

On PostgreSQL each session (each xdist worker) creates its own database, ``hl_t_<host>_<pid>_<worker>``,
holding one schema per test; dropping that database at the end replaces ~0.2 s of DROP SCHEMA per
test. Without the right to create a database the schemas live in the database of
``HUMANLIKE_TEST_PG`` and are dropped after each test, as before."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import socket
import sqlite3
import tempfile
from pathlib import Path

import pytest

# boto's credential chain must never ask the EC2 instance-metadata endpoint from a test
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
# the withdrawal journal of the tests' withdrawals goes to a temporary folder, not the instance's
os.environ.setdefault("HUMANLIKE_WITHDRAWALS", str(
    Path(tempfile.mkdtemp(prefix="humanlike-withdrawals-")) / "withdrawals.jsonl"))

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
if WORKER != "main":
    # pytest-xdist runs one worker per core: a BLAS / OpenMP / torch pool of a thread per core in
    # each worker only oversubscribes the cores (idle pool threads spin). Set before numpy loads.
    for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_pool, "1")

PG_URL = os.environ.get("HUMANLIKE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
ON_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MIGRATE_EACH = os.environ.get("HUMANLIKE_TEST_MIGRATE_EACH", "").lower() in ("1", "true", "yes")


def _dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _pg_reachable() -> str | None:
    """None when PostgreSQL answers, else the reason."""
    try:
        import psycopg

        with psycopg.connect(_dsn(PG_URL), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


_PG_PROBLEM = _pg_reachable()
#: the backend of browser tests: PostgreSQL, or SQLite on a machine without it (never on CI, where
#: an unreachable PostgreSQL fails the test instead)
BROWSER_BACKEND = "postgresql" if _PG_PROBLEM is None or ON_CI else "sqlite"


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    """A browser test (marked ``browser`` or driving ``chromium``) that asks for ``database_url``
    gets one backend, BROWSER_BACKEND, instead of both."""
    if "database_url" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("browser") is None and (
            "chromium" not in metafunc.fixturenames):
        return
    if any("database_url" in str(mark.args[:1]) for mark in metafunc.definition.iter_markers(
            "parametrize")):
        return
    metafunc.definition.add_marker(
        pytest.mark.parametrize("database_url", [BROWSER_BACKEND], indirect=True))


#: the test files that take longest (tens of seconds each on the 2-core development machine,
#: measured November 2025), by name so that a move between folders keeps them. Under pytest-xdist
#: (`make test`: --dist loadfile --no-loadscope-reorder) they are handed out first, so that no long
#: file is left running alone at the end while the other workers idle. A scheduling hint only: a
#: stale entry costs nothing, a missing one a little time.
LONGEST_FIRST = (
    "test_types.py",
    "test_demo_experiment.py",
    "test_dashboard_panel.py",
    "test_classification.py",
    "test_participant_experience.py",
    "test_allocation.py",
    "test_faults.py",
    "test_controversial_synthesis.py",
    "test_report.py",
    "test_demo_command.py",
    "test_protocol.py",
    "test_scale_out.py",
    "test_breaker.py",
    "test_stroop_browser.py",
    "test_controversial_colour.py",
    "test_controversial_manifest.py",
    "test_controversial_cli.py",
    "test_packaging.py",
)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the files of LONGEST_FIRST first (each file's tests stay together and in
    order; the other files keep theirs). A plain `pytest` run keeps the collection order."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# --- PostgreSQL: one database per session (per xdist worker) --------------------------------------

_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]
_SESSION_DB = re.compile(r"^hl_t_([0-9a-f]{6})_(\d+)_\w+$")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop_abandoned_session_databases(conn) -> None:
    """Databases left by sessions of this host that were killed before their clean-up."""
    import psycopg

    for (name,) in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'hl_t_%'"):
        match = _SESSION_DB.match(name)
        if match and match.group(1) == _HOST and not _pid_alive(int(match.group(2))):
            # psycopg.Error: being dropped by its own session's clean-up right now
            with contextlib.suppress(psycopg.Error):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _PgSession:
    """Where this session's test schemas live."""

    def __init__(self):
        import psycopg
        import sqlalchemy as sa

        self.own_database = False
        self.url = PG_URL
        name = f"hl_t_{_HOST}_{os.getpid()}_{WORKER}"[:63]
        try:
            with psycopg.connect(_dsn(PG_URL), autocommit=True) as conn:
                _drop_abandoned_session_databases(conn)
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        except psycopg.Error:
            return  # no CREATEDB right: schemas in PG_URL's database, dropped per test
        self.name = name
        self.own_database = True
        self.url = sa.engine.make_url(PG_URL).set(database=name).render_as_string(
            hide_password=False)

    def new_schema(self) -> tuple[str, str]:
        import psycopg

        schema = "t_" + secrets.token_hex(6)
        with psycopg.connect(_dsn(self.url), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return schema, f"{self.url}?options=-csearch_path%3D{schema}"

    def connect(self):
        """An admin connection to this session's database (no search_path: name schemas)."""
        import psycopg

        return psycopg.connect(_dsn(self.url))

    def drop_schema(self, schema: str) -> None:
        if self.own_database:
            return  # goes with the database at the end of the session
        import psycopg

        with psycopg.connect(_dsn(self.url), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    def close(self) -> None:
        """Drop this session's database in a detached process: with a schema per test it holds
        tens of thousands of files, whose removal took 5-20 s at the end of every worker. Should the
        drop not happen, the next session on this host drops the database (its pid is gone)."""
        if not self.own_database:
            return
        import subprocess
        import sys

        drop = f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'
        try:
            subprocess.Popen(
                [sys.executable, "-c", "import sys, psycopg; psycopg.connect(sys.argv[1], "
                 "autocommit=True).execute(sys.argv[2])", _dsn(PG_URL), drop],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        except OSError:
            import psycopg

            with psycopg.connect(_dsn(PG_URL), autocommit=True) as conn:
                conn.execute(drop)


@pytest.fixture(scope="session")
def _pg_session():
    if _PG_PROBLEM is not None:
        yield None
        return
    session = _PgSession()
    yield session
    session.close()


# --- the head schema, migrated once per session and backend ---------------------------------------

#: humanlike.server.database.upgrade itself (the real Alembic migrations), kept before any patch
_REAL_UPGRADE = None


def _bare_app(url: str):
    from humanlike.server import create_app

    return create_app({"TESTING": True, "SECRET_KEY": "migrate-once",
                       "SQLALCHEMY_DATABASE_URI": url, "EXPERIMENT_PATHS": []})


def _pg_schema_signature(conn, schema: str) -> list[tuple]:
    """Tables, columns, indexes, constraints and table options of ``schema``, its name left out."""
    rows = []
    for (sql, kind) in [
        ("SELECT table_name, column_name, data_type, is_nullable, column_default "
         "FROM information_schema.columns WHERE table_schema = %s", "col"),
        ("SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s", "idx"),
        ("SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k "
         "JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
         "WHERE n.nspname = %s", "con"),
        ("SELECT c.relname, c.relkind::text, array_to_string(c.reloptions, ',') FROM pg_class c "
         "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s", "rel"),
        ("SELECT 'alembic_version', string_agg(version_num, ','), '' FROM alembic_version", "ver"),
    ]:
        params = (schema,) if "%s" in sql else ()
        if kind == "ver":
            conn.execute(f"SET search_path TO {schema}")
        for row in conn.execute(sql, params):
            rows.append((kind, *(str(v).replace(f"{schema}.", "") for v in row)))
    return sorted(rows)


class _Heads:
    """The head schema of each backend, built by the real migrations on first use."""

    def __init__(self, tmp_path_factory, pg_session):
        self.tmp_path_factory = tmp_path_factory
        self.pg_session = pg_session
        self._sqlite: Path | None = None
        self._pg_script: str | None = None
        self._pg_template: str | None = None
        self._pg_checked = False

    def sqlite_file(self) -> Path:
        if self._sqlite is None:
            from humanlike.server import database

            path = self.tmp_path_factory.mktemp("head-schema") / "head.sqlite"
            app = _bare_app(f"sqlite:///{path}")
            _REAL_UPGRADE(app)
            database.dispose(app)
            with sqlite3.connect(path) as conn:  # everything in the main file, nothing in -wal
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self._sqlite = path
        return self._sqlite

    def pg_script(self) -> str:
        if self._pg_script is None:
            import psycopg
            import sqlalchemy as sa

            from humanlike.server import database
            from humanlike.server.extensions import db

            schema, url = self.pg_session.new_schema()
            app = _bare_app(url)
            sent: list[tuple[str, object]] = []

            def record(_conn, _cursor, statement, parameters, context, executemany):
                # as the driver got it: no parameters at all (do_execute_no_params), or each set
                if not parameters and context is not None and context.no_parameters:
                    sent.append((statement, None))
                elif executemany:
                    sent.extend((statement, p) for p in parameters)
                else:
                    sent.append((statement, parameters))

            with app.app_context():
                sa.event.listen(db.engine, "before_cursor_execute", record)
                try:
                    _REAL_UPGRADE(app)
                finally:
                    sa.event.remove(db.engine, "before_cursor_execute", record)
            database.dispose(app)
            with psycopg.connect(_dsn(self.pg_session.url)) as conn:
                cur = psycopg.ClientCursor(conn)
                statements = [cur.mogrify(s, p).strip() for s, p in sent]
            # a statement ending in a -- comment must not swallow the separator
            self._pg_script = "\n;\n".join(["SET LOCAL synchronous_commit TO off", *statements])
            self._pg_template = schema
        return self._pg_script

    def replay_into(self, schema: str) -> None:
        """The head schema in the (empty) ``schema`` of this session's database."""
        script = self.pg_script()
        with self.pg_session.connect() as conn:
            conn.execute(f"SET LOCAL search_path TO {schema}")
            conn.execute(script)

    def restore_pg(self, app) -> None:
        """Replay the head script into the (empty) schema of ``app``; the first time, check that
        the replayed schema is the migrated template's."""
        from humanlike.server.extensions import db

        script = self.pg_script()
        with app.app_context():
            raw = db.engine.raw_connection()
            try:
                cur = raw.cursor()
                cur.execute(script)
                raw.commit()
                if not self._pg_checked:
                    cur.execute("SELECT current_schema()")
                    schema = cur.fetchone()[0]
                    raw.commit()
                    import psycopg

                    with psycopg.connect(_dsn(self.pg_session.url), autocommit=True) as conn:
                        want = _pg_schema_signature(conn, self._pg_template)
                        got = _pg_schema_signature(conn, schema)
                    assert got == want, "the replayed head schema differs from the migrated one"
                    self._pg_checked = True
            finally:
                raw.close()


def _pg_tables_in_order(conn, schema: str) -> list[str]:
    """The tables of ``schema``, each after the tables its foreign keys point to."""
    tables = [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY c.relname", (schema,))]
    needs = {t: set() for t in tables}
    for child, parent in conn.execute(
            "SELECT c.relname, p.relname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
            "JOIN pg_class p ON p.oid = k.confrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE k.contype = 'f' AND n.nspname = %s", (schema,)):
        if child != parent:
            needs[child].add(parent)
    ordered: list[str] = []
    while needs:
        ready = sorted(t for t, deps in needs.items() if deps <= set(ordered))
        assert ready, f"foreign keys in a cycle: {needs}"
        ordered += ready
        for t in ready:
            del needs[t]
    return ordered


def pg_copy_schema_data(conn, source: str, target: str) -> None:
    """Make the rows and sequences of schema ``target`` those of ``source`` (same head schema)."""
    tables = _pg_tables_in_order(conn, source)
    conn.execute("SET LOCAL synchronous_commit TO off")
    for table in reversed(tables):  # a few rows (the synced experiment): cheaper than TRUNCATE
        conn.execute(f"DELETE FROM {target}.{table}")
    for table in tables:
        conn.execute(f"INSERT INTO {target}.{table} SELECT * FROM {source}.{table}")
    sequences = [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'S'", (source,))]
    for seq in sequences:
        last, called = conn.execute(f"SELECT last_value, is_called FROM {source}.{seq}").fetchone()
        conn.execute("SELECT setval(%s, %s, %s)", (f"{target}.{seq}", last, called))


@pytest.fixture(scope="session")
def _heads(tmp_path_factory, _pg_session):
    global _REAL_UPGRADE
    from humanlike.server import database

    if _REAL_UPGRADE is None:
        _REAL_UPGRADE = database.upgrade
    return _Heads(tmp_path_factory, _pg_session)


def _sqlite_is_empty(path: str) -> bool:
    if not os.path.exists(path):
        return True
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    finally:
        conn.close()


def _pg_is_empty(app) -> bool:
    from humanlike.server.extensions import db

    with app.app_context():
        raw = db.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                        "ON n.oid = c.relnamespace WHERE n.nspname = current_schema()")
            empty = cur.fetchone()[0] == 0
            raw.rollback()
            return empty
        finally:
            raw.close()


def _upgrade_from_head(monkeypatch, heads, url: str, backend: str) -> None:
    """While the test runs, ``database.upgrade`` of an app on ``url`` restores the session's head
    schema when the database is still empty."""
    from humanlike.server import database

    real = _REAL_UPGRADE

    def upgrade(app) -> None:
        if app.config.get("SQLALCHEMY_DATABASE_URI") != url:
            return real(app)
        if backend == "sqlite":
            path = url.removeprefix("sqlite:///")
            database.dispose(app)
            if not _sqlite_is_empty(path):
                return real(app)
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            shutil.copyfile(heads.sqlite_file(), path)
            return None
        if not _pg_is_empty(app):
            return real(app)
        heads.restore_pg(app)
        return None

    monkeypatch.setattr(database, "upgrade", upgrade)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path, monkeypatch, _heads, _pg_session):
    """A fresh, empty database: a SQLite file, or a private schema in PostgreSQL (see the module's
    docstring for how an app's ``database.upgrade`` on it gets the head schema)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'test.sqlite'}"
        if not MIGRATE_EACH:
            _upgrade_from_head(monkeypatch, _heads, url, "sqlite")
        yield url
        return
    if _PG_PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true needs PostgreSQL at {PG_URL}, but it is unreachable: {_PG_PROBLEM}")
        pytest.skip(f"PostgreSQL unreachable: {_PG_PROBLEM}")
    schema, url = _pg_session.new_schema()
    if not MIGRATE_EACH:
        _upgrade_from_head(monkeypatch, _heads, url, "postgresql")
    yield url
    _pg_session.drop_schema(schema)


def schema_of(url: str) -> str:
    """The schema of a PostgreSQL ``database_url``."""
    return re.search(r"search_path%3D(\w+)", url).group(1)


class StudySnapshots:
    """Databases left by a ``build(app)``, kept for the session per backend and name, so that each
    later test gets a private copy of the built study instead of building it again."""

    def __init__(self, tmp_path_factory, heads: _Heads, pg_session: _PgSession | None):
        self.tmp_path_factory = tmp_path_factory
        self.heads = heads
        self.pg_session = pg_session
        self.built: dict[tuple[str, str], tuple[str, object]] = {}

    def get(self, app, name: str, build):
        """``build(app)``'s result, with ``app``'s database as ``build`` left it: built in this very
        database the first time, copied from the snapshot after that."""
        from humanlike.server import database

        url = app.config["SQLALCHEMY_DATABASE_URI"]
        backend = "sqlite" if url.startswith("sqlite") else "postgresql"
        key = (backend, name)
        if key in self.built:
            where, result = self.built[key]
            database.dispose(app)
            if backend == "sqlite":
                path = url.removeprefix("sqlite:///")
                for suffix in ("-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
                shutil.copyfile(where, path)
            else:
                with self.pg_session.connect() as conn:
                    pg_copy_schema_data(conn, where, schema_of(url))
            return result
        result = build(app)
        database.dispose(app)
        if backend == "sqlite":
            path = url.removeprefix("sqlite:///")
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            where = str(self.tmp_path_factory.mktemp("study") / f"{name}.sqlite")
            shutil.copyfile(path, where)
        else:
            where, _ = self.pg_session.new_schema()
            self.heads.replay_into(where)
            with self.pg_session.connect() as conn:
                pg_copy_schema_data(conn, schema_of(url), where)
        self.built[key] = (where, result)
        return result


@pytest.fixture(scope="session")
def study_snapshots(tmp_path_factory, _heads, _pg_session) -> StudySnapshots:
    return StudySnapshots(tmp_path_factory, _heads, _pg_session)


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="session")
def chromium():
    """One headless Debian Chromium for the whole test session, driven by Playwright (one fixture
    for every folder: a second sync_playwright() in the same session fails inside its event loop)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make test` (it installs Debian's chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
