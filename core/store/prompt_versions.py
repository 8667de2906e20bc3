"""Saved prompt versions: the truth for every prompt an admin saved, served to every process.

A version is saved only by an explicit action of someone holding ``prompt.write`` (admins); each save
is one row of ``prompt_versions`` plus an audit row, in one transaction (``write``, an optional extra
step of the caller, runs inside it).

:class:`StoredPrompts` is the prompt source (``core.prompts.set_prompt_source``) over the store: it holds
the newest saved content of each prompt and every saved version in memory, and looks at the table's
change stamp (the newest row id and the row count: one indexed query) at most every
``KAIWA_PROMPT_REFRESH`` seconds, loading the versions again only when the stamp moved. So a version saved
on one console host is used by every console and API process on the same database within that interval
(at once in the saving process), and rendering a prompt never queries the database.
:func:`serve_prompts` registers it; ``core.store.get_store()`` does so for the process's own store.
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any, Callable

from sqlalchemy import func, insert, select

from core.prompts import SavedPrompts, prompt_source, set_prompt_source
from core.store import tables as t
from core.store.base import StoreBase, now_iso, who

log = logging.getLogger(__name__)
MAX_PROMPT_CHARS = 200_000
REFRESH_ENV = "KAIWA_PROMPT_REFRESH"
DEFAULT_REFRESH_SECONDS = 2.0


def add_prompt_version(store: StoreBase, name: str, content: str, version: str, actor: Any, *,
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


def list_prompt_versions(store: StoreBase, name: str | None = None, *, limit: int = 100,
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


def get_prompt_version(store: StoreBase, name: str, version: str) -> dict[str, Any] | None:
    """The newest saved row of ``name`` with ``version`` (content included), or None."""
    c = t.prompt_versions.c
    query = select(t.prompt_versions).where(c.name == name, c.version == version).order_by(c.id.desc()).limit(1)
    with store._read() as conn:
        row = conn.execute(query).first()
    return row._asdict() if row else None


def saved_prompts(store: StoreBase) -> SavedPrompts:
    """The newest saved content (stripped) of every prompt and every version saved of it (two queries)."""
    c = t.prompt_versions.c
    newest_ids = select(func.max(c.id)).group_by(c.name).scalar_subquery()
    with store._read() as conn:
        newest = {row.name: row.content.strip() for row in conn.execute(
            select(c.name, c.content).where(c.id.in_(newest_ids)))}
        known: dict[str, set[str]] = {}
        for row in conn.execute(select(c.name, c.version).distinct()):
            known.setdefault(row.name, set()).add(row.version)
    return SavedPrompts(newest=newest, known={name: frozenset(v) for name, v in known.items()})


def refresh_seconds(environ: dict[str, str] | None = None) -> float:
    """``KAIWA_PROMPT_REFRESH``: how often a process looks for versions saved elsewhere (default 2 s)."""
    raw = ((os.environ if environ is None else environ).get(REFRESH_ENV) or "").strip()
    try:
        value = float(raw) if raw else DEFAULT_REFRESH_SECONDS
    except ValueError:
        return DEFAULT_REFRESH_SECONDS
    return value if math.isfinite(value) and value >= 0 else DEFAULT_REFRESH_SECONDS


class StoredPrompts:
    """A ``core.prompts`` source over ``store`` (module docstring); safe to share between threads."""

    def __init__(self, store: StoreBase, refresh: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.refresh = refresh_seconds() if refresh is None else refresh
        self.clock = clock
        self.loads = 0  # how many times the versions were read (tests and the benchmark look)
        self.stamp_checks = 0
        self._lock = threading.Lock()
        self._snapshot: SavedPrompts | None = None
        self._stamp: tuple[Any, Any] | None = None
        self._checked = -math.inf

    def _stamp_now(self) -> tuple[Any, Any]:
        c = t.prompt_versions.c
        with self.store._read() as conn:
            row = conn.execute(select(func.max(c.id), func.count(c.id))).one()
        return row[0], row[1]

    def invalidate(self) -> None:
        """Look at the stamp on the next use (after a save in this process)."""
        self._checked = -math.inf

    def __call__(self) -> SavedPrompts | None:
        if self.clock() - self._checked < self.refresh:
            return self._snapshot
        with self._lock:
            if self.clock() - self._checked < self.refresh:  # another thread just looked
                return self._snapshot
            try:
                self.stamp_checks += 1
                stamp = self._stamp_now()
                if stamp != self._stamp or self._snapshot is None:
                    self._snapshot = saved_prompts(self.store)
                    self._stamp = stamp
                    self.loads += 1
            except Exception:  # noqa: BLE001 - keep serving what we had; the files when we never had anything
                log.warning("could not read the saved prompt versions; keeping the last known ones", exc_info=True)
            self._checked = self.clock()
            return self._snapshot


def serve_prompts(store: StoreBase, refresh: float | None = None) -> StoredPrompts:
    """Make ``store`` the prompt source of this process (once per store; later calls return it)."""
    current = prompt_source()
    if isinstance(current, StoredPrompts) and current.store is store:
        return current
    source = StoredPrompts(store, refresh)
    set_prompt_source(source)
    return source
