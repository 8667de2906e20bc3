"""Conversations and their turns: one row per chat entry, superseded rather than deleted; one turn of a
conversation at a time, across processes (the turn lease).

**The turn lease.** Every flow reads a conversation, runs a turn (model calls: seconds), then writes it
back. Two turns of one conversation at once (a double-click, a client retrying after a timeout, the same
conversation in the console and through the HTTP API) would both read the same state and the later write
would silently drop the earlier turn. :meth:`ConversationsStore.turn` serialises them on both engines with
one conditional ``UPDATE`` of the conversation's row (``turn_token`` / ``turn_until``), which SQLite runs
under ``BEGIN IMMEDIATE`` and PostgreSQL under its row lock: a second turn waits (polling) until the first
releases it, and gives up after ``wait`` seconds with :class:`TurnBusy` (the API's 409). Writes made under
the lease are fenced (:meth:`ConversationsStore.renew_turn`, ``update_conversation(fence=…)``): a turn whose
lease was taken over meanwhile raises :class:`TurnBusy` instead of overwriting the newer turn.

**A short, heartbeat-renewed lease.** The lease is stored for :func:`turn_lease` seconds (15 s;
``KAIWA_TURN_LEASE``) and, while the turn runs, the process's heartbeat thread (one for every running turn,
:data:`HEARTBEATS`) renews it every third of that, up to the turn's own bound ``hold`` (its deadline and a
margin: a hung turn is not kept alive for ever). So a process killed in the middle of a turn (``kill -9``,
an OOM kill, a lost machine) blocks its conversation for at most one lease (≤ 15 s after its last
heartbeat), and a turn that fails gives the lease back at once; when giving it back fails too (a full disk,
the database gone), it is retried in the background until it succeeds or the lease has lapsed by itself.
"""
from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Iterable, Iterator, Mapping, Sequence

from sqlalchemy import and_, bindparam, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from core.env import bounded
from core.ids import new_id
from core.store import tables as t
from core.store.base import FLOWS, dumps, loads, storable_entry, turn_columns, who

TURN_WAIT_SECONDS = 30.0  # how long a turn waits for the one before it (then TurnBusy / 409); KAIWA_TURN_WAIT
TURN_LEASE_SECONDS = 15.0  # a turn's lease lapses this long after its last heartbeat; KAIWA_TURN_LEASE
RELEASE_RETRY_SECONDS = 0.25  # how often a lease that could not be given back is tried again
logger = logging.getLogger(__name__)
TURN_BUSY_MESSAGE = ("この会話では前のメッセージをまだ処理しています。入力した内容はそのままです。"
                     "少し待ってからもう一度送信してください。")


class TurnBusy(RuntimeError):
    """Another turn of this conversation holds the lease (still running, or it took the lease over)."""

    def __init__(self, conversation_id: str, message: str = TURN_BUSY_MESSAGE):
        super().__init__(message)
        self.conversation_id = conversation_id
        self.message = message


