"""Versioned specs: a spec_version snapshot table and participant.spec_version_id, backfilled with
one version per existing experiment (its stored spec; texts and stimuli unknown, so NULL).

Revision ID: 0004
Revises: 0003
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')

experiment = sa.table("experiment", sa.column("id", sa.Integer), sa.column("spec", JSON),
                      sa.column("spec_hash", sa.String), sa.column("created_at", sa.DateTime))
spec_version = sa.table("spec_version", sa.column("id", sa.Integer),
                        sa.column("experiment_id", sa.Integer), sa.column("hash", sa.String),
                        sa.column("spec", JSON), sa.column("created_at", sa.DateTime))
participant = sa.table("participant", sa.column("experiment_id", sa.Integer),
                       sa.column("spec_version_id", sa.Integer))


def upgrade():
    op.create_table(
        'spec_version',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('experiment_id', sa.Integer(), sa.ForeignKey('experiment.id'), nullable=False),
        sa.Column('hash', sa.String(length=64), nullable=False),
        sa.Column('spec', JSON, nullable=False),
        sa.Column('texts', JSON, nullable=True),
        sa.Column('stimuli', JSON, nullable=True),
        sa.Column('source', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('experiment_id', 'hash', name='uq_spec_version_hash'),
    )
    op.create_index('ix_spec_version_experiment_id', 'spec_version', ['experiment_id'])
    conn = op.get_bind()
    if conn.dialect.name == 'sqlite':
        # SQLite adds a referencing column in place (a batch copy would trip the FKs to participant)
        op.execute('ALTER TABLE participant ADD COLUMN spec_version_id INTEGER '
                   'REFERENCES spec_version (id)')
    else:
        op.add_column('participant', sa.Column('spec_version_id', sa.Integer(), nullable=True))
        op.create_foreign_key('fk_participant_spec_version', 'participant', 'spec_version',
                              ['spec_version_id'], ['id'])
    op.create_index('ix_participant_spec_version_id', 'participant', ['spec_version_id'])
    for exp in conn.execute(sa.select(experiment)).mappings().all():
        conn.execute(sa.insert(spec_version).values(
            experiment_id=exp["id"], hash=exp["spec_hash"], spec=exp["spec"],
            created_at=exp["created_at"]))
        version_id = conn.execute(sa.select(spec_version.c.id).where(
            spec_version.c.experiment_id == exp["id"])).scalar_one()
        conn.execute(sa.update(participant).where(participant.c.experiment_id == exp["id"])
                     .values(spec_version_id=version_id))


def downgrade():
    op.drop_index('ix_participant_spec_version_id', table_name='participant')
    if op.get_bind().dialect.name == 'sqlite':
        op.execute('PRAGMA foreign_keys=OFF')
        with op.batch_alter_table('participant') as batch:
            batch.drop_column('spec_version_id')
        op.execute('PRAGMA foreign_keys=ON')
    else:
        op.drop_constraint('fk_participant_spec_version', 'participant', type_='foreignkey')
        op.drop_column('participant', 'spec_version_id')
    op.drop_index('ix_spec_version_experiment_id', table_name='spec_version')
    op.drop_table('spec_version')
