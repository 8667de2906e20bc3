"""initial store: conversations, turns, knowledge entries, bookings, debug records, audit log

Revision ID: 0001
Revises: 
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('at', sa.String(length=32), nullable=False),
    sa.Column('actor', sa.String(length=200), nullable=False),
    sa.Column('actor_label', sa.String(length=200), nullable=False),
    sa.Column('actor_roles', sa.String(length=100), nullable=False),
    sa.Column('verified', sa.Boolean(), nullable=False),
    sa.Column('action', sa.String(length=60), nullable=False),
    sa.Column('target_type', sa.String(length=40), nullable=False),
    sa.Column('target_id', sa.String(length=80), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index('ix_audit_target', ['target_type', 'target_id'], unique=False)

    op.create_table('conversations',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('flow', sa.String(length=16), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('owner', sa.String(length=200), nullable=False),
    sa.Column('owner_label', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.String(length=32), nullable=False),
    sa.Column('updated_at', sa.String(length=32), nullable=False),
    sa.Column('state', sa.Text(), nullable=True),
    sa.Column('state_version', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.create_index('ix_conversations_flow_updated', ['flow', 'updated_at'], unique=False)

    op.create_table('debug_records',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('conversation_id', sa.String(length=80), nullable=True),
    sa.Column('created_at', sa.String(length=32), nullable=False),
    sa.Column('owner', sa.String(length=200), nullable=False),
    sa.Column('flow', sa.String(length=16), nullable=True),
    sa.Column('step', sa.String(length=60), nullable=True),
    sa.Column('provider', sa.String(length=40), nullable=True),
    sa.Column('model', sa.String(length=200), nullable=True),
    sa.Column('strategy', sa.String(length=40), nullable=True),
    sa.Column('outcome', sa.String(length=80), nullable=True),
    sa.Column('record', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('debug_records', schema=None) as batch_op:
        batch_op.create_index('ix_debug_records_conv', ['conversation_id', 'id'], unique=False)
        batch_op.create_index('ix_debug_records_time', ['created_at'], unique=False)

    op.create_table('bookings',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('number', sa.String(length=32), nullable=False),
    sa.Column('conversation_id', sa.String(length=40), nullable=True),
    sa.Column('vehicle_id', sa.String(length=80), nullable=True),
    sa.Column('vehicle_label', sa.Text(), nullable=False),
    sa.Column('urgency', sa.String(length=16), nullable=True),
    sa.Column('can_drive', sa.Boolean(), nullable=True),
    sa.Column('booking_type', sa.String(length=16), nullable=False),
    sa.Column('contact', sa.Text(), nullable=False),
    sa.Column('symptom', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_by_label', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.String(length=32), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.Column('updated_at', sa.String(length=32), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('number')
    )
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.create_index('ix_bookings_status', ['status', 'created_at'], unique=False)

    op.create_table('knowledge_entries',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('conversation_id', sa.String(length=40), nullable=True),
    sa.Column('slot', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('knowledge_title', sa.Text(), nullable=False),
    sa.Column('contract_type', sa.Text(), nullable=False),
    sa.Column('target_clause', sa.Text(), nullable=False),
    sa.Column('review_points', sa.Text(), nullable=False),
    sa.Column('action_plan', sa.Text(), nullable=False),
    sa.Column('clause_sample', sa.Text(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_by_label', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.String(length=32), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.Column('updated_by_label', sa.String(length=200), nullable=False),
    sa.Column('updated_at', sa.String(length=32), nullable=False),
    sa.Column('confirmed_by', sa.String(length=200), nullable=True),
    sa.Column('confirmed_at', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('knowledge_entries', schema=None) as batch_op:
        batch_op.create_index('ix_entries_status', ['status', 'updated_at'], unique=False)

    op.create_table('turns',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('conversation_id', sa.String(length=40), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('entry_id', sa.String(length=40), nullable=False),
    sa.Column('superseded', sa.Boolean(), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.String(length=32), nullable=False),
    sa.Column('user_input', sa.Text(), nullable=True),
    sa.Column('attachments', sa.Text(), nullable=True),
    sa.Column('turn_json', sa.Text(), nullable=True),
    sa.Column('step', sa.String(length=40), nullable=True),
    sa.Column('provider', sa.String(length=40), nullable=True),
    sa.Column('model', sa.String(length=200), nullable=True),
    sa.Column('method', sa.String(length=40), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=True),
    sa.Column('latency_ms', sa.Float(), nullable=True),
    sa.Column('ok', sa.Boolean(), nullable=False),
    sa.Column('error_type', sa.String(length=60), nullable=True),
    sa.Column('raw_output', sa.Text(), nullable=True),
    sa.Column('entry', sa.Text(), nullable=False),
    sa.Column('author', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.create_index('ux_turns_conversation_seq', ['conversation_id', 'seq'], unique=True)

    op.create_table('entry_history',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('entry_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('action', sa.String(length=20), nullable=False),
    sa.Column('data', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('changed_by', sa.String(length=200), nullable=False),
    sa.Column('changed_by_label', sa.String(length=200), nullable=False),
    sa.Column('changed_at', sa.String(length=32), nullable=False),
    sa.ForeignKeyConstraint(['entry_id'], ['knowledge_entries.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('entry_history', schema=None) as batch_op:
        batch_op.create_index('ix_entry_history_entry', ['entry_id', 'version'], unique=False)




def downgrade() -> None:

    with op.batch_alter_table('entry_history', schema=None) as batch_op:
        batch_op.drop_index('ix_entry_history_entry')

    op.drop_table('entry_history')
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.drop_index('ux_turns_conversation_seq')

    op.drop_table('turns')
    with op.batch_alter_table('knowledge_entries', schema=None) as batch_op:
        batch_op.drop_index('ix_entries_status')

    op.drop_table('knowledge_entries')
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.drop_index('ix_bookings_status')

    op.drop_table('bookings')
    with op.batch_alter_table('debug_records', schema=None) as batch_op:
        batch_op.drop_index('ix_debug_records_time')
        batch_op.drop_index('ix_debug_records_conv')

    op.drop_table('debug_records')
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.drop_index('ix_conversations_flow_updated')

    op.drop_table('conversations')
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_target')

    op.drop_table('audit_log')

