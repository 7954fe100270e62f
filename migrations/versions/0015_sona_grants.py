"""sona_grant: SONA's server-side credit grant per completed participant (state, attempts, reply).

Revision ID: 0015
Revises: 0016 (0012-0014 reserved, not landed; 0016 landed before this one)
"""
from alembic import op
import sqlalchemy as sa

revision = '0015'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'sona_grant',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('participant_id', sa.Integer(), sa.ForeignKey('participant.id'), nullable=False,
                  unique=True),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('granted_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('reply', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index('ix_sona_grant_experiment_id', 'sona_grant', ['experiment_id'])
    op.create_index('ix_sona_grant_state', 'sona_grant', ['state'])


def downgrade():
    op.drop_index('ix_sona_grant_state', table_name='sona_grant')
    op.drop_index('ix_sona_grant_experiment_id', table_name='sona_grant')
    op.drop_table('sona_grant')
