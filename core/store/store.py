"""The shared store: conversations and their turns, the knowledge library, bookings, debug records.

One ``Store`` per database URL (``get_store()``), safe to share between threads and processes: every
write is one short transaction, and SQLite writers queue on ``BEGIN IMMEDIATE``. Rows a person causes
record who (``Identity.user_id`` / label / roles) and when; changes to shared data (entries,
bookings, debug records) check the actor's permission and leave an audit row.

Nothing here imports Streamlit: pages, the HTTP API and tests use the same methods.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Protocol, Sequence

from sqlalchemy import Engine, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from core.ids import new_id
from core.knowledge.export import ENTRY_FIELDS, clean_text
from core.store import tables as t
from core.store.db import create_store_engine, default_url, migrate

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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def _loads(value: str | None, default: Any = None) -> Any:
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
    return hashlib.sha256(_dumps(storable_entry(entry)).encode()).hexdigest()


def _turn_columns(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The analytic columns of a turn row that exist in the table, JSON ones serialised."""
    values = {k: v for k, v in columns.items() if k in t.turns.c}
    for key in ("attachments", "turn_json"):
        if values.get(key) is not None and not isinstance(values[key], str):
            values[key] = _dumps(values[key])
    return values


def _who(actor: Any) -> tuple[str, str, str, bool]:
    """(user_id, label, roles, verified) of an actor; ``None`` is the system itself."""
    if actor is None:
        return "system", "システム", "system", True
    if isinstance(actor, str):
        return actor, actor, "", False
    roles = ",".join(sorted(getattr(actor, "roles", ()) or ()))
    return (str(getattr(actor, "user_id", "") or ""), str(getattr(actor, "label", "") or ""), roles,
            bool(getattr(actor, "verified", False)))


def _require(actor: Any, permission: str) -> None:
    can = getattr(actor, "can", None)
    if callable(can) and not can(permission):
        raise PermissionError(f"この操作（{permission}）を行う権限がありません。")


def _clean_fields(entry: Mapping[str, Any], keep_contract_text: bool, *, only_given: bool = False) -> dict[str, str]:
    fields = [f for f in ENTRY_FIELDS if f in entry] if only_given else list(ENTRY_FIELDS)
    return {f: clean_text(entry.get(f), keep_personal_data=keep_contract_text) for f in fields}


