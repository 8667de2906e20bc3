"""turn lease on conversations, one live booking per form, admin-password attempts, the health-check row

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

LIVE_FORM = sa.text("status <> 'cancelled'")


def upgrade() -> None:
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('turn_token', sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column('turn_until', sa.String(length=32), nullable=True))
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('form_key', sa.String(length=64), nullable=True))
    # existing rows keep form_key NULL (several NULLs never clash), so a database that already holds
    # doubled bookings still migrates
    op.create_index('ux_bookings_live_form', 'bookings', ['form_key'], unique=True,
                    sqlite_where=LIVE_FORM, postgresql_where=LIVE_FORM)
    op.create_table('admin_attempts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('at', sa.String(length=32), nullable=False),
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('ok', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_admin_attempts_key', 'admin_attempts', ['key', 'at'], unique=False)
    heartbeat = op.create_table('heartbeat',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.String(length=32), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.bulk_insert(heartbeat, [{'id': 1, 'at': ''}])


def downgrade() -> None:
    op.drop_table('heartbeat')
    op.drop_index('ix_admin_attempts_key', table_name='admin_attempts')
    op.drop_table('admin_attempts')
    op.drop_index('ux_bookings_live_form', table_name='bookings')
    with op.batch_alter_table('bookings', schema=None) as batch_op:
        batch_op.drop_column('form_key')
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.drop_column('turn_until')
        batch_op.drop_column('turn_token')
