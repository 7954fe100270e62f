"""participant.simulated: a rehearsal participant (``humanlike simulate`` with the researcher's
rehearsal key), recorded by the server at arrival; out of the analysed set unless asked for.

Revision ID: 0020
Revises: 0019
"""
from alembic import op
import sqlalchemy as sa

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('participant',
                  sa.Column('simulated', sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade():
    with op.batch_alter_table('participant') as batch:
        batch.drop_column('simulated')
