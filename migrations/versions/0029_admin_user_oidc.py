"""admin_user.email, oidc_issuer, oidc_subject (issue 40 item 3): the email an owner invited a
login by, and the OpenID Connect provider's ``iss`` + ``sub`` pair that the first sign-in with that
verified email binds to the login (unique together: one person at one provider is one login).

Revision ID: 0029
Revises: 0028
"""
from alembic import op
import sqlalchemy as sa

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('admin_user') as batch:
        batch.add_column(sa.Column('email', sa.String(length=254), nullable=True))
        batch.add_column(sa.Column('oidc_issuer', sa.String(length=255), nullable=True))
        batch.add_column(sa.Column('oidc_subject', sa.String(length=255), nullable=True))
        batch.create_unique_constraint('uq_admin_user_oidc', ['oidc_issuer', 'oidc_subject'])


def downgrade():
    with op.batch_alter_table('admin_user') as batch:
        batch.drop_constraint('uq_admin_user_oidc', type_='unique')
        batch.drop_column('oidc_subject')
        batch.drop_column('oidc_issuer')
        batch.drop_column('email')
