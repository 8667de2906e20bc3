"""Debug records written through to the store: the list the engine appends to (``debuglog.append``).

``StoredDebugLog`` is the page's working copy (``st.session_state.debug_logs``): a list of the
records this browser tab made (the newest ``keep``), and every ``append`` is also stored with its
owner and conversation, so all operators see every call on the debug page. A store failure is logged
and never breaks the user's turn.

A record the store took is kept here as its summary (``SUMMARY_KEYS``: no messages, schema or raw output;
those are read from the store by the debug page), so a session holds a few KB however long its model
calls are; a record the store could not take is kept whole (it is the only copy).

**A turn's records ride in its chat write** (issue #25): inside :meth:`StoredDebugLog.holding` (a diagnosis
turn, ``DiagnosisConversations``) a record is not written when it is appended; the turn's one fenced chat
transaction takes it (``sync_chat(debug=…)`` → ``Store.write_chat``: one write transaction per model call
less). Whatever is still waiting when the block ends — the turn failed, was cut off, lost its lease, or its
chat write failed — is written then, all of it in one transaction of its own, so a failed turn's calls are
kept as before. Until then the list holds the records' summaries (as after a write), and ``annotate``
changes the waiting record itself.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

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
        self._held: list[tuple[dict[str, Any], dict[str, Any]]] | None = None  # (summary, whole record) waiting

    def append(self, record: Mapping[str, Any]) -> None:  # type: ignore[override]
        if self._held is not None:  # written with the turn's chat (see the module docstring)
            kept = _summary(record)
            self._held.append((kept, dict(record)))
        else:
            kept = dict(record)
            try:
                kept = _summary({**kept, "_store_id": self.store.add_debug_record(record, self.owner)})
            except Exception:  # noqa: BLE001 - the debug log must never fail a turn
                logger.exception("could not store a debug record")
        super().append(kept)
        if len(self) > self.keep:
            del self[: len(self) - self.keep]

    def annotate(self, records: list[dict[str, Any]], **fields: Any) -> None:
        """Add ``fields`` to records already appended, here and in the store (or in the record waiting)."""
        waiting = {id(kept): whole for kept, whole in self._held or ()}
        for record in records:
            record.update(fields)
            if id(record) in waiting:
                waiting[id(record)].update(fields)
            elif record.get("_store_id") is not None:
                try:
                    self.store.annotate_debug_record(record["_store_id"], fields)
                except Exception:  # noqa: BLE001
                    logger.exception("could not annotate a debug record")

    # ---- a turn's records, written with its chat ----------------------------------------------------
    @contextmanager
    def holding(self) -> Iterator[None]:
        """Records appended inside wait for :meth:`held_records` to be taken by the turn's chat write; the
        rest are written at the end in one transaction (see the module docstring). A nested block is part
        of the outer one."""
        if self._held is not None:
            yield
            return
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self._write(held)

    def held_records(self) -> list[dict[str, Any]]:
        """The whole records waiting (masked, annotated), oldest first."""
        return [whole for _, whole in self._held or ()]

    def stored(self, records: list[dict[str, Any]], ids: list[int]) -> None:
        """The chat write stored ``records`` (from :meth:`held_records`) under ``ids``: no longer waiting."""
        taken = {id(whole): record_id for whole, record_id in zip(records, ids)}
        if self._held is None:
            return
        rest = []
        for kept, whole in self._held:
            if id(whole) in taken:
                kept["_store_id"] = taken[id(whole)]
            else:
                rest.append((kept, whole))
        self._held[:] = rest

    def _write(self, held: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """The waiting records in one transaction; if the store takes none, each is kept here whole."""
        try:
            ids = self.store.add_debug_records([whole for _, whole in held], self.owner)
        except Exception:  # noqa: BLE001 - the debug log must never fail a turn
            logger.exception("could not store %d debug records", len(held))
            for kept, whole in held:
                kept.clear()
                kept.update(whole)
            return
        for (kept, _), record_id in zip(held, ids):
            kept["_store_id"] = record_id


def _summary(record: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: record[k] for k in SUMMARY_KEYS if k in record}
    if isinstance(kept.get("errors"), list):
        kept["errors"] = [str(e)[:300] for e in kept["errors"][:10]]
    return kept
