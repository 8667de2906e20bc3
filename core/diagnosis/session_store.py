"""Session storage with a time-to-live: the ``SessionStore`` protocol and the in-memory default.

A database-backed store (a later issue) implements the same four methods. Sessions are stored
as deep copies, so a caller mutating a ``SessionState`` does not change the stored one until it
calls ``update``. ``clock`` is injectable so tests can expire sessions without sleeping.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Protocol, runtime_checkable

from core.diagnosis.models import SessionState
from core.ids import new_id

DEFAULT_TTL_SECONDS = 60 * 60
MAX_EXPIRED_IDS = 10_000  # expired ids remembered by the in-memory store


@runtime_checkable
class SessionStore(Protocol):
    def create(self) -> SessionState: ...

    def get(self, session_id: str | None) -> SessionState | None: ...

    def update(self, session: SessionState) -> None: ...

    def delete(self, session_id: str) -> None: ...

    # optional: ``expired(session_id) -> bool`` tells an expired session from an id never issued
    # (the service's notice says which; a store without it reports every missing id as unknown)


class InMemorySessionStore:
    """A dict of sessions; one expires ``ttl_seconds`` after its last update."""

    def __init__(self, ttl_seconds: float = DEFAULT_TTL_SECONDS, clock: Callable[[], float] = time.time,
                 max_diagnostic_turns: int = 8):
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self.max_diagnostic_turns = max_diagnostic_turns
        self._sessions: dict[str, SessionState] = {}
        self._expired_ids: dict[str, None] = {}  # recently expired ids (bounded), to tell them from unknown ones
        self._lock = threading.Lock()

    def _expired(self, session: SessionState) -> bool:
        return self.clock() - session.updated_at > self.ttl_seconds

    def purge_expired(self) -> int:
        with self._lock:
            dead = [sid for sid, s in self._sessions.items() if self._expired(s)]
            for sid in dead:
                del self._sessions[sid]
                self._remember_expired(sid)
        return len(dead)

    def create(self) -> SessionState:
        now = self.clock()
        session = SessionState(session_id=new_id(12), created_at=now, updated_at=now,
                               max_diagnostic_turns=self.max_diagnostic_turns)
        with self._lock:
            self._sessions[session.session_id] = session.model_copy(deep=True)
        return session

    def get(self, session_id: str | None) -> SessionState | None:
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if self._expired(session):
                del self._sessions[session_id]
                self._remember_expired(session_id)
                return None
            return session.model_copy(deep=True)

    def _remember_expired(self, session_id: str) -> None:
        self._expired_ids[session_id] = None
        while len(self._expired_ids) > MAX_EXPIRED_IDS:
            self._expired_ids.pop(next(iter(self._expired_ids)))

    def expired(self, session_id: str | None) -> bool:
        """Was ``session_id`` a session that expired (rather than an id this store never issued)?"""
        with self._lock:
            if session_id in self._expired_ids:
                return True
            session = self._sessions.get(session_id or "")
            return session is not None and self._expired(session)

    def update(self, session: SessionState) -> None:
        session.updated_at = self.clock()
        with self._lock:
            self._sessions[session.session_id] = session.model_copy(deep=True)

    def delete(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)
