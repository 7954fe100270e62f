"""action_job, action_job_item: bulk actions run as background jobs (progress, lease, one row per
participant with its result).

Revision ID: 0024
Revises: 0023
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'action_job',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('action', sa.String(length=32), nullable=False),
        sa.Column('inputs', JSON, nullable=False),
        sa.Column('actor', sa.String(length=120), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('total', sa.Integer(), nullable=False),
        sa.Column('n_done', sa.Integer(), nullable=False),
        sa.Column('n_ok', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('lease_owner', sa.String(length=64), nullable=True),
        sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index('ix_action_job_experiment_id', 'action_job', ['experiment_id'])
    op.create_index('ix_action_job_status', 'action_job', ['status'])
    op.create_table(
        'action_job_item',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('job_id', sa.Integer(), sa.ForeignKey('action_job.id', ondelete='CASCADE'),
                  nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('participant', sa.String(length=64), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('ok', sa.Boolean(), nullable=True),
        sa.Column('result', JSON, nullable=True),
        sa.Column('attempted_at', sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint('job_id', 'position', name='uq_action_job_item'),
    )


def downgrade():
    op.drop_table('action_job_item')
    op.drop_index('ix_action_job_status', table_name='action_job')
    op.drop_index('ix_action_job_experiment_id', table_name='action_job')
    op.drop_table('action_job')
