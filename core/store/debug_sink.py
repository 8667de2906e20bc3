"""Debug records written to the store: a list-like sink the engine appends to (``debuglog.append``).

The engine only ever calls ``append``; each record (already masked by ``debuglog.make_record``) is
stored with its owner and conversation, so every operator sees every call. A write failure is
logged and never breaks the user's turn.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

from core.store.store import Store

logger = logging.getLogger(__name__)


class StoreDebugSink:
    def __init__(self, store: Store, owner: Any = None, conversation_id: str | None = None):
        self.store = store
        self.owner = owner
        self.conversation_id = conversation_id
        self.count = 0

    def append(self, record: Mapping[str, Any]) -> None:
        data = dict(record)
        if self.conversation_id and not data.get("session_id"):
            data["session_id"] = self.conversation_id
        try:
            self.store.add_debug_record(data, self.owner)
            self.count += 1
        except Exception:  # noqa: BLE001 - the debug log must never fail a turn
            logger.exception("could not store a debug record")

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        return iter(())
