"""分析's rollups (issue #25): the model calls' rollups of today count per UTC hour (``hour``: ``YYYY-MM-DDTHH``,
the hour a task started for ``rollup_tasks`` / ``rollup_methods``, the hour of the call for ``rollup_errors`` /
``rollup_latency``; ``""`` for a day before today, counted whole; indexed with the day), so 分析 cuts today's calls
at the last whole hour as it cuts today's conversations at the last ten minutes: after a chat turn it reads the
calls of the last hour or two, not a busy day's thousands again. The rows counted per day cannot be split into
hours: the days they counted are marked and the rows deleted, so the first refresh counts them again (a 30k
store: 10–14 s, once).
See core/store/rollups.py (``EARLIER``, ``earlier_before``).

Revision ID: 0013
Revises: 0012
"""
import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

TABLES = ("rollup_tasks", "rollup_methods", "rollup_errors", "rollup_latency")


def _recount_every_day(conn: sa.Connection) -> None:
    """The Japan days counted so far marked (``YYYYMMDDa``: that Japan day) and their rows deleted: the next
    refresh counts them again (a day not counted yet keeps its own marks)."""
    days = " UNION ".join(f"SELECT day FROM {table}" for table in TABLES)
    conn.exec_driver_sql(f"INSERT INTO rollup_dirty(day) SELECT REPLACE(day, '-', '') || 'a' FROM ({days}) counted")
    for table in TABLES:
        conn.exec_driver_sql(f"DELETE FROM {table}")


def upgrade() -> None:
    conn = op.get_bind()  # 0006 made the tables from the current tables.py: the column may be there already
    inspector = sa.inspect(conn)
    for table in TABLES:
        if "hour" in {c["name"] for c in inspector.get_columns(table)}:
            continue
        op.add_column(table, sa.Column("hour", sa.String(13), nullable=False, server_default=""))
        op.drop_index(f"ix_{table}_day", table_name=table)
        op.create_index(f"ix_{table}_day_hour", table, ["day", "hour"])
    _recount_every_day(conn)


def downgrade() -> None:
    conn = op.get_bind()
    for table in TABLES:
        op.drop_index(f"ix_{table}_day_hour", table_name=table)
        op.drop_column(table, "hour")
        op.create_index(f"ix_{table}_day", table, ["day"])
    _recount_every_day(conn)
