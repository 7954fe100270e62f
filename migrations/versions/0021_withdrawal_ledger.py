"""withdrawal: the withdrawal ledger (keyed hashes of a deleted participant's ids, its status and
whether its pay is still owed), re-applied after a restore (server/rights/ledger.py).

Revision ID: 0021
Revises: 0020
"""
from alembic import op
import sqlalchemy as sa

revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'withdrawal',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('experiment', sa.String(length=64), nullable=False),
        sa.Column('action', sa.String(length=32), nullable=False),
        sa.Column('platform', sa.String(length=16), nullable=False),
        sa.Column('public_id_hmac', sa.String(length=64), nullable=False),
        sa.Column('platform_id_hmac', sa.String(length=64), nullable=True),
        sa.Column('session_id_hmac', sa.String(length=64), nullable=True),
        sa.Column('phase', sa.String(length=32), nullable=True),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('owed', sa.Boolean(), nullable=False),
        sa.Column('settled_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('settlement', sa.String(length=64), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('experiment', 'public_id_hmac', name='uq_withdrawal_public_id'),
    )
    op.create_index('ix_withdrawal_experiment', 'withdrawal', ['experiment'])
    op.create_index('ix_withdrawal_platform_id_hmac', 'withdrawal', ['platform_id_hmac'])
    op.create_index('ix_withdrawal_session_id_hmac', 'withdrawal', ['session_id_hmac'])
    # withdrawals made before the ledger stay refused through their audit entries' HMAC


def downgrade():
    op.drop_index('ix_withdrawal_session_id_hmac', table_name='withdrawal')
    op.drop_index('ix_withdrawal_platform_id_hmac', table_name='withdrawal')
    op.drop_index('ix_withdrawal_experiment', table_name='withdrawal')
    op.drop_table('withdrawal')
