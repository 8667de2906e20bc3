"""The diagnosis flow's ``SessionStore`` (seed 000 ``SessionState`` with rewind snapshots) in the store.

A diagnosis session is a conversation of flow ``diagnosis``: its id is the session id and its
``state["session"]`` the pydantic dump. The TTL of the in-memory store becomes an expiry rule: a
session not updated for ``ttl_seconds`` is marked ``expired`` and reads as unknown. When a session
reaches DONE with a confirmed booking, the booking is written to the bookings table (once: the table
allows one live booking per conversation and form) before the session is, so a session stored as done
always has its booking. While a turn holds the conversation's lease, ``fences[session_id]`` is
``(token, hold)`` and every write checks it (``TurnBusy`` when the lease was lost).

A turn of :class:`~core.diagnosis.conversation.DiagnosisConversations` holds the session's own write
(``held``, and a session created in the turn: :meth:`holding_new`): :meth:`update` leaves it in ``pending``
and the turn's chat write carries it (one transaction for the session, the transcript and the lease; a
booking is still written first, with the session). The
conversation that turn read under its lease is handed to the next :meth:`get` (``loaded``) instead of
being read again.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from core.diagnosis.interview import booking_symptom
from core.diagnosis.models import ChatStep, SessionState
from core.ids import new_id
from core.store.store import Store

DEFAULT_TTL_SECONDS = 24 * 60 * 60


class StoredSessionStore:
    """``core.diagnosis.session_store.SessionStore`` backed by :class:`Store`."""

    def __init__(self, store: Store, *, owner: Any = None, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 clock: Callable[[], float] = time.time, max_diagnostic_turns: int = 8):
        self.store = store
        self.owner = owner
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self.max_diagnostic_turns = max_diagnostic_turns
        self.fences: dict[str, tuple[str, float]] = {}
        self.held: set[str] = set()  # sessions whose state write waits for the turn's chat write
        self.pending: dict[str, dict[str, Any]] = {}  # their write: merge_state, title, status
        self.loaded: dict[str, dict[str, Any]] = {}  # a conversation read under the lease, for the next get()
        self._hold_new = threading.local()  # per thread: hold the writes of sessions created now (see create)

    def create(self) -> SessionState:
        now = self.clock()
        session = SessionState(session_id=new_id(), created_at=now, updated_at=now,
                               max_diagnostic_turns=self.max_diagnostic_turns)
        self.store.create_conversation("diagnosis", self.owner, conversation_id=session.session_id,
                                       title="車両問診", state={"session": session.model_dump(mode="json")})
        if getattr(self._hold_new, "on", False):  # its later writes in this turn go with the turn's chat
            self.held.add(session.session_id)
            self._hold_new.created.append(session.session_id)
        return session

    @contextmanager
    def holding_new(self) -> Iterator[None]:
        """Sessions this thread creates inside are ``held`` like the turn's own (a start, a new session for an
        unknown id, a restart): their state rides in the turn's chat write. Released at the end."""
        self._hold_new.on, self._hold_new.created = True, []
        try:
            yield
        finally:
            for session_id in self._hold_new.created:
                self.held.discard(session_id)
                self.pending.pop(session_id, None)
            self._hold_new.on, self._hold_new.created = False, []

    def get(self, session_id: str | None) -> SessionState | None:
        conversation = self.loaded.pop(session_id or "", None) or self.store.get_conversation(session_id)
        if conversation is None or conversation["flow"] != "diagnosis" or conversation["status"] == "expired":
            return None
        dump = (conversation.get("state") or {}).get("session")
        if not dump:
            return None
        session = SessionState.model_validate(dump)
        if self.clock() - session.updated_at > self.ttl_seconds:
            self.store.update_conversation(session.session_id, status="expired")
            return None
        return session

    def expired(self, session_id: str | None) -> bool:
        """Was ``session_id`` a diagnosis session that expired (rather than an id never issued)?"""
        conversation = self.store.get_conversation(session_id) if session_id else None
        if conversation is None or conversation["flow"] != "diagnosis":
            return False
        if conversation["status"] == "expired":
            return True
        dump = (conversation.get("state") or {}).get("session") or {}
        return self.clock() - float(dump.get("updated_at") or 0) > self.ttl_seconds

    def update(self, session: SessionState) -> None:
        session.updated_at = self.clock()
        title = None
        if session.symptom_text:
            title = f"{session.make or ''} {session.model or ''}: {session.symptom_text}".strip()[:80]
        status = "done" if session.current_step == ChatStep.DONE else "active"
        token, hold = self.fences.get(session.session_id, (None, None))
        booking = session.current_step == ChatStep.DONE and session.booking_type and session.booking_data
        if booking:
            if token is not None:  # a turn that lost its lease books nothing
                self.store.renew_turn(session.session_id, token, hold=hold)
            self.store.create_booking(
                session.session_id, booking_type=session.booking_type, contact=session.booking_data,
                vehicle_id=session.vehicle_id, vehicle_label=" ".join(str(p) for p in (session.make, session.model,
                                                                                        session.year) if p),
                urgency=session.urgency_level, can_drive=session.can_drive, symptom=booking_symptom(session),
                actor=self.owner, number=session.booking_number)
        write = {"merge_state": {"session": session.model_dump(mode="json")}, "title": title, "status": status}
        if session.session_id in self.held and not booking:
            self.pending[session.session_id] = write  # written with the turn's chat (see the module docstring)
            return
        self.store.update_conversation(session.session_id, **write, fence=token, hold=hold)

    def delete(self, session_id: str) -> None:
        self.store.update_conversation(session_id, status="expired")

    def booking_number(self, session_id: str) -> str | None:
        rows = self.store.list_bookings(conversation_id=session_id, limit=1)
        return rows[0]["number"] if rows else None


