"""Each trial stores its design: trial.design, backfilled from the participants' stored timelines.

Practice entries used to be named "<block>-practice"; they now keep their block's name (with
practice = true), so the backfill also renames them in the stored timelines and trial.block.

Revision ID: 0002
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')
INTERNAL_KEYS = ("stimulus_id",)  # as humanlike.server.study.timeline.INTERNAL_KEYS at this revision
SUFFIX = "-practice"

participant = sa.table("participant", sa.column("id", sa.Integer), sa.column("timeline", JSON))
trial = sa.table(
    "trial", sa.column("id", sa.Integer), sa.column("participant_id", sa.Integer),
    sa.column("trial_index", sa.Integer), sa.column("block", sa.String),
    sa.column("design", JSON),
)


def _rename_practice(entries):
    """Strip the old "-practice" suffix from practice entries; True when anything changed."""
    changed = False
    for entry in entries:
        block = entry.get("block")
        if entry.get("practice") and isinstance(block, str) and block.endswith(SUFFIX):
            entry["block"] = block[: -len(SUFFIX)]
            changed = True
    return changed


def _backfill(conn):
    """Copy each trial's timeline entry (without internal keys) into trial.design."""
    ids = conn.execute(sa.select(participant.c.id).order_by(participant.c.id)).scalars().all()
    set_design = (
        sa.update(trial)
        .where(trial.c.id == sa.bindparam("trial_id"))
        .values(design=sa.bindparam("design"), block=sa.bindparam("new_block"))
    )
    for pid in ids:
        timeline = conn.execute(
            sa.select(participant.c.timeline).where(participant.c.id == pid)
        ).scalar_one()
        entries = (timeline or {}).get("trials", [])
        if _rename_practice(entries):
            conn.execute(sa.update(participant).where(participant.c.id == pid)
                         .values(timeline=timeline))
        rows = conn.execute(
            sa.select(trial.c.id, trial.c.trial_index).where(trial.c.participant_id == pid)
        ).all()
        params = [
            {"trial_id": trial_id,
             "design": {k: v for k, v in entries[index].items() if k not in INTERNAL_KEYS},
             "new_block": entries[index].get("block")}
            for trial_id, index in rows if 0 <= index < len(entries)
        ]
        if params:
            conn.execute(set_design, params)
    # a trial without a timeline entry (none are expected) keeps an empty design
    conn.execute(sa.update(trial).where(trial.c.design.is_(None)).values(design={}))


def upgrade():
    with op.batch_alter_table('trial', schema=None) as batch_op:
        batch_op.add_column(sa.Column('design', JSON, nullable=True))
    _backfill(op.get_bind())
    with op.batch_alter_table('trial', schema=None) as batch_op:
        batch_op.alter_column('design', existing_type=JSON, nullable=False)


def downgrade():
    with op.batch_alter_table('trial', schema=None) as batch_op:
        batch_op.drop_column('design')
