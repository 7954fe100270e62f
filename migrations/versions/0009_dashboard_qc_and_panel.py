"""Dashboard: per-participant QC stored for sorting and filtering, and the live panel's result and
lease per experiment.

Revision ID: 0009
Revises: 0008
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'participant_qc',
        sa.Column('participant_id', sa.Integer(), sa.ForeignKey('participant.id'), primary_key=True),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('n_stored', sa.Integer(), nullable=False),
        sa.Column('last_trial_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('catch_accuracy', sa.Float(), nullable=True),
        sa.Column('repeat_reliability', sa.Float(), nullable=True),
        sa.Column('median_rt_ms', sa.Float(), nullable=True),
        sa.Column('too_fast_share', sa.Float(), nullable=True),
        sa.Column('n_blur', sa.Integer(), nullable=False),
        sa.Column('n_fullscreen_exit', sa.Integer(), nullable=False),
        sa.Column('qc_failed', sa.Boolean(), nullable=False),
        sa.Column('qc_reasons', sa.Text(), nullable=False),
        sa.Column('metrics', JSON, nullable=True),
        sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index('ix_participant_qc_experiment_id', 'participant_qc', ['experiment_id'])
    op.create_table(
        'panel_result',
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), primary_key=True),
        sa.Column('data_version', sa.String(length=200), nullable=True),
        sa.Column('computed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('seconds', sa.Float(), nullable=True),
        sa.Column('n_participants', sa.Integer(), nullable=True),
        sa.Column('result', JSON, nullable=True),
        sa.Column('lease_owner', sa.String(length=64), nullable=True),
        sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    )


def downgrade():
    op.drop_table('panel_result')
    op.drop_index('ix_participant_qc_experiment_id', table_name='participant_qc')
    op.drop_table('participant_qc')
