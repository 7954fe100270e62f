"""The experiment's listing on its recruitment platform: Prolific study id or MTurk HIT id, and
what humanlike last learnt about it (sandbox or live, status, last sync).

Revision ID: 0007
Revises: 0006
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    # plain nullable columns: added in place on both backends (no batch copy)
    op.add_column('experiment', sa.Column('recruitment_ref', sa.String(length=128), nullable=True))
    op.add_column('experiment', sa.Column('recruitment_meta', JSON, nullable=True))


def downgrade():
    with op.batch_alter_table('experiment') as batch:
        batch.drop_column('recruitment_meta')
        batch.drop_column('recruitment_ref')
