"""participant.outcome: how each participant left the study (completed, no_consent,
display_unsuitable, failed_attention, refused_on_return), the declared exit it took.

Revision ID: 0027
Revises: 0026
"""
from alembic import op
import sqlalchemy as sa

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('participant') as batch:
        batch.add_column(sa.Column('outcome', sa.String(length=24), nullable=True))
    # participants who finished before outcomes existed completed; those who declined the consent
    # form have no declared outcome to name (their exit was not recorded apart from returning)
    op.execute("UPDATE participant SET outcome = 'completed' "
               "WHERE completed_at IS NOT NULL")


def downgrade():
    with op.batch_alter_table('participant') as batch:
        batch.drop_column('outcome')
