"""Conversations and their turns: one row per chat entry, superseded rather than deleted."""
from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from core.ids import new_id
from core.store import tables as t
from core.store.base import FLOWS, dumps, loads, storable_entry, turn_columns, who


class ConversationsStore:
    """The conversations-and-turns part of :class:`~core.store.store.Store`."""

    def create_conversation(self, flow: str, owner: Any = None, *, conversation_id: str | None = None,
                            title: str = "", state: Mapping[str, Any] | None = None) -> str:
        if flow not in FLOWS:
            raise ValueError(f"unknown flow: {flow}")
        user_id, label, _, _ = who(owner)
        cid = conversation_id or new_id()
        stamp = self.now()
        with self._write() as conn:
            conn.execute(insert(t.conversations).values(
                id=cid, flow=flow, title=title[:200], status="active", owner=user_id, owner_label=label,
                created_at=stamp, updated_at=stamp, state=None if state is None else dumps(dict(state)),
                state_version=0 if state is None else 1))
        return cid

    def get_conversation(self, conversation_id: str | None) -> dict[str, Any] | None:
        if not conversation_id or len(conversation_id) > 80:
            return None
        with self._read() as conn:
            row = conn.execute(select(t.conversations).where(t.conversations.c.id == conversation_id)).first()
        if row is None:
            return None
        data = row._asdict()
        data["state"] = loads(row.state, {}) or {}
        return data

    def list_conversations(self, flow: str | None = None, *, owner: str | None = None, limit: int = 20,
                           include_empty: bool = False) -> list[dict[str, Any]]:
        """Newest first, with their turn count; conversations nobody has said anything in are left out.
        Only the listed conversations' turns are counted (it runs on every rerun of a flow page)."""
        c = t.conversations.c
        live = and_(t.turns.c.conversation_id == c.id, t.turns.c.superseded.is_(False))
        query = (select(c.id, c.flow, c.title, c.status, c.owner, c.owner_label, c.created_at, c.updated_at)
                 .order_by(c.updated_at.desc()).limit(limit))
        if flow:
            query = query.where(c.flow == flow)
        if owner:
            query = query.where(c.owner == owner)
        if not include_empty:
            query = query.where(select(t.turns.c.id).where(live).exists())
        with self._read() as conn:
            rows = [row._asdict() for row in conn.execute(query)]
            ids = [row["id"] for row in rows]
            counts = dict(conn.execute(
                select(t.turns.c.conversation_id, func.count())
                .where(t.turns.c.conversation_id.in_(ids), t.turns.c.superseded.is_(False))
                .group_by(t.turns.c.conversation_id)).all()) if ids else {}
        for row in rows:
            row["turn_count"] = counts.get(row["id"], 0)
        return rows

    def update_conversation(self, conversation_id: str, *, state: Mapping[str, Any] | None = None,
                            merge_state: Mapping[str, Any] | None = None, title: str | None = None,
                            status: str | None = None) -> None:
        """Replace or merge (top-level keys) the resumable state; set the title / status."""
        with self._write() as conn:
            values: dict[str, Any] = {"updated_at": self.now(), "state_version": t.conversations.c.state_version + 1}
            if merge_state is not None:
                current = conn.execute(select(t.conversations.c.state)
                                       .where(t.conversations.c.id == conversation_id)).scalar()
                merged = {**(loads(current, {}) or {}), **dict(merge_state)}
                values["state"] = dumps(merged)
            if state is not None:
                values["state"] = dumps(dict(state))
            if title is not None:
                values["title"] = title[:200]
            if status is not None:
                values["status"] = status
            conn.execute(update(t.conversations).where(t.conversations.c.id == conversation_id).values(**values))

    # ---- turns -----------------------------------------------------------------------------------
    def append_turn(self, conversation_id: str, entry: Mapping[str, Any], *, role: str, author: Any = None,
                    **columns: Any) -> int:
        """Store one chat entry (with the analytic columns given) as the next turn; returns its seq."""
        stored = storable_entry(entry)
        entry_id = str(stored.get("id") or new_id(12))
        stored["id"] = entry_id
        values = turn_columns(columns, stored)
        for attempt in range(5):  # PostgreSQL: two writers may pick the same seq; the unique index decides
            try:
                with self._write() as conn:
                    seq = (conn.execute(select(func.coalesce(func.max(t.turns.c.seq), 0))
                                        .where(t.turns.c.conversation_id == conversation_id)).scalar() or 0) + 1
                    conn.execute(insert(t.turns).values(
                        conversation_id=conversation_id, seq=seq, entry_id=entry_id, superseded=False, role=role,
                        created_at=self.now(), entry=dumps(stored), author=who(author)[0], **values))
                    conn.execute(update(t.conversations).where(t.conversations.c.id == conversation_id)
                                 .values(updated_at=self.now()))
                return seq
            except IntegrityError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def update_turn_entry(self, conversation_id: str, entry: Mapping[str, Any], **columns: Any) -> None:
        stored = storable_entry(entry)
        values = turn_columns(columns, stored)
        with self._write() as conn:
            conn.execute(update(t.turns).where(and_(t.turns.c.conversation_id == conversation_id,
                                                    t.turns.c.entry_id == str(stored.get("id"))))
                         .values(entry=dumps(stored), **values))

    def supersede_turns(self, conversation_id: str, entry_ids: Iterable[str]) -> None:
        ids = [str(i) for i in entry_ids]
        if not ids:
            return
        with self._write() as conn:
            conn.execute(update(t.turns).where(and_(t.turns.c.conversation_id == conversation_id,
                                                    t.turns.c.entry_id.in_(ids))).values(superseded=True))

    def list_turns(self, conversation_id: str, *, include_superseded: bool = False) -> list[dict[str, Any]]:
        query = select(t.turns).where(t.turns.c.conversation_id == conversation_id).order_by(t.turns.c.seq)
        if not include_superseded:
            query = query.where(t.turns.c.superseded.is_(False))
        with self._read() as conn:
            rows = conn.execute(query).all()
        out = []
        for row in rows:
            data = row._asdict()
            data["entry"] = loads(row.entry, {})
            data["turn_json"] = loads(row.turn_json)
            data["attachments"] = loads(row.attachments, [])
            out.append(data)
        return out

    def chat_entries(self, conversation_id: str) -> list[dict[str, Any]]:
        """The page's chat list as it was, in order (the working copy on resume)."""
        return [row["entry"] for row in self.list_turns(conversation_id)]

    def entry_hashes(self, conversation_id: str) -> dict[str, str]:
        """``{entry_id: sha256 of the stored entry}`` of the live turns (for write-through sync)."""
        query = (select(t.turns.c.entry_id, t.turns.c.entry)
                 .where(and_(t.turns.c.conversation_id == conversation_id, t.turns.c.superseded.is_(False))))
        with self._read() as conn:
            return {row.entry_id: hashlib.sha256(row.entry.encode()).hexdigest() for row in conn.execute(query)}
