"""PostgreSQL: vacuum the trial table after every 1% of inserted rows (default 20%), so its
visibility map stays current and the dashboard's per-participant trial counts are index-only scans.

The experiment page counts each listed participant's stored trials and the panel worker counts every
participant's; both read only the (participant_id, trial_index) index when the rows are marked
all-visible, which only a vacuum does. Trials are only ever inserted, so autovacuum's pass is cheap
(no dead rows); with the default, a study of 1.6 M trials left up to 330,000 of the newest unmarked
and a page listing 50 active participants read 41,000 table rows (200 ms instead of 5 ms).
SQLite: nothing to do.

Revision ID: 0010
Revises: 0009
"""
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE trial SET (autovacuum_vacuum_insert_scale_factor = 0.01, '
                   'autovacuum_vacuum_insert_threshold = 5000)')


def downgrade():
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE trial RESET (autovacuum_vacuum_insert_scale_factor, '
                   'autovacuum_vacuum_insert_threshold)')
