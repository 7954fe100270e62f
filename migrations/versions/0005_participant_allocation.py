"""Each participant's allocation record: the counts it saw, the tied conditions, the tie-break seed.

Revision ID: 0005
Revises: 0004
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    with op.batch_alter_table('participant') as batch:
        batch.add_column(sa.Column('allocation', JSON, nullable=True))


def downgrade():
    with op.batch_alter_table('participant') as batch:
        batch.drop_column('allocation')
