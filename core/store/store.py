"""The shared store: conversations and their turns, the knowledge library, bookings, debug records.

One ``Store`` per database URL (``get_store()``), safe to share between threads and processes: every
write is one short transaction, and SQLite writers queue on ``BEGIN IMMEDIATE``. Rows a person causes
record who (``Identity.user_id`` / label / roles) and when; changes to shared data (entries,
bookings, debug records) check the actor's permission and leave an audit row.

``Store`` is assembled from one part per kind of data (``conversations``, ``library``, ``bookings``,
``debug_records``, ``admin_attempts``, ``rollups``: 分析's counts, ``review``) over ``base`` (engine, transactions, actors,
audit log).
Nothing here imports Streamlit: pages, the HTTP API and tests use the same methods.
"""
from __future__ import annotations

import threading

from core.store.admin_attempts import AdminAttemptsStore
from core.store.base import (
    BOOKING_STATUSES,
    ENTRY_STATUSES,
    FLOWS,
    UNSTORED_ENTRY_KEYS,
    Actor,
    StoreBase,
    entry_digest,
    now_iso,
    storable_entry,
)
from core.store.bookings import BookingsStore
from core.store.conversations import ConversationsStore
from core.store.db import default_url
from core.store.debug_records import DebugRecordsStore
from core.store.library import LibraryStore
from core.store.prompt_versions import serve_prompts
from core.store.rollups import RollupsStore
from core.store.review import ReviewStore

__all__ = ["BOOKING_STATUSES", "ENTRY_STATUSES", "FLOWS", "UNSTORED_ENTRY_KEYS", "Actor", "Store", "entry_digest",
           "get_store", "now_iso", "storable_entry"]


class Store(ConversationsStore, LibraryStore, BookingsStore, DebugRecordsStore, AdminAttemptsStore, RollupsStore,
            ReviewStore,
            StoreBase):
    """All reads and writes of the console's shared data."""


_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()


def get_store(url: str | None = None) -> Store:
    """The process-wide store for ``url`` (default ``KAIWA_DB_URL`` or ``var/kaiwa.db``), migrated once.
    The process's own store (no ``url``) also serves the saved prompt versions (``serve_prompts``)."""
    key = url or default_url()
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = _stores[key] = Store(key)
    if url is None:
        serve_prompts(store)
    return store
