"""participant.attempt: how many times a block was restarted, so a trial answered before the restart
(still queued in the browser) is kept aside instead of stored as the repeated block's answer.

Revision ID: 0019
Revises: 0018
"""
from alembic import op
import sqlalchemy as sa

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('participant',
                  sa.Column('attempt', sa.Integer(), nullable=False, server_default='0'))


def downgrade():
    with op.batch_alter_table('participant') as batch:
        batch.drop_column('attempt')
