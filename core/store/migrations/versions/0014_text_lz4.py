"""PostgreSQL: the store's text columns compressed with lz4 instead of pglz (issue #25). A value of a row over
about 2 kB is compressed when it is written, in the database server's process, on the request's path: a chat
turn rewrites the conversation's state (≈ 7,000 characters) and stores its model calls' masked records
(≈ 12,000 characters, ≈ 27 kB each). Measured on PostgreSQL 15 (``bench.api_turns``-sized record, one
statement at a time): pglz 0.72 ms an insert, lz4 0.33 ms, for 9 % more bytes on disk. Values stored before
stay pglz (both are read alike); only new writes use lz4.

Metadata only (``ALTER TABLE … SET COMPRESSION``: no table is rewritten), and only the store's own tables (another
application's table in the same schema is left alone). Skipped on SQLite, and on a PostgreSQL server without lz4
(before 14, or built without it): there the store keeps pglz.

Revision ID: 0014
Revises: 0013
"""
import sqlalchemy as sa
from alembic import op

from core.store.tables import metadata

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def has_lz4(conn: sa.Connection) -> bool:
    """Whether this PostgreSQL server can compress with lz4 (``default_toast_compression`` offers it)."""
    if conn.dialect.name != "postgresql":
        return False
    return bool(conn.exec_driver_sql(
        "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'").scalar())


def text_columns(conn: sa.Connection) -> list[tuple[str, str]]:
    """Every ``text`` column of the store's own tables (``core.store.tables``) in this schema, as (table, column):
    a table of anything else sharing the database is left alone."""
    ours = sorted(metadata.tables)
    return [(table, column) for table, column in conn.execute(sa.text(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND data_type = 'text' AND table_name IN :ours ORDER BY table_name, column_name"
    ).bindparams(sa.bindparam("ours", expanding=True)), {"ours": ours})]


def _set(method: str) -> None:
    conn = op.get_bind()
    if not has_lz4(conn):
        return
    for table, column in text_columns(conn):
        conn.exec_driver_sql(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')


def upgrade() -> None:
    _set("lz4")


def downgrade() -> None:
    _set("default")
