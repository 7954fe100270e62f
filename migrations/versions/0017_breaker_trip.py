"""breaker_trip: the quality circuit breaker's trips (rules fired with their numbers, what the
platform was told, the researcher's resume).

Revision ID: 0017
Revises: 0013
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0017'
down_revision = '0013'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'breaker_trip',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('tripped_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('numbers', JSON, nullable=False),
        sa.Column('platform_action', sa.Text(), nullable=True),
        sa.Column('resumed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('resumed_by', sa.String(length=120), nullable=True),
    )
    op.create_index('ix_breaker_trip_experiment_id', 'breaker_trip', ['experiment_id'])


def downgrade():
    op.drop_index('ix_breaker_trip_experiment_id', table_name='breaker_trip')
    op.drop_table('breaker_trip')
