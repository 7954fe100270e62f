"""platform_event: webhook events from Prolific, kept once by their event id, ordered by when
they happened (server/tables/platform_events.py).

Revision ID: 0013
Revises: 0015 (0012 not landed; 0016 and 0015 landed before this one)
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

revision = '0013'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'platform_event',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('platform', sa.String(length=16), nullable=False),
        sa.Column('event_id', sa.String(length=128), nullable=False, unique=True),
        sa.Column('event_type', sa.String(length=64), nullable=False),
        sa.Column('resource_id', sa.String(length=128), nullable=False),
        sa.Column('status', sa.String(length=32), nullable=True),
        sa.Column('happened_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('outcome', sa.String(length=16), nullable=False),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=True),
        sa.Column('detail', sa.JSON().with_variant(JSONB(), 'postgresql'), nullable=True),
    )
    op.create_index('ix_platform_event_resource_id', 'platform_event', ['resource_id'])
    op.create_index('ix_platform_event_experiment_id', 'platform_event', ['experiment_id'])


def downgrade():
    op.drop_index('ix_platform_event_experiment_id', table_name='platform_event')
    op.drop_index('ix_platform_event_resource_id', table_name='platform_event')
    op.drop_table('platform_event')
