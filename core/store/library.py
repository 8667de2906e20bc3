"""The knowledge library: entries with a version history, confirmed and archived by permitted people.

**One write at a time per entry.** Every change a person makes (edit, confirm, archive, restore) reads the
entry under a row lock (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's writers already queue on
``BEGIN IMMEDIATE``) and writes it with a conditional ``UPDATE … WHERE version = <the version read>``, so
two replicas changing one entry at the same moment run one after the other on both engines: the second
sees the first's result (an archive is not undone by a confirm, an archived entry is not edited, an
entry is not confirmed twice, two edits of different fields both stay). Each change takes the next
version, and ``entry_history`` has a unique ``(entry_id, version)`` (migration 0006) as the backstop.

**Stale forms.** A form passes the version it shows (``expected_version``); when the entry has moved on
since, the write is refused with :class:`StaleEntry` (the page shows what changed and keeps the typed
text), as an HTTP API answers a stale ``If-Match`` with 409/412.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from core.store import search
from core.store import tables as t
from core.store.base import clean_fields, distinct_values, dumps, loads, require, who
from core.validation import ENTRY_FIELDS

STATUS_JA = {"draft": "下書き", "confirmed": "確定済み", "archived": "アーカイブ済み"}
ACTION_JA = {"confirm": "確定", "archive": "アーカイブ", "restore": "下書きに復元"}
STALE_MESSAGE = ("このナレッジは、画面を開いた後にほかの人が変更しました（表示していた版: {shown}、現在の版: {current}）。"
                 "入力した内容はそのまま残しています。変更点を確認してから、もう一度保存してください。")


class StaleEntry(ValueError):
    """The entry is no longer at the version the form showed (someone saved in between), or another write
    of it won the race: nothing was written. ``current`` is the entry as it is now."""

    def __init__(self, entry_id: int, shown: int | None, current: Mapping[str, Any] | None):
        self.entry_id = int(entry_id)
        self.shown = shown
        self.current = dict(current or {})
        super().__init__(STALE_MESSAGE.format(shown=shown if shown is not None else "?",
                                              current=self.current.get("version", "?")))


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The entry fields (and the status) that differ between two versions of an entry."""
    return [f for f in (*ENTRY_FIELDS, "status") if (before.get(f) or "") != (after.get(f) or "")]


