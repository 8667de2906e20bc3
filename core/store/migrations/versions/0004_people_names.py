"""names for people: who confirmed an entry and who last changed a booking, by their display names

Exports and pages show people by name, not by internal id: ``knowledge_entries.confirmed_by_label``
and ``bookings.updated_by_label``, filled from the history for rows written before.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('knowledge_entries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('confirmed_by_label', sa.String(length=200), nullable=True))
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('updated_by_label', sa.String(length=200), nullable=False, server_default=''))
    op.execute(
        "UPDATE knowledge_entries SET confirmed_by_label = (SELECT h.changed_by_label FROM entry_history h "
        "WHERE h.entry_id = knowledge_entries.id AND h.action = 'confirm' ORDER BY h.id DESC LIMIT 1) "
        "WHERE confirmed_by IS NOT NULL")
    op.execute(
        "UPDATE bookings SET updated_by_label = COALESCE((SELECT a.actor_label FROM audit_log a "
        "WHERE a.target_type = 'booking' AND a.target_id = bookings.number ORDER BY a.id DESC LIMIT 1), "
        "created_by_label)")


def downgrade() -> None:
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.drop_column('updated_by_label')
    with op.batch_alter_table('knowledge_entries', schema=None) as batch_op:
        batch_op.drop_column('confirmed_by_label')
