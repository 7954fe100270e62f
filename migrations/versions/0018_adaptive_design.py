"""adaptive_design: adaptive allocation's weights, one row per version the panel worker computed.

Revision ID: 0018
Revises: 0017
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'adaptive_design',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('weights', JSON, nullable=False),
        sa.Column('weights_hash', sa.String(length=64), nullable=False),
        sa.Column('undecided', JSON, nullable=False),
        sa.Column('n_participants', sa.Integer(), nullable=False),
        sa.UniqueConstraint('experiment_id', 'version'),
    )
    op.create_index('ix_adaptive_design_experiment_id', 'adaptive_design', ['experiment_id'])


def downgrade():
    op.drop_index('ix_adaptive_design_experiment_id', table_name='adaptive_design')
    op.drop_table('adaptive_design')
