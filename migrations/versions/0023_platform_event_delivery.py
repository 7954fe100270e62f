"""platform_event.delivery: a digest of the delivery's signature, unique, so a captured webhook
delivery replayed under a new (unsigned) X-Event-ID is recognised and not kept again
(server/sources/prolific_events.py).

Revision ID: 0023
Revises: 0022
"""
from alembic import op
import sqlalchemy as sa

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('platform_event', sa.Column('delivery', sa.String(length=64), nullable=True))
    op.create_index('ix_platform_event_delivery', 'platform_event', ['delivery'], unique=True)


def downgrade():
    op.drop_index('ix_platform_event_delivery', table_name='platform_event')
    with op.batch_alter_table('platform_event') as batch:
        batch.drop_column('delivery')
