"""分析's rollups (issue #25): an inserted debug record's day mark names the record (``rollup_dirty.record_id``),
so a refresh adds what the record changed to its Japan day (its conversation's calls of that day counted
with and without it) instead of recounting the whole day; an update or delete still recounts the day. See
core/store/rollups.py.

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

from core.store import rollups

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    if "record_id" not in {c["name"] for c in sa.inspect(conn).get_columns("rollup_dirty")}:
        op.add_column("rollup_dirty", sa.Column("record_id", sa.Integer, nullable=True))
    rollups.drop(conn)
    rollups.create(conn)


def downgrade() -> None:
    conn = op.get_bind()
    rollups.drop(conn)
    rollups.create(conn, record_ids=False)
    op.drop_column("rollup_dirty", "record_id")  # a pending mark keeps its day: that day is recounted
