"""the knowledge library's versions are unique: ``entry_history`` gets a unique ``(entry_id, version)``;
``integrity_write_probe``, where the health check adds and removes a row after a failed write

Concurrent library writes on PostgreSQL (before the row lock of ``core.store.library``) could store two
history rows of one entry with the same version. Such entries are renumbered first (their history rows
in the order they were written, 1, 2, …; the entry's ``version`` set to its newest), then the unique
index is made, the backstop behind the row lock.

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    clashing = [row[0] for row in conn.execute(sa.text(
        "SELECT DISTINCT entry_id FROM entry_history GROUP BY entry_id, version HAVING COUNT(*) > 1"))]
    for entry_id in clashing:
        ids = [row[0] for row in conn.execute(sa.text(
            "SELECT id FROM entry_history WHERE entry_id = :e ORDER BY version, id"), {"e": entry_id})]
        for version, row_id in enumerate(ids, start=1):
            conn.execute(sa.text("UPDATE entry_history SET version = :v WHERE id = :i"), {"v": version, "i": row_id})
        conn.execute(sa.text("UPDATE knowledge_entries SET version = :v WHERE id = :e"),
                     {"v": len(ids), "e": entry_id})
    op.create_index("uq_entry_history_entry_version", "entry_history", ["entry_id", "version"], unique=True)
    op.create_table("integrity_write_probe",
                    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
                    sa.Column("payload", sa.Text(), nullable=False))


def downgrade() -> None:
    op.drop_table("integrity_write_probe")
    op.drop_index("uq_entry_history_entry_version", table_name="entry_history")
