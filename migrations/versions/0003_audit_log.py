"""Audit log of administrative actions (lock resets, deletions, approvals, payments).

Revision ID: 0003
Revises: 0002
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'audit_entry',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('time', sa.DateTime(timezone=True), nullable=False),
        sa.Column('actor', sa.String(length=120), nullable=False),
        sa.Column('action', sa.String(length=64), nullable=False),
        sa.Column('experiment', sa.String(length=64), nullable=True),
        sa.Column('target', sa.String(length=128), nullable=True),
        sa.Column('detail', JSON, nullable=True),
    )
    op.create_index('ix_audit_entry_time', 'audit_entry', ['time'])
    op.create_index('ix_audit_entry_action', 'audit_entry', ['action'])


def downgrade():
    op.drop_index('ix_audit_entry_action', table_name='audit_entry')
    op.drop_index('ix_audit_entry_time', table_name='audit_entry')
    op.drop_table('audit_entry')
