"""分析's rollups (issue #25): per conversation and per Japan day, kept current through a log of what each
write touched (``rollup_dirty``, filled by triggers); see core/store/rollups.py. Every existing conversation
and day is marked, so the first refresh counts them.

Revision ID: 0006
Revises: 0005
"""
from alembic import op

from core.store import rollups
from core.store.tables import metadata

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

TABLES = ("rollup_dirty", "rollup_conversations", "rollup_faq", "rollup_tasks", "rollup_methods", "rollup_errors",
          "rollup_latency", "rollup_versions")


def upgrade() -> None:
    conn = op.get_bind()
    for name in TABLES:  # declared once, in core/store/tables.py (with their indexes)
        metadata.tables[name].create(conn)
    rollups.create(conn)
    rollups.mark_everything(conn)


def downgrade() -> None:
    conn = op.get_bind()
    rollups.drop(conn)
    for name in reversed(TABLES):
        metadata.tables[name].drop(conn)
