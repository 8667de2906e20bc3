"""分析's rollups (issue #25): a debug record marks its Japan day, not its UTC date, when its time is a stored
timestamp (``YYYYMMDDa`` / ``YYYYMMDDb``; core/store/rollups.py), so a write recounts one Japan day, not the
two its UTC date overlaps (between 00:00 and 09:00 Japan time one of them is the whole of yesterday).
Only the triggers change; marks already in the log keep their meaning.

Revision ID: 0009
Revises: 0008
"""
from alembic import op

from core.store import rollups

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    rollups.drop(conn)
    rollups.create(conn, record_ids=False)


def downgrade() -> None:
    conn = op.get_bind()
    rollups.drop(conn)
    rollups.create(conn, exact_days=False, record_ids=False)
    # a Japan-day mark as the UTC date it was made on (the older code recounts that date's two Japan days)
    conn.exec_driver_sql("UPDATE rollup_dirty SET day = substr(day, 1, 4) || '-' || substr(day, 5, 2) || '-' || "
                         "substr(day, 7, 2) WHERE length(day) = 9")
