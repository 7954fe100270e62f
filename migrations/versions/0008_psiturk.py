"""psiTurk compatibility: psiTurk assignments beside participants, and their data blob's increments
(trial records, events, question answers) as rows.

Revision ID: 0008
Revises: 0007
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'psiturk_assignment',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('participant_id', sa.Integer(), nullable=False),
        sa.Column('experiment_id', sa.Integer(), nullable=False),
        sa.Column('uniqueid', sa.String(length=260), nullable=False),
        sa.Column('assignmentid', sa.String(length=128), nullable=False),
        sa.Column('workerid', sa.String(length=128), nullable=False),
        sa.Column('hitid', sa.String(length=128), nullable=False),
        sa.Column('ipaddress', sa.String(length=128), nullable=True),
        sa.Column('browser', sa.String(length=128), nullable=True),
        sa.Column('platform', sa.String(length=128), nullable=True),
        sa.Column('language', sa.String(length=128), nullable=True),
        sa.Column('cond', sa.Integer(), nullable=True),
        sa.Column('counterbalance', sa.Integer(), nullable=True),
        sa.Column('codeversion', sa.String(length=128), nullable=True),
        sa.Column('beginhit', sa.DateTime(timezone=True), nullable=True),
        sa.Column('beginexp', sa.DateTime(timezone=True), nullable=True),
        sa.Column('endhit', sa.DateTime(timezone=True), nullable=True),
        sa.Column('bonus', sa.Float(), nullable=True),
        sa.Column('status', sa.Integer(), nullable=False),
        sa.Column('mode', sa.String(length=128), nullable=True),
        sa.Column('meta', JSON, nullable=True),
        sa.Column('trials_seen', sa.Integer(), nullable=False),
        sa.Column('events_seen', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['experiment_id'], ['experiment.id']),
        sa.ForeignKeyConstraint(['participant_id'], ['participant.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('participant_id'),
        sa.UniqueConstraint('uniqueid'),
    )
    op.create_index(op.f('ix_psiturk_assignment_experiment_id'), 'psiturk_assignment', ['experiment_id'])
    op.create_index(op.f('ix_psiturk_assignment_workerid'), 'psiturk_assignment', ['workerid'])
    for name, extra in (('psiturk_trial', [sa.Column('current_trial', sa.Integer(), nullable=True),
                                           sa.Column('record', sa.Text(), nullable=False),
                                           sa.Column('server_time', sa.DateTime(timezone=True),
                                                     nullable=False)]),
                        ('psiturk_event', [sa.Column('record', sa.Text(), nullable=False)])):
        op.create_table(
            name,
            sa.Column('id', sa.Integer(), nullable=False),
            sa.Column('assignment_id', sa.Integer(), nullable=False),
            sa.Column('position', sa.Integer(), nullable=False),
            *extra,
            sa.ForeignKeyConstraint(['assignment_id'], ['psiturk_assignment.id']),
            sa.PrimaryKeyConstraint('id'),
            sa.UniqueConstraint('assignment_id', 'position',
                                name='uq_psiturk_trial_pos' if name == 'psiturk_trial' else 'uq_psiturk_event_pos'),
        )
        op.create_index(op.f(f'ix_{name}_assignment_id'), name, ['assignment_id'])
    op.create_table(
        'psiturk_question',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('assignment_id', sa.Integer(), nullable=False),
        sa.Column('key', sa.String(length=500), nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('value', sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(['assignment_id'], ['psiturk_assignment.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('assignment_id', 'key', name='uq_psiturk_question_key'),
    )
    op.create_index(op.f('ix_psiturk_question_assignment_id'), 'psiturk_question', ['assignment_id'])


def downgrade():
    for name in ('psiturk_question', 'psiturk_event', 'psiturk_trial'):
        op.drop_index(op.f(f'ix_{name}_assignment_id'), table_name=name)
        op.drop_table(name)
    op.drop_index(op.f('ix_psiturk_assignment_workerid'), table_name='psiturk_assignment')
    op.drop_index(op.f('ix_psiturk_assignment_experiment_id'), table_name='psiturk_assignment')
    op.drop_table('psiturk_assignment')
