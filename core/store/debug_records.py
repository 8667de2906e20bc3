"""The shared debug records of every model call, and the debug log's queries over them.

Each record is stored whole (masked JSON) plus the columns the debug log filters on and 分析 groups by
(``core.debuglog.record_columns``), each under an index, so the record list is one page of an indexed
query: :class:`DebugQuery` holds the filters, :meth:`DebugRecordsStore.debug_page` reads a page,
:meth:`~DebugRecordsStore.count_debug_records` counts, :meth:`~DebugRecordsStore.debug_values` lists a
filter's options. The free-text search (raw output and validation errors) cannot use an index: it reads
at most ``TEXT_SEARCH_WINDOW`` of the newest records the other filters leave.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import case, cast, delete, func, insert, select, text, update
from sqlalchemy.dialects import postgresql

from core.debuglog import record_columns
from core.store import tables as t
from core.store.base import distinct_values, dumps, loads, require, who

TEXT_SEARCH_WINDOW = 5000  # the free-text search reads at most this many of the newest matching records
_INSERT = insert(t.debug_records).returning(t.debug_records.c.id)


@dataclass(frozen=True)
class DebugQuery:
    """The debug log's filters; an empty one matches everything. ``since`` / ``until`` are UTC ISO bounds
    of ``created_at`` (``until`` exclusive); ``conversation`` matches a whole id, or else part of one."""

    conversation: str = ""
    flows: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    error_types: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    failed_only: bool = False
    text: str = ""


def _as_record(row: Any) -> dict[str, Any]:
    """The stored record with its ``id`` and ``owner`` (and its ``time``: when it was stored, if it names none)."""
    record = loads(row.record, {})
    record = record if isinstance(record, dict) else {}
    if not record.get("time"):
        record["time"] = row.created_at
    return {**record, "id": row.id, "owner": row.owner}


class DebugRecordsStore:
    """The debug-records part of :class:`~core.store.store.Store`."""

    def _debug_row(self, record: Mapping[str, Any], owner: Any) -> dict[str, Any]:
        return {"conversation_id": str(record.get("session_id") or "")[:80] or None,
                "created_at": str(record.get("time") or self.now()), "owner": who(owner)[0],
                "flow": record.get("flow"), "step": str(record.get("step") or "")[:60],
                "provider": record.get("provider"), "model": str(record.get("model") or "")[:200],
                "strategy": record.get("strategy"), "outcome": str(record.get("outcome") or "")[:80],
                "record": dumps(dict(record)), **record_columns(record)}

    def _insert_debug_records(self, conn: Any, records: Sequence[Mapping[str, Any]], owner: Any) -> list[int]:
        """Insert ``records`` in order on ``conn`` (the caller's transaction); their ids, in the same order."""
        rows = [self._debug_row(record, owner) for record in records]
        if len(rows) == 1:  # one statement compiled once, the values bound (a record on every model call)
            return [conn.execute(_INSERT, rows[0]).scalar_one()]
        # One multi-row insert. RETURNING promises no order, but the rows are inserted in the order given and
        # each takes the next id (SQLite: the table's highest + 1 under the write lock; PostgreSQL: its
        # sequence, row by row), so the ids sorted are the records' in order.
        return sorted(conn.execute(_INSERT, rows).scalars()) if rows else []

    def add_debug_record(self, record: Mapping[str, Any], owner: Any = None) -> int:
        """Store one (already masked) debug record, shared by every operator; returns its id."""
        with self._write() as conn:
            return self._insert_debug_records(conn, [record], owner)[0]

    def add_debug_records(self, records: Sequence[Mapping[str, Any]], owner: Any = None) -> list[int]:
        """Store several (already masked) debug records in one transaction, in order; their ids. (A turn's
        records usually ride in its chat write, ``Store.write_chat``; this is for a turn that failed.)"""
        if not records:
            return []
        with self._write() as conn:
            return self._insert_debug_records(conn, records, owner)

    def annotate_debug_record(self, record_id: int, fields: Mapping[str, Any]) -> None:
        """Add keys to a stored record (e.g. the judgment method, known only after later calls)."""
        with self._write() as conn:
            current = conn.execute(select(t.debug_records.c.record).where(t.debug_records.c.id == record_id)).scalar()
            if current is not None:
                record = {**(loads(current, {}) or {}), **dict(fields)}
                conn.execute(update(t.debug_records).where(t.debug_records.c.id == record_id)
                             .values(record=dumps(record), **record_columns(record)))

    def list_debug_records(self, *, conversation_id: str | None = None, flow: str | None = None,
                           since: str | None = None, after: str | None = None, until: str | None = None,
                           limit: int = 1000) -> list[dict[str, Any]]:
        """Oldest first (the newest ``limit``); each is the record dict plus its ``id`` and ``owner``.
        ``since`` ≤ ``created_at``; ``after`` < ``created_at`` ≤ ``until`` (one answer's calls)."""
        c = t.debug_records.c
        stmt = select(c.id, c.owner, c.created_at, c.record).order_by(c.id.desc()).limit(limit)
        if conversation_id:
            stmt = stmt.where(c.conversation_id == conversation_id)
        if flow:
            stmt = stmt.where(c.flow == flow)
        if since:
            stmt = stmt.where(c.created_at >= since)
        if after:
            stmt = stmt.where(c.created_at > after)
        if until:
            stmt = stmt.where(c.created_at <= until)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [_as_record(r) for r in reversed(rows)]

    def debug_records_stamp(self) -> tuple[int, int]:
        """(newest id, change stamp of the table): changes whenever a record is added, changed or deleted.
        Both are read from an index or a counter, never by counting the records."""
        with self._read() as conn:
            newest = conn.execute(select(func.coalesce(func.max(t.debug_records.c.id), 0))).scalar()
        stamp = dict(self.change_stamp() or ()).get("debug_records", 0)
        return int(newest or 0), int(stamp)

    # ---- the debug log's queries ---------------------------------------------------------------------
    def _debug_where(self, conn: Any, query: DebugQuery) -> list[Any]:
        c = t.debug_records.c
        where: list[Any] = []
        if query.conversation:
            exact = conn.execute(select(c.id).where(c.conversation_id == query.conversation).limit(1)).first()
            if exact is not None:
                where.append(c.conversation_id == query.conversation)
            else:  # part of an id: the ids that contain it, read from the index rather than the records
                ids = [v for v in distinct_values(conn, "debug_records", "conversation_id", limit=100_000)
                       if query.conversation in v][:1000]
                where.append(c.conversation_id.in_(ids))
        for column, wanted in (("flow", query.flows), ("step", query.steps), ("task", query.tasks),
                               ("provider", query.providers), ("model", query.models), ("method", query.methods),
                               ("outcome", query.outcomes), ("error_type", query.error_types)):
            if wanted:
                where.append(c[column].in_(list(wanted)))
        if query.since:
            where.append(c.created_at >= query.since)
        if query.until:
            where.append(c.created_at < query.until)
        if query.failed_only:
            where.append(func.coalesce(c.outcome, "") != "ok")
        if query.text:
            window = select(c.id).where(*where).order_by(c.id.desc()).limit(TEXT_SEARCH_WINDOW).subquery()
            where = [c.id.in_(select(window.c.id)), self._text_match(query.text)]
        return where

    def _text_match(self, needle: str) -> Any:
        """The record's raw output, or its validation errors joined by spaces, contains ``needle``."""
        record = t.debug_records.c.record
        if self.dialect == "sqlite":
            raw = func.json_extract(record, "$.raw_output")
            errors = text("(SELECT group_concat(value, ' ') FROM json_each(debug_records.record, '$.errors'))")
            return case((func.json_valid(record) == 1, (func.instr(func.coalesce(raw, ""), needle) > 0)
                         | (func.instr(func.coalesce(errors, ""), needle) > 0)), else_=False)
        if self.dialect == "postgresql":
            as_json = cast(record, postgresql.JSON)
            raw = as_json.op("->>")("raw_output")
            errors = text("(CASE WHEN json_typeof(CAST(debug_records.record AS json) -> 'errors') = 'array' THEN "
                          "array_to_string(ARRAY(SELECT json_array_elements_text(CAST(debug_records.record AS json) "
                          "-> 'errors')), ' ') END)")
            return (func.strpos(func.coalesce(raw, ""), needle) > 0) | (func.strpos(func.coalesce(errors, ""),
                                                                                   needle) > 0)
        return record.contains(needle, autoescape=True)

    def debug_page(self, query: DebugQuery = DebugQuery(), *, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """One page of the records ``query`` matches: the ``offset``-th newest on, ``limit`` of them, oldest
        first (as the list shows them)."""
        c = t.debug_records.c
        with self._read() as conn:
            stmt = (select(c.id, c.owner, c.created_at, c.record).where(*self._debug_where(conn, query))
                    .order_by(c.id.desc()).limit(limit).offset(max(0, int(offset))))
            rows = conn.execute(stmt).all()
        return [_as_record(r) for r in reversed(rows)]

    def count_debug_records(self, conversation_id: str | None = None, query: DebugQuery | None = None) -> int:
        """How many records there are (of ``conversation_id``, or matching ``query``)."""
        c = t.debug_records.c
        with self._read() as conn:
            where = self._debug_where(conn, query) if query is not None else []
            if conversation_id:
                where.append(c.conversation_id == conversation_id)
            return int(conn.execute(select(func.count()).select_from(t.debug_records).where(*where)).scalar() or 0)

    def get_debug_records(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The records with these ids (the ones that exist), by id."""
        wanted = sorted({int(i) for i in ids})
        if not wanted:
            return {}
        c = t.debug_records.c
        with self._read() as conn:
            rows = conn.execute(select(c.id, c.owner, c.created_at, c.record).where(c.id.in_(wanted))).all()
        return {r.id: _as_record(r) for r in rows}

    def debug_ids(self, query: DebugQuery = DebugQuery(), *, limit: int = 100) -> list[int]:
        """The ids of the newest ``limit`` records ``query`` matches, newest first."""
        c = t.debug_records.c
        with self._read() as conn:
            stmt = select(c.id).where(*self._debug_where(conn, query)).order_by(c.id.desc()).limit(limit)
            return [row[0] for row in conn.execute(stmt)]

    def debug_values(self, column: str) -> list[str]:
        """The distinct non-empty values of a filter column (``DEBUG_FILTER_COLUMNS``), sorted."""
        if column not in t.DEBUG_FILTER_COLUMNS:
            raise ValueError(column)
        with self._read() as conn:
            return [str(v) for v in distinct_values(conn, "debug_records", column) if str(v) != ""]

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

