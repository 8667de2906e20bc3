"""The shared store (SQLAlchemy Core + Alembic): SQLite embedded by default, PostgreSQL for replicas.

Modules: ``tables`` (the tables, declared once), ``db`` (engine URL, SQLite pragmas, migrations),
``store`` (``Store`` / ``get_store``: conversations, turns, knowledge library, bookings, debug records,
audit log), ``chat_sync`` (write-through of a page's chat list), ``sessions`` (the diagnosis
``SessionStore`` on top of it), ``debug_sink`` (debug records written to the store).
"""
from core.store.store import Store, get_store

__all__ = ["Store", "get_store"]
