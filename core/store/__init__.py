"""The shared store (SQLAlchemy Core + Alembic): SQLite embedded by default, PostgreSQL for replicas.

Modules: ``tables`` (the tables, declared once), ``db`` (engine URL, SQLite pragmas, migrations),
``store`` (``Store`` / ``get_store``, assembled from ``conversations``, ``library``, ``bookings`` and
``debug_records`` over ``base``: engine, transactions, actors, audit log), ``chat_sync`` (write-through of
a page's chat list), ``debug_sink`` (debug records written to the store), ``prompt_versions``, ``review``
(feedback, the review queue, verdicts, labels and regression cases of issue #22).
The diagnosis flow keeps its sessions here through ``core.diagnosis.stored_sessions``.
"""
from core.store.store import Store, get_store

__all__ = ["Store", "get_store"]
