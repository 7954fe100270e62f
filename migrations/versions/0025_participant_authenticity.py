"""participant_authenticity: the authenticity screen's verdict, reasons and signals per
participant, for the dashboard and the circuit breaker.

Revision ID: 0025
Revises: 0024
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'participant_authenticity',
        sa.Column('participant_id', sa.Integer(), sa.ForeignKey('participant.id'),
                  primary_key=True, autoincrement=False),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('verdict', sa.String(length=16), nullable=False),
        sa.Column('reasons', sa.Text(), nullable=False),
        sa.Column('signals', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'),
                  nullable=True),
        sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index('ix_participant_authenticity_experiment_id', 'participant_authenticity',
                    ['experiment_id'])


def downgrade():
    op.drop_index('ix_participant_authenticity_experiment_id', table_name='participant_authenticity')
    op.drop_table('participant_authenticity')
