"""Debug records written through to the store: the list the engine appends to (``debuglog.append``).

``StoredDebugLog`` is the page's working copy (``st.session_state.debug_logs``): a list of the
records this browser tab made (the newest ``keep``), and every ``append`` is also stored with its
owner and conversation, so all operators see every call on the debug page. A store failure is logged
and never breaks the user's turn.

A record the store took is kept here as its summary (``SUMMARY_KEYS``: no messages, schema or raw output;
those are read from the store by the debug page), so a session holds a few KB however long its model
calls are; a record the store could not take is kept whole (it is the only copy).
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

from core.store.store import Store

logger = logging.getLogger(__name__)


SUMMARY_KEYS = ("time", "session_id", "flow", "step", "prompt", "prompt_version", "task", "provider", "model",
                "strategy", "attempt", "kind", "outcome", "errors", "latency_ms", "usage", "parse_stage",
                "judgment_method", "_store_id")


class StoredDebugLog(list):
    def __init__(self, store: Store, owner: Any = None, *, keep: int = 200):
        super().__init__()
        self.store = store
        self.owner = owner
        self.keep = keep

    def append(self, record: Mapping[str, Any]) -> None:  # type: ignore[override]
        kept = dict(record)
        try:
            kept["_store_id"] = self.store.add_debug_record(record, self.owner)
            kept = {k: kept[k] for k in SUMMARY_KEYS if k in kept}
            if isinstance(kept.get("errors"), list):
                kept["errors"] = [str(e)[:300] for e in kept["errors"][:10]]
        except Exception:  # noqa: BLE001 - the debug log must never fail a turn
            logger.exception("could not store a debug record")
        super().append(kept)
        if len(self) > self.keep:
            del self[: len(self) - self.keep]

    def annotate(self, records: list[dict[str, Any]], **fields: Any) -> None:
        """Add ``fields`` to records already appended, here and in the store."""
        for record in records:
            record.update(fields)
            if record.get("_store_id") is not None:
                try:
                    self.store.annotate_debug_record(record["_store_id"], fields)
                except Exception:  # noqa: BLE001
                    logger.exception("could not annotate a debug record")
