"""The shared debug records of every model call."""
from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import delete, func, insert, select, update

from core.store import tables as t
from core.store.base import dumps, loads, require, who


class DebugRecordsStore:
    """The debug-records part of :class:`~core.store.store.Store`."""

    def add_debug_record(self, record: Mapping[str, Any], owner: Any = None) -> int:
        """Store one (already masked) debug record, shared by every operator; returns its id."""
        with self._write() as conn:
            return conn.execute(insert(t.debug_records).values(
                conversation_id=str(record.get("session_id") or "")[:80] or None,
                created_at=str(record.get("time") or self.now()), owner=who(owner)[0],
                flow=record.get("flow"), step=str(record.get("step") or "")[:60], provider=record.get("provider"),
                model=str(record.get("model") or "")[:200], strategy=record.get("strategy"),
                outcome=str(record.get("outcome") or "")[:80], record=dumps(dict(record)))
                .returning(t.debug_records.c.id)).scalar_one()

    def annotate_debug_record(self, record_id: int, fields: Mapping[str, Any]) -> None:
        """Add keys to a stored record (e.g. the judgment method, known only after later calls)."""
        with self._write() as conn:
            current = conn.execute(select(t.debug_records.c.record).where(t.debug_records.c.id == record_id)).scalar()
            if current is not None:
                conn.execute(update(t.debug_records).where(t.debug_records.c.id == record_id)
                             .values(record=dumps({**(loads(current, {}) or {}), **dict(fields)})))

    def list_debug_records(self, *, conversation_id: str | None = None, flow: str | None = None,
                           since: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """Oldest first (the newest ``limit``); each is the record dict plus its ``id`` and ``owner``."""
        c = t.debug_records.c
        stmt = select(c.id, c.owner, c.record).order_by(c.id.desc()).limit(limit)
        if conversation_id:
            stmt = stmt.where(c.conversation_id == conversation_id)
        if flow:
            stmt = stmt.where(c.flow == flow)
        if since:
            stmt = stmt.where(c.created_at >= since)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [{**(loads(r.record, {}) or {}), "id": r.id, "owner": r.owner} for r in reversed(rows)]

    def debug_records_stamp(self) -> tuple[int, int]:
        """(newest id, count): changes whenever a record is added or deleted, so a page can keep the
        records it parsed until then."""
        with self._read() as conn:
            row = conn.execute(select(func.coalesce(func.max(t.debug_records.c.id), 0), func.count())
                               .select_from(t.debug_records)).one()
        return int(row[0]), int(row[1])

    def count_debug_records(self, conversation_id: str | None = None) -> int:
        stmt = select(func.count()).select_from(t.debug_records)
        if conversation_id:
            stmt = stmt.where(t.debug_records.c.conversation_id == conversation_id)
        with self._read() as conn:
            return int(conn.execute(stmt).scalar() or 0)

    def clear_debug_records(self, actor: Any, *, conversation_id: str | None = None) -> int:
        """Delete debug records (all, or one conversation's): an admin action, audited."""
        require(actor, "debug.clear")
        stmt = delete(t.debug_records)
        if conversation_id:
            stmt = stmt.where(t.debug_records.c.conversation_id == conversation_id)
        with self._write() as conn:
            count = conn.execute(stmt).rowcount or 0
            self._audit(conn, actor, "debug.clear", "debug_records", conversation_id or "*", {"deleted": count})
        return count
