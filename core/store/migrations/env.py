"""Alembic environment: runs the migrations on the connection handed in by ``core.store.db.migrate``."""
from __future__ import annotations

from alembic import context

from core.store.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                  transaction_per_migration=True)
with context.begin_transaction():
    context.run_migrations()
