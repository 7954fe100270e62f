"""The migrations build exactly the schema the models declare; the audit log records actions."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from humanlike.server.audit import record
from humanlike.server.extensions import db
from humanlike.server.tables.core import AuditEntry


def test_the_migrated_schema_matches_the_models(app):
    with app.app_context(), db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": False})
        differences = compare_metadata(context, db.metadata)
    # tables and columns must agree; alembic reports index naming noise on some backends
    structural = [d for d in differences if d[0] in ("add_table", "remove_table", "add_column",
                                                       "remove_column")]
    assert structural == []


def test_an_audit_entry_is_stored_with_its_actor_action_and_detail(app):
    with app.app_context():
        record("cli:tester", "reset_lock", experiment="small", target="p1",
               detail={"reason": "browser crashed"})
        db.session.commit()
        row = db.session.execute(sa.select(AuditEntry)).scalar_one()
    assert (row.actor, row.action, row.experiment, row.target) == (
        "cli:tester", "reset_lock", "small", "p1")
    assert row.detail == {"reason": "browser crashed"} and row.time is not None


def test_postgresql_vacuums_the_trial_table_after_one_percent_of_inserts(app):
    """Migration 0010: the trial table's autovacuum runs after 1% of inserted rows, keeping the
    dashboard's trial counts index-only scans (SQLite has no such setting)."""
    with app.app_context(), db.engine.connect() as conn:
        if conn.dialect.name != "postgresql":
            pytest.skip("SQLite has no autovacuum")
        options = conn.execute(sa.text(
            "SELECT reloptions FROM pg_class WHERE oid = 'trial'::regclass")).scalar_one()
    assert set(options) == {"autovacuum_vacuum_insert_scale_factor=0.01",
                            "autovacuum_vacuum_insert_threshold=5000"}
