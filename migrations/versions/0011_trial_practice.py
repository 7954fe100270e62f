"""trial.practice: a practice trial's flag as a column, so readers need not parse trial.design.

Backfilled from each stored design with the truthiness the readers used when they parsed it,
``bool(design.get('practice'))``: the database narrows the rows down to those whose design holds a
``practice`` value other than false or null (a few: the practice trials), and Python decides each.
New inserts set it from the timeline entry (``humanlike.server.participants.trial_store``).

Revision ID: 0011
Revises: 0010
"""
import json

from alembic import op
import sqlalchemy as sa

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

BATCH = 1000


def _candidates(conn):
    """(id, design as JSON text) of the trials whose design's practice is neither missing, false
    nor null."""
    if conn.dialect.name == 'postgresql':
        where = ("jsonb_typeof(design -> 'practice') <> 'null' "
                 "AND design -> 'practice' <> 'false'::jsonb")
    else:
        where = "json_type(design, '$.practice') NOT IN ('false', 'null')"
    return conn.execute(sa.text(
        f"SELECT id, CAST(design AS TEXT) FROM trial WHERE {where} ORDER BY id")).all()


def _practice(text):
    design = json.loads(text) if isinstance(text, str) else text
    return bool(design.get('practice')) if isinstance(design, dict) else False


def upgrade():
    op.add_column('trial', sa.Column('practice', sa.Boolean(), nullable=False,
                                     server_default=sa.false()))
    conn = op.get_bind()
    ids = [trial_id for trial_id, text in _candidates(conn) if _practice(text)]
    trial = sa.table('trial', sa.column('id', sa.Integer), sa.column('practice', sa.Boolean))
    for start in range(0, len(ids), BATCH):
        conn.execute(sa.update(trial).where(trial.c.id.in_(ids[start:start + BATCH]))
                     .values(practice=True))


def downgrade():
    with op.batch_alter_table('trial', schema=None) as batch_op:
        batch_op.drop_column('practice')
