"""How many chat turns one API worker runs at once, and one turn at a time per session.

``POST /api/chat`` hands its turn (the store, the model, e5: blocking work) to the thread pool. Without a
bound, every request waiting for the CPU held a pool thread, and all of them took turns at the GIL: with 64
clients, 40 threads switching every 5 ms, each turn's Python pausing for the others'. :class:`TurnGate` lets
at most :data:`TURNS_IN_FLIGHT` turns into the pool (``KAIWA_API_TURNS_IN_FLIGHT``); the others wait in the
event loop, holding nothing but their request, first come first served. Four is two per core: while one
turn waits for e5 (outside the GIL) or the database, another computes.

**A session's turns enter one at a time.** A second turn of a session already running waits here, in the
event loop, for at most the turn wait (``KAIWA_TURN_WAIT``), then gets the same 409 as a turn whose
session's lease is held by another worker: a client sending many turns of one session at once occupies one
place, never all of them (inside the pool, a turn waiting for its session's lease would hold its place for
up to the whole wait). Turns of a session started by another worker still wait for the lease in the store.

The gate belongs to one event loop (each test client runs its own): it is made again when the loop changes.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from core.env import bounded
from core.rag.embeddings import REQUESTS
from core.store.conversations import TurnBusy, turn_wait

TURNS_IN_FLIGHT = 4  # turns of one worker handed to the thread pool at once; KAIWA_API_TURNS_IN_FLIGHT


def turns_in_flight() -> int:
    """``KAIWA_API_TURNS_IN_FLIGHT``, else :data:`TURNS_IN_FLIGHT` (1–64; an unusable value falls back)."""
    return bounded("KAIWA_API_TURNS_IN_FLIGHT", TURNS_IN_FLIGHT, 1, 64, cast=int)


@dataclass
class _Session:
    lock: asyncio.Lock
    users: int = 0  # turns running or waiting: the entry is dropped when none is left


class TurnGate:
    """``async with gate.enter(session_id, wait):`` around a turn's hand-over to the pool."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._places: asyncio.Semaphore | None = None
        self._sessions: dict[str, _Session] = {}
        self.running = self.waiting = 0  # turns in the pool now, turns waiting for a place

    def _for_this_loop(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._places is None:
            self._loop, self._sessions = loop, {}
            self._places = asyncio.Semaphore(self.limit or turns_in_flight())
        return self._places

    @asynccontextmanager
    async def enter(self, session_id: str | None, wait: float | None = None) -> AsyncIterator[None]:
        places = self._for_this_loop()
        session = self._session(session_id) if session_id else None
        try:
            if session is not None:
                if not session.lock.locked():
                    await session.lock.acquire()  # free: taken at once, whatever the wait
                else:
                    timeout = max(0.0, turn_wait() if wait is None else wait)
                    try:
                        await asyncio.wait_for(session.lock.acquire(), timeout=timeout)
                    except TimeoutError:
                        raise TurnBusy(str(session_id)) from None
            try:
                self.waiting += 1
                try:
                    await places.acquire()
                finally:
                    self.waiting -= 1
                self.running += 1
                try:
                    with REQUESTS.serving():  # a lone turn's query vector may use both cores
                        yield
                finally:
                    self.running -= 1
                    places.release()
            finally:
                if session is not None:
                    session.lock.release()
        finally:
            if session is not None:
                self._leave(str(session_id), session)

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session(asyncio.Lock())
        session.users += 1
        return session

    def _leave(self, session_id: str, session: _Session) -> None:
        session.users -= 1
        if not session.users and self._sessions.get(session_id) is session:
            del self._sessions[session_id]

    def sessions(self) -> int:
        """Sessions with a turn running or waiting (for tests: the table does not grow)."""
        return len(self._sessions)
