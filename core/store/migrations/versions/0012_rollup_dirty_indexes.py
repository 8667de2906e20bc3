"""分析's rollups (issue #25): the marks of ``rollup_dirty`` indexed by conversation, by day and by record
(partial indexes: only marks that name one), so a backlog of marks (writes no refresh has taken yet: after an
upgrade, or days of API traffic while nobody opened 分析) is not scanned once per batch or per record:

* a refresh takes each batch's marks (``DELETE … WHERE conversation_id IN … OR day IN …``) by the first two;
  before, each batch scanned the whole log (a 30k store's catch-up: 9.7 of its 19 s on PostgreSQL);
* a day's recount leaves out the records still marked with one lookup each in the third; before,
  ``id NOT IN (SELECT record_id …)`` scanned the whole backlog once per record on PostgreSQL when that list
  outgrew ``work_mem`` (a store seeded with 30k conversations: over 15 minutes for its first refresh).

See core/store/rollups.py (``PENDING``).

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

INDEXES = {"ix_rollup_dirty_conversation": "conversation_id", "ix_rollup_dirty_day": "day",
           "ix_rollup_dirty_record": "record_id"}


def upgrade() -> None:
    conn = op.get_bind()  # 0006 made the table from the current tables.py: the indexes may be there already
    have = {i["name"] for i in sa.inspect(conn).get_indexes("rollup_dirty")}
    for name, column in INDEXES.items():
        if name not in have:
            where = sa.text(f"{column} IS NOT NULL")
            op.create_index(name, "rollup_dirty", [column], sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="rollup_dirty")
