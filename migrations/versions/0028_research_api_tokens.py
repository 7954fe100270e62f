"""api_token and api_idempotency (issue 40): the researcher API's personal tokens (only the
sha256 of each is stored, with its scopes, expiry and revocation) and the Idempotency-Key of each
action a token sent, with the answer replayed for a repeat.

Revision ID: 0028
Revises: 0027
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'api_token',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('user_id', sa.Integer(), sa.ForeignKey('admin_user.id'), nullable=False),
        sa.Column('name', sa.String(length=80), nullable=False),
        sa.Column('token_hash', sa.String(length=64), nullable=False),
        sa.Column('prefix', sa.String(length=12), nullable=False),
        sa.Column('scopes', sa.String(length=64), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint('token_hash'),
    )
    op.create_index('ix_api_token_user_id', 'api_token', ['user_id'])
    op.create_table(
        'api_idempotency',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('token_id', sa.Integer(), sa.ForeignKey('api_token.id'), nullable=False),
        sa.Column('key', sa.String(length=128), nullable=False),
        sa.Column('request_hash', sa.String(length=64), nullable=False),
        sa.Column('status', sa.Integer(), nullable=True),
        sa.Column('body', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()),
                                                 'postgresql'), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('token_id', 'key', name='uq_api_idempotency'),
    )
    op.create_index('ix_api_idempotency_token_id', 'api_idempotency', ['token_id'])


def downgrade():
    op.drop_index('ix_api_idempotency_token_id', table_name='api_idempotency')
    op.drop_table('api_idempotency')
    op.drop_index('ix_api_token_user_id', table_name='api_token')
    op.drop_table('api_token')
