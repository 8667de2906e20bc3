"""Saved prompt versions: every prompt file content written from the workbench, with who and when.

A version is saved only by an explicit action of someone holding ``prompt.write`` (admins); each save
is one row of ``prompt_versions`` plus an audit row, in one transaction. ``write`` (the caller's file
write) runs inside that transaction, so a failed file write leaves no row and a failed row no file.
"""
from __future__ import annotations

from typing import Any, Callable

from sqlalchemy import insert, select

from core.store import tables as t
from core.store.base import now_iso, who
from core.store.store import Store

MAX_PROMPT_CHARS = 200_000


def add_prompt_version(store: Store, name: str, content: str, version: str, actor: Any, *,
                       previous_version: str | None = None, note: str = "",
                       write: Callable[[], None] | None = None) -> dict[str, Any]:
    """Record ``content`` as ``version`` of prompt ``name`` (PermissionError without ``prompt.write``)."""
    can = getattr(actor, "can", None)
    if not callable(can) or not can("prompt.write"):  # no anonymous or plain-string actors either
        raise PermissionError("プロンプトの保存（prompt.write）は管理者のみ行えます。")
    if len(content) > MAX_PROMPT_CHARS:
        raise ValueError(f"プロンプトが長すぎます（上限 {MAX_PROMPT_CHARS:,} 文字）。")
    user_id, label, _, _ = who(actor)
    stamp = now_iso()
    with store._write() as conn:
        row_id = conn.execute(insert(t.prompt_versions).values(
            name=name, version=version, content=content, previous_version=previous_version, note=note[:500],
            created_by=user_id, created_by_label=label, created_at=stamp)).inserted_primary_key[0]
        store._audit(conn, actor, "prompt.save", "prompt", name,
                     {"version": version, "previous_version": previous_version, "note": note[:500]})
        if write is not None:
            write()
    return {"id": row_id, "name": name, "version": version, "previous_version": previous_version, "note": note[:500],
            "created_by": user_id, "created_by_label": label, "created_at": stamp}


def list_prompt_versions(store: Store, name: str | None = None, *, limit: int = 100,
                         with_content: bool = False) -> list[dict[str, Any]]:
    """Newest first."""
    c = t.prompt_versions.c
    columns = [c.id, c.name, c.version, c.previous_version, c.note, c.created_by, c.created_by_label, c.created_at]
    if with_content:
        columns.append(c.content)
    query = select(*columns).order_by(c.id.desc()).limit(limit)
    if name:
        query = query.where(c.name == name)
    with store._read() as conn:
        return [row._asdict() for row in conn.execute(query)]


def get_prompt_version(store: Store, name: str, version: str) -> dict[str, Any] | None:
    """The newest saved row of ``name`` with ``version`` (content included), or None."""
    c = t.prompt_versions.c
    query = select(t.prompt_versions).where(c.name == name, c.version == version).order_by(c.id.desc()).limit(1)
    with store._read() as conn:
        row = conn.execute(query).first()
    return row._asdict() if row else None
