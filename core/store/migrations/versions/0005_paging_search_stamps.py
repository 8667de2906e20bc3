"""pages that stay fast as the store grows: indexes for every filter, analytic columns read once, the
library's full-text index, change stamps

* turns: ``mode`` and ``citations`` (read from turn_json / the entry when written), backfilled;
* debug_records: ``task``, ``method``, ``error_type``, ``prompt_version``, ``kind``, ``attempt``,
  ``latency_ms`` (read from the record when stored), backfilled; one index per debug-log filter;
* indexes: conversations by creation time (分析's period), entries by update time, contract type and
  conversation, bookings by creation time, urgency and conversation;
* ``knowledge_search``: bigram full-text index of the library (FTS5 / tsvector + GIN), filled;
* ``store_stamps`` (SQLite) / ``stamp_<table>`` sequences (PostgreSQL) and their triggers.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

from core.debuglog import record_columns
from core.store import search, stamps
from core.store.base import derived_turn_columns, loads
from core.store.tables import DEBUG_FILTER_COLUMNS

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

BATCH = 2000
TURN_COLUMNS = ("mode", "citations")
DEBUG_COLUMNS = ("task", "method", "error_type", "prompt_version", "kind", "attempt", "latency_ms")


def _backfill(conn, table: str, source: str, columns, derive) -> None:
    """Fill ``columns`` of every row of ``table`` from ``derive(row)``, ``BATCH`` rows at a time."""
    last = 0
    assignments = ", ".join(f"{c} = :{c}" for c in columns)
    update = sa.text(f"UPDATE {table} SET {assignments} WHERE id = :row_id")
    while True:
        rows = conn.execute(sa.text(f"SELECT id, {source} FROM {table} WHERE id > :last ORDER BY id LIMIT {BATCH}"),
                            {"last": last}).all()
        if not rows:
            return
        conn.execute(update, [{**derive(row), "row_id": row[0]} for row in rows])
        last = rows[-1][0]


def _turn(row) -> dict:
    return derived_turn_columns(row[1], row[2])


def _debug(row) -> dict:
    record = loads(row[1], {})
    return record_columns(record if isinstance(record, dict) else {})


def upgrade() -> None:
    conn = op.get_bind()
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('mode', sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column('citations', sa.Integer(), nullable=True))
    with op.batch_alter_table('debug_records', schema=None) as batch_op:
        batch_op.add_column(sa.Column('task', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('method', sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column('error_type', sa.String(length=80), nullable=True))
        batch_op.add_column(sa.Column('prompt_version', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('kind', sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column('attempt', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('latency_ms', sa.Float(), nullable=True))
    _backfill(conn, "turns", "turn_json, entry", TURN_COLUMNS, _turn)
    _backfill(conn, "debug_records", "record", DEBUG_COLUMNS, _debug)

    with op.batch_alter_table('debug_records', schema=None) as batch_op:
        for name in DEBUG_FILTER_COLUMNS:
            batch_op.create_index(f'ix_debug_records_{name}', [name, 'id'], unique=False)
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.create_index('ix_conversations_created', ['created_at'], unique=False)
    with op.batch_alter_table('knowledge_entries', schema=None) as batch_op:
        batch_op.create_index('ix_entries_updated', ['updated_at', 'id'], unique=False)
        batch_op.create_index('ix_entries_contract_type', ['contract_type', 'updated_at'], unique=False)
        batch_op.create_index('ix_entries_conversation', ['conversation_id', 'slot'], unique=False)
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.create_index('ix_bookings_created', ['created_at'], unique=False)
        batch_op.create_index('ix_bookings_urgency', ['urgency', 'created_at'], unique=False)
        batch_op.create_index('ix_bookings_conversation', ['conversation_id'], unique=False)

    search.create(conn)
    search.rebuild(conn)
    if conn.dialect.name == "sqlite":
        op.create_table('store_stamps',
                        sa.Column('name', sa.String(length=40), nullable=False),
                        sa.Column('value', sa.Integer(), nullable=False),
                        sa.PrimaryKeyConstraint('name'))
    stamps.create(conn)
    if conn.dialect.name == "postgresql":  # fresh statistics for the new indexes and columns
        conn.exec_driver_sql("ANALYZE")


def downgrade() -> None:
    conn = op.get_bind()
    stamps.drop(conn)
    if conn.dialect.name == "sqlite":
        op.drop_table('store_stamps')
    search.drop(conn)
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.drop_index('ix_bookings_conversation')
        batch_op.drop_index('ix_bookings_urgency')
        batch_op.drop_index('ix_bookings_created')
    with op.batch_alter_table('knowledge_entries', schema=None) as batch_op:
        batch_op.drop_index('ix_entries_conversation')
        batch_op.drop_index('ix_entries_contract_type')
        batch_op.drop_index('ix_entries_updated')
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.drop_index('ix_conversations_created')
    with op.batch_alter_table('debug_records', schema=None) as batch_op:
        for name in DEBUG_FILTER_COLUMNS:
            batch_op.drop_index(f'ix_debug_records_{name}')
        for name in reversed(DEBUG_COLUMNS):
            batch_op.drop_column(name)
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.drop_column('citations')
        batch_op.drop_column('mode')
