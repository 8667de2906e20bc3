"""What every part of the store shares: the engine and its transactions, who did something (actors),
JSON columns, and the audit log."""
from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Protocol

from sqlalchemy import Engine, delete, insert, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InternalError, OperationalError

from core.store import rollups, stamps
from core.store import tables as t
from core.store.db import create_store_engine, default_url, migrate
from core.text.pii import clean_text
from core.validation import ENTRY_FIELDS

ENTRY_STATUSES = ("draft", "confirmed", "archived")
BOOKING_STATUSES = ("requested", "confirmed", "cancelled")
FLOWS = ("knowledge", "diagnosis", "faq")
# Chat-entry keys that hold attachment text: never stored (only the attachment metadata is).
UNSTORED_ENTRY_KEYS = frozenset({"payload", "file_texts"})


class Actor(Protocol):
    """Who does something: ``core.identity.Identity`` or anything shaped like it."""

    @property
    def user_id(self) -> str: ...

    @property
    def label(self) -> str: ...


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def loads(value: str | None, default: Any = None) -> Any:
    if value is None:
        return default
    try:
        return json.loads(value)
    except ValueError:
        return default


def storable_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A chat entry as the store keeps it: without the attachment text (``UNSTORED_ENTRY_KEYS``)."""
    return {k: v for k, v in entry.items() if k not in UNSTORED_ENTRY_KEYS}


def entry_digest(entry: Mapping[str, Any]) -> str:
    """The sha256 of the entry's stored JSON (what :meth:`Store.entry_hashes` reports for it)."""
    return hashlib.sha256(dumps(storable_entry(entry)).encode()).hexdigest()


def _get(value: Any, *path: str) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def derived_turn_columns(turn_json: Any, entry: Any = None) -> dict[str, Any]:
    """The turn's ``mode`` (a knowledge turn's ``control.mode``) and ``citations`` (how many sources it
    cites: the turn's ``citations`` or ``rag_sources``, else the chat entry's ``sources``), read once so
    分析 need not parse the JSON. ``turn_json`` / ``entry`` may be dicts or their JSON text."""
    turn = loads(turn_json) if isinstance(turn_json, str) else turn_json
    chat = loads(entry) if isinstance(entry, str) else entry
    mode = _get(turn, "control", "mode")
    cited = _get(turn, "citations") or _get(turn, "rag_sources")
    if cited is None:
        cited = _get(chat, "sources")
    return {"mode": str(mode)[:20] if isinstance(mode, str) else None,
            "citations": len(cited) if isinstance(cited, list) else 0}