def turn_wait(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a turn waits for a running turn of the same conversation: ``KAIWA_TURN_WAIT``, else
    :data:`TURN_WAIT_SECONDS` (an unusable value falls back to the default)."""
    return bounded("KAIWA_TURN_WAIT", TURN_WAIT_SECONDS, 0, 3600, environ=environ)


# Every analytic column a turn row may carry: a multi-row insert names the same keys in every row.
_TURN_DEFAULTS = {**{k: None for k in ("user_input", "attachments", "turn_json", "step", "provider", "model", "method",
                                         "attempts", "latency_ms", "error_type", "raw_output", "mode", "citations")},
                  "ok": True}


def turn_lease(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a turn's lease lasts without a heartbeat: ``KAIWA_TURN_LEASE`` (0.5–300), else
    :data:`TURN_LEASE_SECONDS`."""
    return bounded("KAIWA_TURN_LEASE", TURN_LEASE_SECONDS, 0.5, 300, environ=environ)


class _Heartbeat:
    """One turn's lease, renewed every third of the lease by the process's heartbeat thread
    (:data:`HEARTBEATS`) until stopped, until the lease is lost, or until the turn's own bound ``hold`` has
    passed (then the lease lapses)."""

    def __init__(self, store: ConversationsStore, conversation_id: str, token: str, hold: float, lease: float):
        self.store, self.conversation_id, self.token = store, conversation_id, token
        self.lease = lease
        self.until = time.monotonic() + hold
        self.due = time.monotonic() + lease / 3

    def start(self) -> None:
        HEARTBEATS.add(self)

    def stop(self) -> None:
        HEARTBEATS.discard(self)

    def beat(self) -> bool:
        """Renew the lease once; False when it is not to be renewed again."""
        remaining = self.until - time.monotonic()
        if remaining <= 0:
            return False
        try:
            self.store.renew_turn(self.conversation_id, self.token, hold=min(self.lease, remaining))
        except TurnBusy:
            return False
        except Exception:  # noqa: BLE001 - the database is away for a moment: the next beat tries again
            logger.warning("turn lease heartbeat failed", exc_info=True)
        return True


class _Heartbeats:
    """The process's one heartbeat thread for every running turn (it was a thread per turn: each turn
    started one and joined it, two thread hand-overs under the GIL on every API request). It sleeps until
    the earliest renewal is due; a turn shorter than a third of its lease is never renewed."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._live: dict[int, _Heartbeat] = {}
        self._target: float | None = None  # when the thread wakes next (None: when a turn is added)
        self._thread: threading.Thread | None = None
        self.threads_started = 0

    def add(self, beat: _Heartbeat) -> None:
        with self._cond:
            self._live[id(beat)] = beat
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="turn-lease-heartbeat", daemon=True)
                self._thread.start()
                self.threads_started += 1
            elif self._target is None or beat.due < self._target:
                self._cond.notify()

    def discard(self, beat: _Heartbeat) -> None:
        with self._cond:
            self._live.pop(id(beat), None)

    def __len__(self) -> int:
        return len(self._live)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                self._target = min((b.due for b in self._live.values()), default=None)
                if self._target is None or self._target > now:
                    self._cond.wait(None if self._target is None else self._target - now)
                    continue
                due = [b for b in self._live.values() if b.due <= now]
                for beat in due:
                    beat.due = now + beat.lease / 3
                self._cond.release()
                try:
                    done = [beat for beat in due if not beat.beat()]
                finally:
                    self._cond.acquire()
                for beat in done:
                    self._live.pop(id(beat), None)


HEARTBEATS = _Heartbeats()


def _lease_time(offset: float = 0.0) -> str:
    """The wall clock the lease is judged by (never ``Store.now``, which tests may freeze)."""
    return (datetime.now(timezone.utc) + timedelta(seconds=offset)).isoformat(timespec="milliseconds")


def _conversation_row(row: Any) -> dict[str, Any]:
    """A conversation's row as a dict, its state parsed."""
    data = row._asdict()
    data["state"] = loads(row.state, {}) or {}
    return data


def _conversation_values(conn: Any, conversation_id: str, stamp: str, *, state: Mapping[str, Any] | None = None,
                         merge_state: Mapping[str, Any] | None = None, title: str | None = None,
                         status: str | None = None, release: bool = False) -> dict[str, Any]:
    """The columns a write sets on its conversation row: the time, the state replaced or merged (top-level
    keys, read in the writing transaction), the title and status, and the turn lease given up."""
    values: dict[str, Any] = {"updated_at": stamp}
    if merge_state is not None:
        current = conn.execute(select(t.conversations.c.state).where(t.conversations.c.id == conversation_id)).scalar()
        values["state"] = dumps({**(loads(current, {}) or {}), **dict(merge_state)})
    if state is not None:
        values["state"] = dumps(dict(state))
    if title is not None:
        values["title"] = title[:200]
    if status is not None:
        values["status"] = status
    if release:
        values.update(turn_token=None, turn_until=None)
    return values


# ---- the chat write's statements, built once (values bound at execution) -----------------------------
_HIGHEST_SEQ = (select(func.coalesce(func.max(t.turns.c.seq), 0))
                .where(t.turns.c.conversation_id == bindparam("cid")).scalar_subquery())
_STATE_AND_SEQ = select(t.conversations.c.state, _HIGHEST_SEQ).where(t.conversations.c.id == bindparam("cid"))
_INSERT_TURNS = insert(t.turns)
# A turn's reads and its lease, likewise (a statement built per call cost ≈ 50–75 µs more than its execution).
_ACQUIRE = (update(t.conversations)
            .where(t.conversations.c.id == bindparam("cid"),
                   or_(t.conversations.c.turn_token.is_(None), t.conversations.c.turn_until < bindparam("now")))
            .values(turn_token=bindparam("token"), turn_until=bindparam("until")))
_ACQUIRE_READ = _ACQUIRE.returning(*t.conversations.c)  # the lease and the row it leased: one statement
_EXISTS = select(t.conversations.c.id).where(t.conversations.c.id == bindparam("cid"))
_CONVERSATION = select(t.conversations).where(t.conversations.c.id == bindparam("cid"))
_LIVE_ENTRIES = (select(t.turns.c.entry_id, t.turns.c.entry)
                 .where(t.turns.c.conversation_id == bindparam("cid"), t.turns.c.superseded.is_(False))
                 .order_by(t.turns.c.seq))


@lru_cache(maxsize=2)
def _lease_read(extend: bool) -> Any:
    """The fenced chat write's first statement: the lease still held by ``token`` (extended to ``until``
    when ``extend``), returning the conversation's state and its turns' highest ``seq``; no row: lost."""
    c = t.conversations.c
    values: dict[str, Any] = {"turn_token": c.turn_token}
    if extend:
        values["turn_until"] = bindparam("until")
    return (update(t.conversations).where(c.id == bindparam("cid"), c.turn_token == bindparam("token"))
            .values(values).returning(c.state, _HIGHEST_SEQ))


@lru_cache(maxsize=64)
def _conversation_update(keys: tuple[str, ...], bump: bool, release: bool) -> Any:
    """``UPDATE conversations`` setting ``keys`` (bound as ``v_<key>``), the state version bumped when
    ``bump``, the turn lease given up when ``release``."""
    c = t.conversations.c
    values: dict[str, Any] = {key: bindparam(f"v_{key}") for key in keys}
    if bump:
        values["state_version"] = c.state_version + 1
    if release:
        values.update(turn_token=None, turn_until=None)
    return update(t.conversations).where(c.id == bindparam("cid")).values(values)


class ConversationsStore:
    """The conversations-and-turns part of :class:`~core.store.store.Store`."""

    _released_leases: set[str]  # lease tokens given up by a turn's last write (``update_conversation``)

    lease_seconds: float  # how long a lease lasts without a heartbeat (:func:`turn_lease`)

    def __init__(self, *args: Any, **kwargs: Any):
        self._released_leases = set()
        self._leased_rows: dict[str, dict[str, Any]] = {}  # token -> the row its lease took (``read=True``)
        self.lease_seconds = turn_lease()
        super().__init__(*args, **kwargs)

    def create_conversation(self, flow: str, owner: Any = None, *, conversation_id: str | None = None,
                            title: str = "", state: Mapping[str, Any] | None = None) -> str:
        if flow not in FLOWS:
            raise ValueError(f"unknown flow: {flow}")
        user_id, label, _, _ = who(owner)
        cid = conversation_id or new_id()
        stamp = self.now()
        with self._write() as conn:
            conn.execute(insert(t.conversations).values(
                id=cid, flow=flow, title=title[:200], status="active", owner=user_id, owner_label=label,
                created_at=stamp, updated_at=stamp, state=None if state is None else dumps(dict(state)),
                state_version=0 if state is None else 1))
        return cid

    def get_conversation(self, conversation_id: str | None) -> dict[str, Any] | None:
        if not conversation_id or len(conversation_id) > 80:
            return None
        with self._read() as conn:
            row = conn.execute(_CONVERSATION, {"cid": conversation_id}).first()
        return None if row is None else _conversation_row(row)

    def leased_conversation(self, token: str | None) -> dict[str, Any] | None:
        """The conversation's row as the lease ``token`` took it (``turn(…, read=True)``), once; None when
        it was not read with the lease or was handed out already."""
        return self._leased_rows.pop(token, None) if token is not None else None

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
                            status: str | None = None, fence: str | None = None, hold: float | None = None,
                            release: bool = False) -> None:
        """Replace or merge (top-level keys) the resumable state; set the title / status. With ``fence`` (a
        turn lease token) nothing is written unless that lease is still held (:class:`TurnBusy` instead);
        ``hold`` extends it, ``release`` gives it up in the same transaction (the turn's last write)."""
        with self._write() as conn:
            if fence is not None:
                self._check_lease(conn, conversation_id, fence, hold)
            values = _conversation_values(conn, conversation_id, self.now(), state=state, merge_state=merge_state,
                                          title=title, status=status, release=fence is not None and release)
            values["state_version"] = t.conversations.c.state_version + 1
            conn.execute(update(t.conversations).where(t.conversations.c.id == conversation_id).values(**values))
        if fence is not None and release:
            self._released_leases.add(fence)

    # ---- the turn lease ---------------------------------------------------------------------------
    def _lease_for(self, hold: float) -> float:
        return min(float(hold), self.lease_seconds)

    def acquire_turn(self, conversation_id: str, *, hold: float, wait: float | None = None,
                     read: bool = False) -> str | None:
        """Take the conversation's turn lease for ``hold`` seconds at most one lease (:func:`turn_lease`)
        at a time (:meth:`turn` renews it while the turn runs); returns its token, or None when there is
        no such conversation (the flow starts a new one, which nobody else can know yet). Waits up to
        ``wait`` seconds (default :func:`turn_wait`) for a running turn, then raises :class:`TurnBusy`.
        ``read``: the statement that takes the lease returns the conversation's row too, kept for
        :meth:`leased_conversation` (what :meth:`get_conversation` would read next, without a read of its own)."""
        if not conversation_id or len(conversation_id) > 80:
            return None
        token = secrets.token_hex(16)
        deadline = time.monotonic() + max(0.0, turn_wait() if wait is None else wait)
        pause = 0.02
        params = {"cid": conversation_id, "token": token}
        while True:
            params.update(now=_lease_time(), until=_lease_time(self._lease_for(hold)))
            with self._write_alone() as conn:  # one UPDATE (the read after it only when it took nothing)
                if read:
                    row = conn.execute(_ACQUIRE_READ, params).first()
                    taken = row is not None
                else:
                    taken = conn.execute(_ACQUIRE, params).rowcount
                if not taken and conn.execute(_EXISTS, {"cid": conversation_id}).first() is None:
                    return None
            if taken:
                if read:
                    self._leased_rows[token] = _conversation_row(row)
                return token
            if time.monotonic() >= deadline:
                raise TurnBusy(conversation_id)
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)

    def _check_lease(self, conn: Any, conversation_id: str, token: str, hold: float | None = None) -> None:
        c = t.conversations.c
        values: dict[str, Any] = {"turn_token": token}
        if hold is not None:
            values["turn_until"] = _lease_time(self._lease_for(hold))
        held = conn.execute(update(t.conversations).where(c.id == conversation_id, c.turn_token == token)
                            .values(**values)).rowcount
        if not held:
            raise TurnBusy(conversation_id)

    def renew_turn(self, conversation_id: str, token: str, *, hold: float) -> None:
        """Check that ``token`` still holds the lease and extend it by ``hold`` seconds, at most one lease
        (before a turn's writes, and the heartbeat); :class:`TurnBusy` when another turn took it over."""
        with self._write_alone() as conn:
            self._check_lease(conn, conversation_id, token, hold)

    def release_turn(self, conversation_id: str, token: str) -> None:
        with self._write_alone() as conn:
            conn.execute(update(t.conversations).where(t.conversations.c.id == conversation_id,
                                                       t.conversations.c.turn_token == token)
                         .values(turn_token=None, turn_until=None))

    def _release_later(self, conversation_id: str, token: str) -> None:
        """Give the lease back as soon as the database takes a write again (a full disk, an outage), in the
        background; after one lease it has lapsed by itself."""
        def retry() -> None:
            deadline = time.monotonic() + self.lease_seconds
            while time.monotonic() < deadline:
                time.sleep(RELEASE_RETRY_SECONDS)
                try:
                    self.release_turn(conversation_id, token)
                    return
                except Exception as exc:  # noqa: BLE001 - still failing: try again
                    logger.debug("turn lease still not released: %s", type(exc).__name__)

        threading.Thread(target=retry, name=f"turn-release-{conversation_id[:12]}", daemon=True).start()

    @contextmanager
    def turn(self, conversation_id: str | None, *, hold: float, wait: float | None = None, read: bool = False
             ) -> Iterator[str | None]:
        """``with store.turn(cid, hold=…) as token:`` one turn of ``cid`` at a time (see the module
        docstring); ``token`` is None for an unknown conversation. The lease is renewed by a heartbeat
        while the body runs (for ``hold`` seconds at most) and given back however the turn ends. ``read``:
        the conversation's row comes with the lease (:meth:`leased_conversation`)."""
        cid = conversation_id or ""
        token = self.acquire_turn(cid, hold=hold, wait=wait, read=read)
        beat = _Heartbeat(self, cid, token, hold, self._lease_for(hold)) if token is not None else None
        if beat is not None:
            beat.start()
        try:
            yield token
        finally:
            if beat is not None:
                beat.stop()
            if token is not None:
                self._leased_rows.pop(token, None)
            if token is not None and token in self._released_leases:  # released by the turn's last write
                self._released_leases.discard(token)
            elif token is not None:
                try:
                    self.release_turn(cid, token)
                except Exception:  # noqa: BLE001 - the database refuses writes: given back once it takes them
                    logger.warning("turn lease not released; retrying", exc_info=True)
                    self._release_later(cid, token)

    # ---- turns -----------------------------------------------------------------------------------
    def append_turn(self, conversation_id: str, entry: Mapping[str, Any], *, role: str, author: Any = None,
                    **columns: Any) -> int:
        """Store one chat entry (with the analytic columns given) as the next turn; returns its seq."""
        stored = storable_entry(entry)
        entry_id = str(stored.get("id") or new_id(12))
        stored["id"] = entry_id
        values = turn_columns(columns, stored)
        for attempt in range(5):  # PostgreSQL: two writers may pick the same seq; the unique index decides
            try:
                with self._write() as conn:
                    seq = (conn.execute(select(func.coalesce(func.max(t.turns.c.seq), 0))
                                        .where(t.turns.c.conversation_id == conversation_id)).scalar() or 0) + 1
                    conn.execute(insert(t.turns).values(
                        conversation_id=conversation_id, seq=seq, entry_id=entry_id, superseded=False, role=role,
                        created_at=self.now(), entry=dumps(stored), author=who(author)[0], **values))
                    conn.execute(update(t.conversations).where(t.conversations.c.id == conversation_id)
                                 .values(updated_at=self.now()))
                return seq
            except IntegrityError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def write_chat(self, conversation_id: str, *, appends: Iterable[tuple[Mapping[str, Any], str, Any, dict]] = (),
                   updates: Iterable[tuple[Mapping[str, Any], dict]] = (), supersede: Iterable[str] = (),
                   merge_state: Mapping[str, Any] | None = None, title: str | None = None, status: str | None = None,
                   fence: str | None = None, hold: float | None = None, release: bool = False,
                   debug_records: Sequence[Mapping[str, Any]] = (), debug_owner: Any = None) -> list[int]:
        """A turn's writes in one transaction: new chat entries appended in order (``(entry, role, author,
        columns)``), entries changed in place (``(entry, columns)``), entries superseded (their ids), the
        conversation's state merged (top-level keys), its ``title`` and ``status`` set, and the turn's model
        calls' ``debug_records`` (already masked, stored for ``debug_owner``). With ``fence`` nothing is
        written unless that turn lease is still held (:class:`TurnBusy`); ``hold`` extends it, ``release``
        gives it up. Returns the debug records' ids, in order.

        The statements are built once (:func:`_lease_read`, :func:`_conversation_update`; values bound): the
        lease check also reads the state to merge and the turns' highest ``seq`` (one statement, under the
        row lock), the new turns are one multi-row insert, the conversation one update."""
        appends = [(storable_entry(e), role, author, cols) for e, role, author, cols in appends]
        for stored, _, _, _ in appends:
            stored["id"] = str(stored.get("id") or new_id(12))
        updates = [(storable_entry(e), cols) for e, cols in updates]
        gone = [str(i) for i in supersede]
        ids: list[int] = []
        for attempt in range(5):  # PostgreSQL: a writer outside the lease may take the same seq; the index decides
            try:
                with self._write() as conn:
                    params: dict[str, Any] = {"cid": conversation_id}
                    if fence is not None:  # the lease checked (and the row locked) first; state and seq read with it
                        params["token"] = fence
                        if hold is not None:
                            params["until"] = _lease_time(self._lease_for(hold))
                        row = conn.execute(_lease_read(hold is not None), params).first()
                        if row is None:
                            raise TurnBusy(conversation_id)
                        current, seq = row
                    elif appends or merge_state is not None:
                        row = conn.execute(_STATE_AND_SEQ, params).first()
                        current, seq = row if row is not None else (None, 0)
                    else:
                        current, seq = None, 0
                    seq = int(seq or 0)
                    stamp = self.now()
                    rows = []
                    for stored, role, author, cols in appends:
                        seq += 1
                        rows.append({"conversation_id": conversation_id, "seq": seq, "entry_id": stored["id"],
                                     "superseded": False, "role": role, "created_at": stamp, "entry": dumps(stored),
                                     "author": who(author)[0], **_TURN_DEFAULTS,
                                     **turn_columns(cols, stored)})
                    if rows:
                        conn.execute(_INSERT_TURNS, rows)
                    for stored, cols in updates:
                        conn.execute(update(t.turns).where(and_(t.turns.c.conversation_id == conversation_id,
                                                                t.turns.c.entry_id == str(stored.get("id"))))
                                     .values(entry=dumps(stored), **turn_columns(cols, stored)))
                    if gone:
                        conn.execute(update(t.turns).where(and_(t.turns.c.conversation_id == conversation_id,
                                                                t.turns.c.entry_id.in_(gone))).values(superseded=True))
                    values: dict[str, Any] = {"updated_at": stamp}
                    if merge_state is not None:
                        values["state"] = dumps({**(loads(current, {}) or {}), **dict(merge_state)})
                    if title is not None:
                        values["title"] = title[:200]
                    if status is not None:
                        values["status"] = status
                    release_now = fence is not None and release
                    params.update({f"v_{k}": v for k, v in values.items()})
                    conn.execute(_conversation_update(tuple(values), merge_state is not None, release_now), params)
                    ids = self._insert_debug_records(conn, debug_records, debug_owner) if debug_records else []
                break
            except IntegrityError:
                if attempt == 4:
                    raise
        if fence is not None and release:
            self._released_leases.add(fence)
        return ids

    def update_turn_entry(self, conversation_id: str, entry: Mapping[str, Any], **columns: Any) -> None:
        stored = storable_entry(entry)
        values = turn_columns(columns, stored)
        with self._write() as conn:
            conn.execute(update(t.turns).where(and_(t.turns.c.conversation_id == conversation_id,
                                                    t.turns.c.entry_id == str(stored.get("id"))))
                         .values(entry=dumps(stored), **values))

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
            data["entry"] = loads(row.entry, {})
            data["turn_json"] = loads(row.turn_json)
            data["attachments"] = loads(row.attachments, [])
            out.append(data)
        return out

    def chat_entries(self, conversation_id: str, *, hashes: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """The page's chat list as it was, in order (the working copy on resume). ``hashes``, when given, is
        filled with what :meth:`entry_hashes` would return, from the same read."""
        with self._read() as conn:
            rows = conn.execute(_LIVE_ENTRIES, {"cid": conversation_id}).all()
        if hashes is not None:
            hashes.update({row.entry_id: hashlib.sha256(row.entry.encode()).hexdigest() for row in rows})
        return [loads(row.entry, {}) for row in rows]

    def entry_hashes(self, conversation_id: str) -> dict[str, str]:
        """``{entry_id: sha256 of the stored entry}`` of the live turns (for write-through sync)."""
        query = (select(t.turns.c.entry_id, t.turns.c.entry)
                 .where(and_(t.turns.c.conversation_id == conversation_id, t.turns.c.superseded.is_(False))))
        with self._read() as conn:
            return {row.entry_id: hashlib.sha256(row.entry.encode()).hexdigest() for row in conn.execute(query)}
