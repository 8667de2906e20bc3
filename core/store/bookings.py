"""Bookings made from the diagnosis chat, and their status changes.

The database keeps one live booking per conversation and form: ``form_key`` (a hash of the conversation,
the booking type and the form) is unique among bookings that are not cancelled, so two confirmations of
one form at the same moment, from any number of processes, give one booking and the same number.
Booking numbers are ``KW-<yymmdd>-<6 hex>``: random, so they say nothing about how many bookings there
are, and unique by the column's constraint; a number that is already taken is drawn again.
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Sequence

from sqlalchemy import and_, case, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from core.store import tables as t
from core.store.base import BOOKING_STATUSES, dumps, loads, require, who

# 予約管理's triage order: the most urgent first (🚨 緊急 above 高), newest first within a level
URGENCY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3}
BOOKING_ORDERS = ("newest", "urgency")
NUMBER_ATTEMPTS = 8  # draws of a booking number before giving up (2^-24 a clash each, within one day)


def new_booking_number() -> str:
    return f"KW-{datetime.now(timezone.utc):%y%m%d}-{secrets.token_hex(3).upper()}"


def form_key(conversation_id: str | None, booking_type: str, contact_json: str) -> str | None:
    if not conversation_id:
        return None
    return hashlib.sha256(f"{conversation_id}\x00{booking_type}\x00{contact_json}".encode()).hexdigest()


class BookingsStore:
    """The bookings part of :class:`~core.store.store.Store`."""

    def create_booking(self, conversation_id: str | None, *, booking_type: str, contact: Mapping[str, Any],
                       vehicle_id: str | None = None, vehicle_label: str = "", urgency: str | None = None,
                       can_drive: bool | None = None, symptom: str = "", actor: Any = None,
                       number: str | None = None) -> str:
        """A new booking (status ``requested``); the same conversation submitting the same form again, or
        at the same moment from another process, gets the first booking's number back (see the module
        docstring). ``number``: the reception number already told to the customer (used unless taken)."""
        user_id, label, _, _ = who(actor)
        contact_json = dumps(dict(contact))
        key = form_key(conversation_id, booking_type, contact_json)
        live = and_(t.bookings.c.form_key == key, t.bookings.c.status != "cancelled")
        wanted = number
        for _ in range(NUMBER_ATTEMPTS):
            number, wanted = (wanted or new_booking_number()), None
            try:
                with self._write() as conn:
                    if key is not None:
                        existing = conn.execute(select(t.bookings.c.number).where(live)).scalar()
                        if existing:
                            return existing
                    stamp = self.now()
                    conn.execute(insert(t.bookings).values(
                        number=number, conversation_id=conversation_id, vehicle_id=vehicle_id,
                        vehicle_label=vehicle_label, urgency=urgency, can_drive=can_drive, booking_type=booking_type,
                        contact=contact_json, symptom=symptom[:2000], status="requested", created_by=user_id,
                        created_by_label=label, created_at=stamp, updated_by=user_id, updated_by_label=label, updated_at=stamp,
                        form_key=key))
                    self._audit(conn, actor, "booking.create", "booking", number,
                                {"type": booking_type, "urgency": urgency})
                return number
            except IntegrityError:  # the same form booked by another process just now, or the number is taken
                if key is not None:
                    with self._read() as conn:
                        existing = conn.execute(select(t.bookings.c.number).where(live)).scalar()
                    if existing:
                        return existing
        raise RuntimeError("booking number space exhausted")  # 8 clashes in a row: not a state to hide

    def get_booking(self, number: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(select(t.bookings).where(t.bookings.c.number == number)).first()
        return {**row._asdict(), "contact": loads(row.contact, {})} if row else None

    def list_bookings(self, *, status: Sequence[str] | None = None, urgency: Sequence[str] | None = None,
                      date_from: str | None = None, date_to: str | None = None,
                      conversation_id: str | None = None, limit: int = 500, offset: int = 0,
                      order: str = "newest") -> list[dict[str, Any]]:
        """Newest first (``order="urgency"``: critical, high, medium, low, none, then newest first within
        each), ``limit`` rows from ``offset``. ``date_from`` / ``date_to`` are ISO dates (UTC, inclusive)."""
        if order not in BOOKING_ORDERS:
            raise ValueError(f"unknown booking order: {order!r} (known: {', '.join(BOOKING_ORDERS)})")
        c = t.bookings.c
        keys = [c.created_at.desc(), c.id.desc()]
        if order == "urgency":
            keys.insert(0, case(URGENCY_ORDER, value=c.urgency, else_=len(URGENCY_ORDER)))
        stmt = (select(t.bookings).where(*_bookings_where(status, urgency, date_from, date_to, conversation_id))
                .order_by(*keys).limit(limit).offset(max(0, int(offset))))
        with self._read() as conn:
            return [{**row._asdict(), "contact": loads(row.contact, {})} for row in conn.execute(stmt)]

    def count_bookings(self, *, status: Sequence[str] | None = None, urgency: Sequence[str] | None = None,
                       date_from: str | None = None, date_to: str | None = None,
                       conversation_id: str | None = None) -> int:
        """How many bookings :meth:`list_bookings` would find without a limit."""
        stmt = (select(func.count()).select_from(t.bookings)
                .where(*_bookings_where(status, urgency, date_from, date_to, conversation_id)))
        with self._read() as conn:
            return int(conn.execute(stmt).scalar() or 0)

    def set_booking_status(self, number: str, status: str, actor: Any) -> dict[str, Any]:
        if status not in BOOKING_STATUSES:
            raise ValueError(status)
        require(actor, "booking.update")
        user_id, label, _, _ = who(actor)
        with self._write() as conn:
            row = conn.execute(select(t.bookings).where(t.bookings.c.number == number)).first()
            if row is None:
                raise KeyError(number)
            if row.status == "cancelled" and status != "cancelled":
                raise ValueError("キャンセル済みの予約は変更できません。")
            conn.execute(update(t.bookings).where(t.bookings.c.number == number)
                         .values(status=status, updated_by=user_id, updated_by_label=label, updated_at=self.now()))
            self._audit(conn, actor, f"booking.{status}", "booking", number, {"from": row.status, "to": status})
        return self.get_booking(number) or {}


def _bookings_where(status: Sequence[str] | None, urgency: Sequence[str] | None, date_from: str | None,
                    date_to: str | None, conversation_id: str | None) -> list[Any]:
    """The filters of 予約管理 as SQL conditions, each served by an index (status, urgency, created_at)."""
    c = t.bookings.c
    where: list[Any] = []
    if status:
        where.append(c.status.in_(list(status)))
    if urgency:
        where.append(c.urgency.in_(list(urgency)))
    if date_from:
        where.append(c.created_at >= str(date_from))
    if date_to:
        end = (datetime.fromisoformat(str(date_to)[:10]) + timedelta(days=1)).date().isoformat()
        where.append(c.created_at < end)
    if conversation_id:
        where.append(c.conversation_id == conversation_id)
    return where