class LibraryStore:
    """The knowledge-library part of :class:`~core.store.store.Store`."""

    def record_knowledge(self, conversation_id: str | None, entries: Sequence[Mapping[str, Any]], actor: Any = None,
                         *, keep_contract_text: bool = False) -> list[int]:
        """The model drafted ``entries``: update this conversation's open drafts slot by slot, or start
        new drafts. A confirmed or archived entry is never changed by a later turn. Personal data is
        masked unless ``keep_contract_text``; secrets are always removed."""
        user_id, label, _, _ = who(actor)
        ids: list[int] = []
        with self._write() as conn:
            for slot, entry in enumerate(entries):
                data = clean_fields(entry, keep_contract_text)
                stamp = self.now()
                row = None
                if conversation_id:
                    row = conn.execute(select(t.knowledge_entries).where(and_(
                        t.knowledge_entries.c.conversation_id == conversation_id,
                        t.knowledge_entries.c.slot == slot, t.knowledge_entries.c.status == "draft"))
                        .order_by(t.knowledge_entries.c.id.desc()).limit(1).with_for_update()).first()
                if row is None:
                    entry_id = conn.execute(insert(t.knowledge_entries).values(
                        conversation_id=conversation_id, slot=slot, status="draft", version=1, created_by=user_id,
                        created_by_label=label, created_at=stamp, updated_by=user_id, updated_by_label=label,
                        updated_at=stamp, **data).returning(t.knowledge_entries.c.id)).scalar_one()
                    self._history(conn, entry_id, 1, "drafted", data, "draft", user_id, label)
                    search.index_entry(conn, entry_id, data)
                else:
                    entry_id = row.id
                    if any(getattr(row, f) != data[f] for f in ENTRY_FIELDS):
                        version = self._bump(conn, row, dict(updated_by=user_id, updated_by_label=label,
                                                             updated_at=stamp, **data))
                        self._history(conn, entry_id, version, "model_update", data, "draft", user_id, label)
                        search.index_entry(conn, entry_id, data)
                ids.append(entry_id)
        return ids

    def _history(self, conn, entry_id: int, version: int, action: str, data: Mapping[str, Any], status: str,
                 user_id: str, label: str) -> None:
        conn.execute(insert(t.entry_history).values(
            entry_id=entry_id, version=version, action=action, data=dumps(dict(data)), status=status,
            changed_by=user_id, changed_by_label=label, changed_at=self.now()))

    def conversation_outputs(self, conversation_id: str) -> list[dict[str, Any]]:
        """The knowledge a conversation shows beside the chat: its newest non-archived entry per slot."""
        query = (select(t.knowledge_entries).where(and_(t.knowledge_entries.c.conversation_id == conversation_id,
                                                        t.knowledge_entries.c.status != "archived"))
                 .order_by(t.knowledge_entries.c.slot, t.knowledge_entries.c.id.desc()))
        with self._read() as conn:
            rows = conn.execute(query).all()
        newest: dict[int, dict[str, Any]] = {}
        for row in rows:
            newest.setdefault(row.slot, row._asdict())
        return [newest[s] for s in sorted(newest)]

    def get_entry(self, entry_id: int) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(select(t.knowledge_entries).where(t.knowledge_entries.c.id == int(entry_id))).first()
        return row._asdict() if row else None

    def _entries_where(self, status: Sequence[str] | str | None, contract_type: Sequence[str] | str | None,
                       query: str, conversation_id: str | None) -> list[Any]:
        c = t.knowledge_entries.c
        where: list[Any] = []
        if status:
            where.append(c.status.in_([status] if isinstance(status, str) else list(status)))
        if contract_type:
            where.append(c.contract_type.in_([contract_type] if isinstance(contract_type, str) else list(contract_type)))
        if conversation_id:
            where.append(c.conversation_id == conversation_id)
        matched = search.entry_condition(self.dialect, query)
        if matched is not None:
            where.append(matched)
        return where

    def list_entries(self, *, status: Sequence[str] | str | None = None, contract_type: Sequence[str] | str | None = None,
                     query: str = "", conversation_id: str | None = None, limit: int = 500,
                     offset: int = 0) -> list[dict[str, Any]]:
        """Library search, newest change first: status / contract type filters and the full-text search
        (``core.store.search``: every word somewhere in the six fields), ``limit`` rows from ``offset``."""
        c = t.knowledge_entries.c
        stmt = (select(t.knowledge_entries).where(*self._entries_where(status, contract_type, query, conversation_id))
                .order_by(c.updated_at.desc(), c.id.desc()).limit(limit).offset(max(0, int(offset))))
        with self._read() as conn:
            return [row._asdict() for row in conn.execute(stmt)]

    def count_entries(self, *, status: Sequence[str] | str | None = None,
                      contract_type: Sequence[str] | str | None = None, query: str = "",
                      conversation_id: str | None = None) -> int:
        """How many entries :meth:`list_entries` would find without a limit."""
        stmt = (select(func.count()).select_from(t.knowledge_entries)
                .where(*self._entries_where(status, contract_type, query, conversation_id)))
        with self._read() as conn:
            return int(conn.execute(stmt).scalar() or 0)

    def entry_position(self, entry_id: int, *, status: Sequence[str] | str | None = None,
                       contract_type: Sequence[str] | str | None = None, query: str = "") -> int | None:
        """Where entry ``entry_id`` stands (0-based) in :meth:`list_entries` with these filters, or None when
        they leave it out: the library's pager turns to the page that holds a saved entry."""
        c = t.knowledge_entries.c
        where = self._entries_where(status, contract_type, query, None)
        with self._read() as conn:
            row = conn.execute(select(c.updated_at).where(c.id == int(entry_id), *where)).first()
            if row is None:
                return None
            before = or_(c.updated_at > row.updated_at, and_(c.updated_at == row.updated_at, c.id > int(entry_id)))
            return int(conn.execute(select(func.count()).select_from(t.knowledge_entries)
                                    .where(before, *where)).scalar() or 0)

    def contract_types(self) -> list[str]:
        """Every contract type used, sorted (read from its index one value at a time)."""
        with self._read() as conn:
            return [v for v in distinct_values(conn, "knowledge_entries", "contract_type") if v != ""]

    def rebuild_search_index(self) -> int:
        """Rewrite the library's full-text index from the entries (the migration fills it; this is for repair)."""
        with self._write() as conn:
            return search.rebuild(conn)

    def _locked_entry(self, conn: Any, entry_id: int, expected_version: int | None) -> Any:
        """The entry's row, locked for this transaction (PostgreSQL ``FOR UPDATE``; SQLite holds the write
        lock already); :class:`StaleEntry` when it is not at ``expected_version`` (if given)."""
        row = conn.execute(select(t.knowledge_entries).where(t.knowledge_entries.c.id == int(entry_id))
                           .with_for_update()).first()
        if row is None:
            raise KeyError(entry_id)
        if expected_version is not None and int(expected_version) != row.version:
            raise StaleEntry(entry_id, int(expected_version), row._asdict())
        return row

    def _bump(self, conn: Any, row: Any, values: Mapping[str, Any]) -> int:
        """Write ``values`` and the next version, only if the entry is still at the version read (the row
        lock makes this always so; it is the check that keeps a lost race from writing)."""
        version = row.version + 1
        c = t.knowledge_entries.c
        if not conn.execute(update(t.knowledge_entries).where(c.id == row.id, c.version == row.version)
                            .values(version=version, **values)).rowcount:
            raise StaleEntry(row.id, row.version, None)
        return version

    def edit_entry(self, entry_id: int, changes: Mapping[str, Any], actor: Any, *,
                   keep_contract_text: bool = False, expected_version: int | None = None) -> dict[str, Any]:
        """A person edits fields of an entry (any status but archived); history keeps every version.
        Edited text is masked like drafted text (secrets always). With ``expected_version`` (the version
        the form showed) a save over a newer version is refused with :class:`StaleEntry`."""
        require(actor, "entry.edit")
        user_id, label, _, _ = who(actor)
        with self._serialised(entry_id) as conn:
            row = self._locked_entry(conn, entry_id, expected_version)
            if row.status == "archived":
                raise ValueError("アーカイブ済みのナレッジは編集できません。先に復元してください。")
            data = {f: getattr(row, f) for f in ENTRY_FIELDS}
            data.update(clean_fields({f: changes[f] for f in ENTRY_FIELDS if f in changes}, keep_contract_text,
                                      only_given=True))
            if all(getattr(row, f) == data[f] for f in ENTRY_FIELDS):
                return row._asdict()
            version = self._bump(conn, row, dict(updated_by=user_id, updated_by_label=label, updated_at=self.now(),
                                                 **data))
            self._history(conn, row.id, version, "edit", data, row.status, user_id, label)
            search.index_entry(conn, row.id, data)
            self._audit(conn, actor, "entry.edit", "knowledge_entry", row.id,
                        {"fields": [f for f in ENTRY_FIELDS if getattr(row, f) != data[f]]})
        return self.get_entry(entry_id) or {}

    _TRANSITIONS = {"confirm": ("draft", "confirmed", "entry.confirm"),
                    "archive": (None, "archived", "entry.archive"),
                    "restore": ("archived", "draft", "entry.archive")}

    def set_entry_status(self, entry_id: int, action: str, actor: Any, *,
                         expected_version: int | None = None) -> dict[str, Any]:
        """``confirm`` (draft → confirmed), ``archive`` (any → archived), ``restore`` (archived → draft).
        With ``expected_version`` (the version the person saw) a newer entry is refused (:class:`StaleEntry`):
        確定する never confirms text the person has not seen."""
        if action not in self._TRANSITIONS:
            raise ValueError(action)
        source, target, permission = self._TRANSITIONS[action]
        require(actor, permission)
        user_id, label, _, _ = who(actor)
        with self._serialised(entry_id) as conn:
            row = self._locked_entry(conn, entry_id, expected_version)
            if source is not None and row.status != source:
                raise ValueError(f"{STATUS_JA.get(row.status, row.status)}のナレッジは{ACTION_JA[action]}できません。")
            if action == "archive" and row.status == "archived":
                raise ValueError(f"{STATUS_JA['archived']}のナレッジは{ACTION_JA[action]}できません。")
            stamp = self.now()
            values: dict[str, Any] = {"status": target, "updated_by": user_id,
                                      "updated_by_label": label, "updated_at": stamp}
            if target == "confirmed":
                values.update(confirmed_by=user_id, confirmed_by_label=label, confirmed_at=stamp)
            version = self._bump(conn, row, values)
            self._history(conn, row.id, version, action, {f: getattr(row, f) for f in ENTRY_FIELDS},
                          target, user_id, label)
            self._audit(conn, actor, f"entry.{action}", "knowledge_entry", row.id, {"from": row.status, "to": target})
        return self.get_entry(entry_id) or {}

    @contextmanager
    def _serialised(self, entry_id: int) -> Iterator[Any]:
        """A write transaction for one entry; a unique-version clash (the backstop) is a lost race."""
        try:
            with self._write() as conn:
                yield conn
        except IntegrityError as exc:
            raise StaleEntry(entry_id, None, self.get_entry(entry_id)) from exc

    def entry_history(self, entry_id: int) -> list[dict[str, Any]]:
        query = (select(t.entry_history).where(t.entry_history.c.entry_id == int(entry_id))
                 .order_by(t.entry_history.c.version, t.entry_history.c.id))
        with self._read() as conn:
            return [{**row._asdict(), "data": loads(row.data, {})} for row in conn.execute(query)]