def turn_columns(columns: Mapping[str, Any], entry: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The analytic columns of a turn row that exist in the table, JSON ones serialised; ``mode`` and
    ``citations`` are derived from ``turn_json`` and ``entry`` unless given."""
    values = {k: v for k, v in columns.items() if k in t.turns.c}
    derived = derived_turn_columns(values.get("turn_json"), entry)
    for key, value in derived.items():
        values.setdefault(key, value)
    for key in ("attachments", "turn_json"):
        if values.get(key) is not None and not isinstance(values[key], str):
            values[key] = dumps(values[key])
    return values


class SystemActor:
    """The console itself, for writes no person causes (maintenance commands, migrations of data, the
    scenario runner's own store). It must be passed explicitly: ``None`` is nobody, not the system."""

    user_id = "system"
    label = "システム"
    roles = frozenset({"system"})
    verified = True

    def can(self, permission: str) -> bool:
        return True

    def __repr__(self) -> str:
        return "SYSTEM"


SYSTEM = SystemActor()
UNKNOWN = ("unknown", "不明", "", False)


def who(actor: Any) -> tuple[str, str, str, bool]:
    """(user_id, label, roles, verified) of an actor, for the ``*_by`` columns and the audit log. ``None``
    is recorded as 「不明」 (never as the system: that is :data:`SYSTEM`, said explicitly); a plain string
    (an API or bench owner such as ``"api"``) as itself, unverified and without roles."""
    if actor is None:
        return UNKNOWN
    if isinstance(actor, str):
        return actor, actor, "", False
    roles = ",".join(sorted(getattr(actor, "roles", ()) or ()))
    return (str(getattr(actor, "user_id", "") or ""), str(getattr(actor, "label", "") or ""), roles,
            bool(getattr(actor, "verified", False)))


PERMISSION_JA = {"manual.write": "マニュアルの変更", "prompt.write": "プロンプトの保存", "entry.archive": "ナレッジのアーカイブ",
                 "debug.clear": "デバッグログの消去", "entry.edit": "ナレッジの編集", "entry.confirm": "ナレッジの確定",
                 "booking.update": "予約の変更", "review.work": "回答のレビュー", "review.config": "レビューのスコア設定の変更",
                 "review.unmasked": "個人情報を含む表示"}


def distinct_values(conn: Any, table: str, column: str, limit: int = 1000) -> list[Any]:
    """The distinct non-null values of ``table.column`` in order, at most ``limit``, read from an index whose
    first column is ``column`` one value at a time (a "loose index scan": as many index seeks as there are
    values, however many rows hold them). ``table`` and ``column`` are our own names, never user input."""
    if not (table.isidentifier() and column.isidentifier()):
        raise ValueError(f"{table}.{column}")
    query = text(f"WITH RECURSIVE v(x, n) AS (SELECT MIN({column}), 1 FROM {table} UNION ALL "
                 f"SELECT (SELECT MIN({column}) FROM {table} WHERE {column} > v.x), n + 1 FROM v "
                 f"WHERE v.x IS NOT NULL AND n < :limit) SELECT x FROM v WHERE x IS NOT NULL")
    return [row[0] for row in conn.execute(query, {"limit": int(limit)})]


def require(actor: Any, permission: str) -> None:
    """Fail closed: only an actor that says it may (``actor.can(permission)``) passes. ``None``, a plain
    string or anything without ``can`` is refused, as is :class:`~core.identity.Identity` without the
    role; system-internal writes pass :data:`SYSTEM`."""
    can = None if actor is None or isinstance(actor, str) else getattr(actor, "can", None)
    if not callable(can) or can(permission) is not True:
        raise PermissionError(f"この操作（{PERMISSION_JA.get(permission, '変更')}）を行う権限がありません。")


def clean_fields(entry: Mapping[str, Any], keep_contract_text: bool, *, only_given: bool = False) -> dict[str, str]:
    fields = [f for f in ENTRY_FIELDS if f in entry] if only_given else list(ENTRY_FIELDS)
    return {f: clean_text(entry.get(f), keep_personal_data=keep_contract_text) for f in fields}


# A write failing with one of these means the database does not take writes now (a full disk, a read-only
# file or replica, the server gone), as opposed to a refused write (a constraint) or a bug.
WRITE_OUTAGE_ERRORS = (OperationalError, InternalError)
MIN_FREE_BYTES = 8 * 1024 * 1024  # an SQLite file's disk with less free space than this counts as full
PROBE_BYTES = 64 * 1024  # the health check's growth probe: a new row this large, added and removed


@dataclass(frozen=True)
class Health:
    readable: bool
    writable: bool
    error: BaseException | None = None  # for the server log only


class StoreBase:
    """The engine, the transaction helpers and the audit log every part of the store writes to."""

    def __init__(self, url: str | None = None, *, engine: Engine | None = None, run_migrations: bool = True):
        self.url = url or default_url()
        self.engine = engine or create_store_engine(self.url)
        self._writer = self.engine.execution_options(kaiwa_write=True)
        # PostgreSQL reads in autocommit: at READ COMMITTED each statement takes its own snapshot in a
        # transaction too, so a read's BEGIN and ROLLBACK were two round trips that bought nothing (SQLite
        # keeps its transaction: there one read transaction is one snapshot).
        autocommit = self.engine.dialect.name == "postgresql"
        self._reader = self.engine.execution_options(isolation_level="AUTOCOMMIT") if autocommit else self.engine
        self._writer_alone = (self.engine.execution_options(isolation_level="AUTOCOMMIT", kaiwa_write=True)
                              if autocommit else None)
        # 分析's reads of today, planned once per connection (:meth:`planned_read_connection`): made on first
        # use, on PostgreSQL only, and only with an engine of the store's own (one handed in keeps its settings)
        self._planned: Engine | None = None
        self._plans_own = engine is None and autocommit
        self._planned_lock = threading.Lock()
        self._write_failure: BaseException | None = None  # the last write's outage error, until one succeeds
        self._failure_lock = threading.Lock()
        if run_migrations:
            migrate(self.engine)
            with self._writer.begin() as conn:  # a later migration that copies a table drops its triggers
                stamps.ensure(conn)
                rollups.ensure(conn)

    @staticmethod
    def now() -> str:
        """The time every row is stamped with (:func:`now_iso`, which a test may replace)."""
        return now_iso()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def _outage_noted(self) -> Iterator[None]:
        """Whether a write failed because the database takes no writes (a full disk, a read-only file) is
        remembered until :meth:`check_health` sees a new row stored again (a small update that succeeds
        meanwhile proves nothing: a full disk still rewrites a row in place)."""
        try:
            yield
        except WRITE_OUTAGE_ERRORS as exc:
            with self._failure_lock:
                self._write_failure = exc
            raise

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """A write transaction (an outage remembered: :meth:`_outage_noted`)."""
        with self._outage_noted(), self._writer.begin() as conn:
            yield conn

    @contextmanager
    def _write_alone(self) -> Iterator[Any]:
        """A write of one statement (or one statement and reads after it), which is its own transaction: on
        PostgreSQL in autocommit (no ``BEGIN`` and ``COMMIT`` round trips around it), elsewhere
        :meth:`_write`. An outage is remembered as :meth:`_write` does."""
        if self._writer_alone is None:
            with self._write() as conn:
                yield conn
            return
        with self._outage_noted(), self._writer_alone.connect() as conn:
            yield conn

    def read_connection(self) -> Any:
        """``with store.read_connection() as conn:`` a connection to read with (nothing written through
        it); on PostgreSQL in autocommit (every statement its own snapshot, as at READ COMMITTED in a
        transaction, without the ``BEGIN`` and ``ROLLBACK``)."""
        return self._reader.connect()

    _read = read_connection

    def planned_read_connection(self) -> Any:
        """``with store.planned_read_connection() as conn:`` a read connection for the same few small reads made
        again and again (分析's pieces of today, after every write): on PostgreSQL, in autocommit, each statement
        is prepared on its first execution and planned once per connection (a generic plan: planning such a
        read took several times as long as running it); elsewhere, and with an engine handed in (whose
        settings, e.g. no prepared statements behind a pooler, it keeps), :meth:`read_connection`."""
        if not self._plans_own:
            return self.read_connection()
        with self._planned_lock:
            if self._planned is None:
                self._planned = create_store_engine(self.url, planned=True).execution_options(
                    isolation_level="AUTOCOMMIT")
        return self._planned.connect()

    def dispose(self) -> None:
        """Close every pooled connection of the store (its engine's and the planned reads')."""
        self.engine.dispose()
        if self._planned is not None:
            self._planned.engine.dispose()

    def _disk_full(self) -> BaseException | None:
        """An SQLite file's disk with less than :data:`MIN_FREE_BYTES` free (None when it has room, or for
        a server database)."""
        if self.dialect != "sqlite":
            return None
        database = make_url(self.url).database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        from pathlib import Path

        try:
            free = shutil.disk_usage(Path(database).resolve().parent).free
        except OSError:
            return None
        return OSError(28, f"only {free} bytes free") if free < MIN_FREE_BYTES else None

    def check_health(self) -> Health:
        """Whether the database answers a read and takes writes, told truthfully. Writable means: the one
        ``heartbeat`` row is rewritten, an SQLite file's disk has :data:`MIN_FREE_BYTES` free, and — when a
        write of this process failed because the database took none (a full disk lets a row be rewritten in
        place long after new rows fail) — a new row of :data:`PROBE_BYTES` is added and removed again (that
        success counts as the recovery). Never raises."""
        try:
            with self._read() as conn:
                conn.execute(text("SELECT 1")).scalar()
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            return Health(False, False, exc)
        full = self._disk_full()
        if full is not None:
            return Health(True, False, full)
        with self._failure_lock:
            failed = self._write_failure
        try:
            with self._write() as conn:
                if not conn.execute(update(t.heartbeat).where(t.heartbeat.c.id == 1).values(at=now_iso())).rowcount:
                    conn.execute(insert(t.heartbeat).values(id=1, at=now_iso()))
                if failed is not None:  # grow the database, then shrink it back
                    conn.execute(insert(t.integrity_write_probe).values(payload=secrets.token_hex(PROBE_BYTES // 2)))
                    conn.execute(delete(t.integrity_write_probe))
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            return Health(True, False, exc)
        with self._failure_lock:
            if self._write_failure is failed:
                self._write_failure = None
        return Health(True, True)

    def change_stamp(self) -> tuple[tuple[str, int], ...] | None:
        """Each stamped table's change stamp (``core.store.stamps``): equal tuples mean nothing was written
        in between. None on an engine without stamps."""
        with self._read() as conn:
            values = stamps.read(conn)
        return None if values is None else tuple(sorted(values.items()))

    # ---- audit -----------------------------------------------------------------------------------
    def _audit(self, conn, actor: Any, action: str, target_type: str, target_id: Any, detail: Any = None) -> None:
        user_id, label, roles, verified = who(actor)
        conn.execute(insert(t.audit_log).values(
            at=self.now(), actor=user_id, actor_label=label, actor_roles=roles, verified=verified, action=action,
            target_type=target_type, target_id=str(target_id), detail=None if detail is None else dumps(detail)))

    @contextmanager
    def audited(self, actor: Any, permission: str, action: str, target_type: str, target_id: Any,
                detail: Any = None) -> Iterator[Any]:
        """For a change outside the database (a file) that only some roles may make: ``require`` first, then
        the body runs inside the transaction that writes its audit row, so a failing body leaves no row and
        a change always has one."""
        require(actor, permission)
        with self._write() as conn:
            self._audit(conn, actor, action, target_type, target_id, detail)
            yield conn

    def list_audit(self, target_type: str | None = None, target_id: Any = None, limit: int = 200) -> list[dict]:
        query = select(t.audit_log).order_by(t.audit_log.c.id.desc()).limit(limit)
        if target_type:
            query = query.where(t.audit_log.c.target_type == target_type)
        if target_id is not None:
            query = query.where(t.audit_log.c.target_id == str(target_id))
        with self._read() as conn:
            return [{**row._asdict(), "detail": loads(row.detail)} for row in conn.execute(query)]