class Store:
    """All reads and writes of the console's shared data."""

    def __init__(self, url: str | None = None, *, engine: Engine | None = None, run_migrations: bool = True):
        self.url = url or default_url()
        self.engine = engine or create_store_engine(self.url)
        self._writer = self.engine.execution_options(kaiwa_write=True)
        if run_migrations:
            migrate(self.engine)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def _write(self):
        return self._writer.begin()

    def _read(self):
        return self.engine.connect()

    # ---- audit -----------------------------------------------------------------------------------
    def _audit(self, conn, actor: Any, action: str, target_type: str, target_id: Any, detail: Any = None) -> None:
        user_id, label, roles, verified = _who(actor)
        conn.execute(insert(t.audit_log).values(
            at=now_iso(), actor=user_id, actor_label=label, actor_roles=roles, verified=verified, action=action,
            target_type=target_type, target_id=str(target_id), detail=None if detail is None else _dumps(detail)))

    def list_audit(self, target_type: str | None = None, target_id: Any = None, limit: int = 200) -> list[dict]:
        query = select(t.audit_log).order_by(t.audit_log.c.id.desc()).limit(limit)
        if target_type:
            query = query.where(t.audit_log.c.target_type == target_type)
        if target_id is not None:
            query = query.where(t.audit_log.c.target_id == str(target_id))
        with self._read() as conn:
            return [{**row._asdict(), "detail": _loads(row.detail)} for row in conn.execute(query)]

    # ---- conversations ---------------------------------------------------------------------------
    def create_conversation(self, flow: str, owner: Any = None, *, conversation_id: str | None = None,
                            title: str = "", state: Mapping[str, Any] | None = None) -> str:
        if flow not in FLOWS:
            raise ValueError(f"unknown flow: {flow}")
        user_id, label, _, _ = _who(owner)
        cid = conversation_id or new_id()
        stamp = now_iso()
        with self._write() as conn:
            conn.execute(insert(t.conversations).values(
                id=cid, flow=flow, title=title[:200], status="active", owner=user_id, owner_label=label,
                created_at=stamp, updated_at=stamp, state=None if state is None else _dumps(dict(state)),
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
        data["state"] = _loads(row.state, {}) or {}
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
            values: dict[str, Any] = {"updated_at": now_iso(), "state_version": t.conversations.c.state_version + 1}
            if merge_state is not None:
                current = conn.execute(select(t.conversations.c.state)
                                       .where(t.conversations.c.id == conversation_id)).scalar()
                merged = {**(_loads(current, {}) or {}), **dict(merge_state)}
                values["state"] = _dumps(merged)
            if state is not None:
                values["state"] = _dumps(dict(state))
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
        values = _turn_columns(columns)
        for attempt in range(5):  # PostgreSQL: two writers may pick the same seq; the unique index decides
            try:
                with self._write() as conn:
                    seq = (conn.execute(select(func.coalesce(func.max(t.turns.c.seq), 0))
                                        .where(t.turns.c.conversation_id == conversation_id)).scalar() or 0) + 1
                    conn.execute(insert(t.turns).values(
                        conversation_id=conversation_id, seq=seq, entry_id=entry_id, superseded=False, role=role,
                        created_at=now_iso(), entry=_dumps(stored), author=_who(author)[0], **values))
                    conn.execute(update(t.conversations).where(t.conversations.c.id == conversation_id)
                                 .values(updated_at=now_iso()))
                return seq
            except IntegrityError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def update_turn_entry(self, conversation_id: str, entry: Mapping[str, Any], **columns: Any) -> None:
        stored = storable_entry(entry)
        values = _turn_columns(columns)
        with self._write() as conn:
            conn.execute(update(t.turns).where(and_(t.turns.c.conversation_id == conversation_id,
                                                    t.turns.c.entry_id == str(stored.get("id"))))
                         .values(entry=_dumps(stored), **values))

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
            data["entry"] = _loads(row.entry, {})
            data["turn_json"] = _loads(row.turn_json)
            data["attachments"] = _loads(row.attachments, [])
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

    # ---- knowledge library -----------------------------------------------------------------------
    def record_knowledge(self, conversation_id: str | None, entries: Sequence[Mapping[str, Any]], actor: Any = None,
                         *, keep_contract_text: bool = False) -> list[int]:
        """The model drafted ``entries``: update this conversation's open drafts slot by slot, or start
        new drafts. A confirmed or archived entry is never changed by a later turn. Personal data is
        masked unless ``keep_contract_text``; secrets are always removed."""
        user_id, label, _, _ = _who(actor)
        ids: list[int] = []
        with self._write() as conn:
            for slot, entry in enumerate(entries):
                data = _clean_fields(entry, keep_contract_text)
                stamp = now_iso()
                row = None
                if conversation_id:
                    row = conn.execute(select(t.knowledge_entries).where(and_(
                        t.knowledge_entries.c.conversation_id == conversation_id,
                        t.knowledge_entries.c.slot == slot, t.knowledge_entries.c.status == "draft"))
                        .order_by(t.knowledge_entries.c.id.desc())).first()
                if row is None:
                    entry_id = conn.execute(insert(t.knowledge_entries).values(
                        conversation_id=conversation_id, slot=slot, status="draft", version=1, created_by=user_id,
                        created_by_label=label, created_at=stamp, updated_by=user_id, updated_by_label=label,
                        updated_at=stamp, **data).returning(t.knowledge_entries.c.id)).scalar_one()
                    self._history(conn, entry_id, 1, "drafted", data, "draft", user_id, label)
                else:
                    entry_id = row.id
                    if any(getattr(row, f) != data[f] for f in ENTRY_FIELDS):
                        version = row.version + 1
                        conn.execute(update(t.knowledge_entries).where(t.knowledge_entries.c.id == entry_id).values(
                            version=version, updated_by=user_id, updated_by_label=label, updated_at=stamp, **data))
                        self._history(conn, entry_id, version, "model_update", data, "draft", user_id, label)
                ids.append(entry_id)
        return ids

    @staticmethod
    def _history(conn, entry_id: int, version: int, action: str, data: Mapping[str, Any], status: str,
                 user_id: str, label: str) -> None:
        conn.execute(insert(t.entry_history).values(
            entry_id=entry_id, version=version, action=action, data=_dumps(dict(data)), status=status,
            changed_by=user_id, changed_by_label=label, changed_at=now_iso()))

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

    def list_entries(self, *, status: Sequence[str] | str | None = None, contract_type: Sequence[str] | str | None = None,
                     query: str = "", conversation_id: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        """Library search: status / contract type filters and a substring match over the six fields."""
        c = t.knowledge_entries.c
        stmt = select(t.knowledge_entries).order_by(c.updated_at.desc(), c.id.desc()).limit(limit)
        if status:
            stmt = stmt.where(c.status.in_([status] if isinstance(status, str) else list(status)))
        if contract_type:
            stmt = stmt.where(c.contract_type.in_([contract_type] if isinstance(contract_type, str)
                                                  else list(contract_type)))
        if conversation_id:
            stmt = stmt.where(c.conversation_id == conversation_id)
        for word in query.split()[:8]:
            stmt = stmt.where(or_(*[getattr(c, f).contains(word[:100], autoescape=True) for f in ENTRY_FIELDS]))
        with self._read() as conn:
            return [row._asdict() for row in conn.execute(stmt)]

    def contract_types(self) -> list[str]:
        c = t.knowledge_entries.c
        with self._read() as conn:
            return [r[0] for r in conn.execute(select(c.contract_type).where(c.contract_type != "").distinct()
                                               .order_by(c.contract_type))]

    def edit_entry(self, entry_id: int, changes: Mapping[str, Any], actor: Any, *,
                   keep_contract_text: bool = False) -> dict[str, Any]:
        """A person edits fields of an entry (any status but archived); history keeps every version.
        Edited text is masked like drafted text (secrets always)."""
        _require(actor, "entry.edit")
        user_id, label, _, _ = _who(actor)
        with self._write() as conn:
            row = conn.execute(select(t.knowledge_entries).where(t.knowledge_entries.c.id == int(entry_id))).first()
            if row is None:
                raise KeyError(entry_id)
            if row.status == "archived":
                raise ValueError("アーカイブ済みのナレッジは編集できません。先に復元してください。")
            data = {f: getattr(row, f) for f in ENTRY_FIELDS}
            data.update(_clean_fields({f: changes[f] for f in ENTRY_FIELDS if f in changes}, keep_contract_text,
                                      only_given=True))
            if all(getattr(row, f) == data[f] for f in ENTRY_FIELDS):
                return row._asdict()
            version = row.version + 1
            conn.execute(update(t.knowledge_entries).where(t.knowledge_entries.c.id == row.id).values(
                version=version, updated_by=user_id, updated_by_label=label, updated_at=now_iso(), **data))
            self._history(conn, row.id, version, "edit", data, row.status, user_id, label)
            self._audit(conn, actor, "entry.edit", "knowledge_entry", row.id,
                        {"fields": [f for f in ENTRY_FIELDS if getattr(row, f) != data[f]]})
        return self.get_entry(entry_id) or {}

    _TRANSITIONS = {"confirm": ("draft", "confirmed", "entry.confirm"),
                    "archive": (None, "archived", "entry.archive"),
                    "restore": ("archived", "draft", "entry.archive")}

    def set_entry_status(self, entry_id: int, action: str, actor: Any) -> dict[str, Any]:
        """``confirm`` (draft → confirmed), ``archive`` (any → archived), ``restore`` (archived → draft)."""
        if action not in self._TRANSITIONS:
            raise ValueError(action)
        source, target, permission = self._TRANSITIONS[action]
        _require(actor, permission)
        user_id, label, _, _ = _who(actor)
        with self._write() as conn:
            row = conn.execute(select(t.knowledge_entries).where(t.knowledge_entries.c.id == int(entry_id))).first()
            if row is None:
                raise KeyError(entry_id)
            if source is not None and row.status != source:
                raise ValueError(f"この状態（{row.status}）からは {action} できません。")
            stamp = now_iso()
            values: dict[str, Any] = {"status": target, "version": row.version + 1, "updated_by": user_id,
                                      "updated_by_label": label, "updated_at": stamp}
            if target == "confirmed":
                values.update(confirmed_by=user_id, confirmed_at=stamp)
            conn.execute(update(t.knowledge_entries).where(t.knowledge_entries.c.id == row.id).values(**values))
            self._history(conn, row.id, row.version + 1, action, {f: getattr(row, f) for f in ENTRY_FIELDS},
                          target, user_id, label)
            self._audit(conn, actor, f"entry.{action}", "knowledge_entry", row.id, {"from": row.status, "to": target})
        return self.get_entry(entry_id) or {}

    def entry_history(self, entry_id: int) -> list[dict[str, Any]]:
        query = (select(t.entry_history).where(t.entry_history.c.entry_id == int(entry_id))
                 .order_by(t.entry_history.c.version, t.entry_history.c.id))
        with self._read() as conn:
            return [{**row._asdict(), "data": _loads(row.data, {})} for row in conn.execute(query)]

    # ---- bookings --------------------------------------------------------------------------------
    def create_booking(self, conversation_id: str | None, *, booking_type: str, contact: Mapping[str, Any],
                       vehicle_id: str | None = None, vehicle_label: str = "", urgency: str | None = None,
                       can_drive: bool | None = None, symptom: str = "", actor: Any = None) -> str:
        """A new booking (status ``requested``); the same conversation submitting the same form twice
        gets the first booking's number back."""
        user_id, label, _, _ = _who(actor)
        contact_json = _dumps(dict(contact))
        with self._write() as conn:
            if conversation_id:
                existing = conn.execute(select(t.bookings.c.number).where(and_(
                    t.bookings.c.conversation_id == conversation_id, t.bookings.c.booking_type == booking_type,
                    t.bookings.c.contact == contact_json, t.bookings.c.status != "cancelled"))).scalar()
                if existing:
                    return existing
            stamp = now_iso()
            number = f"KW-{datetime.now(timezone.utc):%y%m%d}-{secrets.token_hex(3).upper()}"
            conn.execute(insert(t.bookings).values(
                number=number, conversation_id=conversation_id, vehicle_id=vehicle_id, vehicle_label=vehicle_label,
                urgency=urgency, can_drive=can_drive, booking_type=booking_type, contact=contact_json,
                symptom=symptom[:2000], status="requested", created_by=user_id, created_by_label=label,
                created_at=stamp, updated_by=user_id, updated_at=stamp))
            self._audit(conn, actor, "booking.create", "booking", number, {"type": booking_type, "urgency": urgency})
        return number

    def get_booking(self, number: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(select(t.bookings).where(t.bookings.c.number == number)).first()
        return {**row._asdict(), "contact": _loads(row.contact, {})} if row else None

    def list_bookings(self, *, status: Sequence[str] | None = None, urgency: Sequence[str] | None = None,
                      date_from: str | None = None, date_to: str | None = None,
                      conversation_id: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        """Newest first. ``date_from`` / ``date_to`` are ISO dates (UTC, inclusive)."""
        c = t.bookings.c
        stmt = select(t.bookings).order_by(c.created_at.desc()).limit(limit)
        if status:
            stmt = stmt.where(c.status.in_(list(status)))
        if urgency:
            stmt = stmt.where(c.urgency.in_(list(urgency)))
        if date_from:
            stmt = stmt.where(c.created_at >= str(date_from))
        if date_to:
            end = (datetime.fromisoformat(str(date_to)[:10]) + timedelta(days=1)).date().isoformat()
            stmt = stmt.where(c.created_at < end)
        if conversation_id:
            stmt = stmt.where(c.conversation_id == conversation_id)
        with self._read() as conn:
            return [{**row._asdict(), "contact": _loads(row.contact, {})} for row in conn.execute(stmt)]

    def set_booking_status(self, number: str, status: str, actor: Any) -> dict[str, Any]:
        if status not in BOOKING_STATUSES:
            raise ValueError(status)
        _require(actor, "booking.update")
        user_id, _, _, _ = _who(actor)
        with self._write() as conn:
            row = conn.execute(select(t.bookings).where(t.bookings.c.number == number)).first()
            if row is None:
                raise KeyError(number)
            if row.status == "cancelled" and status != "cancelled":
                raise ValueError("キャンセル済みの予約は変更できません。")
            conn.execute(update(t.bookings).where(t.bookings.c.number == number)
                         .values(status=status, updated_by=user_id, updated_at=now_iso()))
            self._audit(conn, actor, f"booking.{status}", "booking", number, {"from": row.status, "to": status})
        return self.get_booking(number) or {}

    # ---- debug records ---------------------------------------------------------------------------
    def add_debug_record(self, record: Mapping[str, Any], owner: Any = None) -> int:
        """Store one (already masked) debug record, shared by every operator; returns its id."""
        with self._write() as conn:
            return conn.execute(insert(t.debug_records).values(
                conversation_id=str(record.get("session_id") or "")[:80] or None,
                created_at=str(record.get("time") or now_iso()), owner=_who(owner)[0],
                flow=record.get("flow"), step=str(record.get("step") or "")[:60], provider=record.get("provider"),
                model=str(record.get("model") or "")[:200], strategy=record.get("strategy"),
                outcome=str(record.get("outcome") or "")[:80], record=_dumps(dict(record)))
                .returning(t.debug_records.c.id)).scalar_one()

    def annotate_debug_record(self, record_id: int, fields: Mapping[str, Any]) -> None:
        """Add keys to a stored record (e.g. the judgment method, known only after later calls)."""
        with self._write() as conn:
            current = conn.execute(select(t.debug_records.c.record).where(t.debug_records.c.id == record_id)).scalar()
            if current is not None:
                conn.execute(update(t.debug_records).where(t.debug_records.c.id == record_id)
                             .values(record=_dumps({**(_loads(current, {}) or {}), **dict(fields)})))

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
        return [{**(_loads(r.record, {}) or {}), "id": r.id, "owner": r.owner} for r in reversed(rows)]

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
        _require(actor, "debug.clear")
        stmt = delete(t.debug_records)
        if conversation_id:
            stmt = stmt.where(t.debug_records.c.conversation_id == conversation_id)
        with self._write() as conn:
            count = conn.execute(stmt).rowcount or 0
            self._audit(conn, actor, "debug.clear", "debug_records", conversation_id or "*", {"deleted": count})
        return count


_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()


def get_store(url: str | None = None) -> Store:
    """The process-wide store for ``url`` (default ``KAIWA_DB_URL`` or ``var/kaiwa.db``), migrated once."""
    key = url or default_url()
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            store = _stores[key] = Store(key)
        return store
