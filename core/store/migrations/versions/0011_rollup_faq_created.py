"""分析's rollups (issue #25): an FAQ rollup row carries its conversation's creation time and provider
(``rollup_faq.created_at`` / ``provider``, indexed by time), so the FAQ outcomes and not-found questions of a
range are one index range read of ``rollup_faq``, not a lookup per conversation of the range through
``rollup_conversations`` (today's ≈ 800 conversations: ≈ 1.5 ms of PostgreSQL's time after every write). The
rows already counted take both from their conversation's rollup row. See core/store/rollups.py.

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()  # 0006 made the table from the current tables.py: the columns may be there already
    have = {c["name"] for c in sa.inspect(conn).get_columns("rollup_faq")}
    if "created_at" not in have:
        op.add_column("rollup_faq", sa.Column("created_at", sa.String(32), nullable=True))
    if "provider" not in have:
        op.add_column("rollup_faq", sa.Column("provider", sa.String(40), nullable=True))
    conn.exec_driver_sql(
        "UPDATE rollup_faq SET "
        "created_at = (SELECT c.created_at FROM rollup_conversations c WHERE c.id = rollup_faq.conversation_id), "
        "provider = (SELECT c.provider FROM rollup_conversations c WHERE c.id = rollup_faq.conversation_id)")
    if "ix_rollup_faq_created" not in {i["name"] for i in sa.inspect(conn).get_indexes("rollup_faq")}:
        op.create_index("ix_rollup_faq_created", "rollup_faq", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_rollup_faq_created", table_name="rollup_faq")
    op.drop_column("rollup_faq", "provider")
    op.drop_column("rollup_faq", "created_at")
