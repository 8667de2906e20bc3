"""分析's rollups (issue #25): the marks of inserted debug records are indexed by record
(``ix_rollup_dirty_record``, partial: only marks that name a record), so a day's recount leaves out the records
still marked with one index lookup each. Before, ``id NOT IN (SELECT record_id FROM rollup_dirty …)`` scanned
the whole backlog of marks once per record on PostgreSQL when that list outgrew ``work_mem`` (a store seeded
with 30k conversations: over 15 minutes for its first refresh). See core/store/rollups.py (``PENDING``).

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()  # 0006 made the table from the current tables.py: the index may be there already
    if "ix_rollup_dirty_record" not in {i["name"] for i in sa.inspect(conn).get_indexes("rollup_dirty")}:
        where = sa.text("record_id IS NOT NULL")
        op.create_index("ix_rollup_dirty_record", "rollup_dirty", ["record_id"], sqlite_where=where,
                        postgresql_where=where)


def downgrade() -> None:
    op.drop_index("ix_rollup_dirty_record", table_name="rollup_dirty")
