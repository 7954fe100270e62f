"""Bonus payments with idempotency keys, and a researcher's include/exclude override per participant.

Revision ID: 0006
Revises: 0005
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'payment',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('participant_id', sa.Integer(), sa.ForeignKey('participant.id'), nullable=False),
        sa.Column('reason', sa.String(length=200), nullable=False),
        sa.Column('amount', sa.Numeric(10, 2), nullable=False),
        sa.Column('idempotency_key', sa.String(length=64), nullable=False, unique=True),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('platform_ref', sa.String(length=128), nullable=True),
        sa.Column('reply', JSON, nullable=True),
        sa.Column('actor', sa.String(length=120), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('paid_at', sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint('participant_id', 'reason', name='uq_payment_participant_reason'),
    )
    op.create_index('ix_payment_participant_id', 'payment', ['participant_id'])
    # plain columns without constraints: added in place on both backends (no batch copy)
    op.add_column('participant', sa.Column('analysis_override', sa.String(length=16), nullable=True))
    op.add_column('participant', sa.Column('analysis_override_reason', sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table('participant') as batch:
        batch.drop_column('analysis_override_reason')
        batch.drop_column('analysis_override')
    op.drop_index('ix_payment_participant_id', table_name='payment')
    op.drop_table('payment')
