"""breaker_count and breaker_source: the circuit breaker's error tally shared by every app process
(answers and 5xx answers of the participant API per minute) and the network each finished
participant completed from (a keyed hash), so one source counts once.

Revision ID: 0022
Revises: 0021
"""
from alembic import op
import sqlalchemy as sa

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'breaker_count',
        sa.Column('minute', sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column('answers', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('errors', sa.Integer(), nullable=False, server_default='0'),
    )
    op.create_table(
        'breaker_source',
        sa.Column('participant_id', sa.Integer(),
                  sa.ForeignKey('participant.id', ondelete='CASCADE'), primary_key=True,
                  autoincrement=False),
        sa.Column('source', sa.String(length=64), nullable=False),
        sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index('ix_breaker_source_seen_at', 'breaker_source', ['seen_at'])


def downgrade():
    op.drop_index('ix_breaker_source_seen_at', table_name='breaker_source')
    op.drop_table('breaker_source')
    op.drop_table('breaker_count')
