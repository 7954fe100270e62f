"""display_calibration: each participant's measured display before the first trial (refresh rate,
virtual-chinrest calibration, rendered stimulus size, whether the display met the spec).

Revision ID: 0016
Revises: 0011
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0016'
down_revision = '0011'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade():
    op.create_table(
        'display_calibration',
        sa.Column('id', sa.Integer(), primary_key=True),
        sa.Column('participant_id', sa.Integer(), sa.ForeignKey('participant.id'), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('refresh_hz', sa.Float(), nullable=False),
        sa.Column('frame_ms', sa.Float(), nullable=False),
        sa.Column('n_intervals', sa.Integer(), nullable=False),
        sa.Column('px_per_mm', sa.Float(), nullable=True),
        sa.Column('viewing_distance_mm', sa.Float(), nullable=True),
        sa.Column('px_per_deg', sa.Float(), nullable=True),
        sa.Column('image_height_px', sa.Integer(), nullable=True),
        sa.Column('image_height_deg', sa.Float(), nullable=True),
        sa.Column('window_width', sa.Integer(), nullable=True),
        sa.Column('window_height', sa.Integer(), nullable=True),
        sa.Column('device_pixel_ratio', sa.Float(), nullable=True),
        sa.Column('suitable', sa.Boolean(), nullable=False),
        sa.Column('reason', sa.String(length=64), nullable=True),
        sa.Column('detail', JSON, nullable=True),
    )
    op.create_index('ix_display_calibration_participant_id', 'display_calibration',
                    ['participant_id'])


def downgrade():
    op.drop_index('ix_display_calibration_participant_id', table_name='display_calibration')
    op.drop_table('display_calibration')
