"""roles and study membership (issue 40): admin_user gets a role, an active flag and a
must-change-password flag; study_member holds who is a member of which experiment with which
permissions. Every existing admin becomes an owner (they could do everything before).

Revision ID: 0026
Revises: 0025
"""
from alembic import op
import sqlalchemy as sa

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('admin_user') as batch:
        batch.add_column(sa.Column('role', sa.String(length=16), nullable=False,
                                   server_default='owner'))
        batch.add_column(sa.Column('active', sa.Boolean(), nullable=False,
                                   server_default=sa.true()))
        batch.add_column(sa.Column('must_change_password', sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    op.execute("UPDATE admin_user SET role = 'owner'")
    op.create_table(
        'study_member',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('user_id', sa.Integer(), sa.ForeignKey('admin_user.id'), nullable=False),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('can_act', sa.Boolean(), nullable=False),
        sa.Column('can_spend', sa.Boolean(), nullable=False),
        sa.Column('can_reveal', sa.Boolean(), nullable=False),
        sa.Column('can_delete', sa.Boolean(), nullable=False),
        sa.Column('added_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('user_id', 'experiment_id', name='uq_study_member'),
    )
    op.create_index('ix_study_member_user_id', 'study_member', ['user_id'])
    op.create_index('ix_study_member_experiment_id', 'study_member', ['experiment_id'])


def downgrade():
    op.drop_index('ix_study_member_experiment_id', table_name='study_member')
    op.drop_index('ix_study_member_user_id', table_name='study_member')
    op.drop_table('study_member')
    with op.batch_alter_table('admin_user') as batch:
        batch.drop_column('must_change_password')
        batch.drop_column('active')
        batch.drop_column('role')
