"""Store conformance, the turn lease's bound (issue 23), on SQLite and PostgreSQL: the lease is short and
heartbeat-renewed, so a process killed with ``kill -9`` in the middle of a turn blocks its conversation for
at most one lease, and a turn that failed on a write error gives the lease back as soon as the database
takes a write again (not after the turn's whole deadline)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from core.store.conversations import TURN_LEASE_SECONDS, TurnBusy, turn_lease
from core.store.store import Store
from tests.helpers.failing_writes import failing_writes

ROOT = Path(__file__).resolve().parents[3]
HOLD = 600.0  # a turn's own bound (its deadline and margin), far longer than the lease
HOLDER = textwrap.dedent("""
    import sys, time
    from core.store.store import Store
    store = Store(sys.argv[1], run_migrations=False)
    with store.turn(sys.argv[2], hold=float(sys.argv[3])):
        print("holding", flush=True)
        time.sleep(3600)
""")


def _seconds_left(store: Store, cid: str) -> float:
    until = store.get_conversation(cid)["turn_until"]
    return (datetime.fromisoformat(until) - datetime.now(timezone.utc)).total_seconds()


def test_the_lease_is_fifteen_seconds_unless_configured():
    assert TURN_LEASE_SECONDS == 15.0 and turn_lease({}) == 15.0
    assert turn_lease({"KAIWA_TURN_LEASE": "5"}) == 5.0 and turn_lease({"KAIWA_TURN_LEASE": "0"}) == 15.0


def test_a_lease_is_stored_for_one_lease_not_for_the_whole_turn(store):
    cid = store.create_conversation("faq", "u")
    store.acquire_turn(cid, hold=HOLD)
    assert _seconds_left(store, cid) <= store.lease_seconds + 1


def test_a_turn_killed_with_sigkill_frees_its_conversation_within_one_lease(store_url):
    lease = 2.0
    store = Store(store_url)
    cid = store.create_conversation("diagnosis", "u")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, store_url, cid, str(HOLD)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, env={**os.environ, "KAIWA_TURN_LEASE": str(lease)},
                              start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        time.sleep(3 * lease)  # longer than a lease: the heartbeat keeps the running turn's lease
        with pytest.raises(TurnBusy):
            store.acquire_turn(cid, hold=60, wait=0)
        assert _seconds_left(store, cid) <= lease + 1
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        token = store.acquire_turn(cid, hold=60, wait=lease + 10)  # lapses one lease after the last beat
        assert token is not None
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(timeout=30)
        store.engine.dispose()


def test_a_turn_that_failed_on_a_write_error_gives_the_lease_back_when_writes_work_again(store_url):
    store, other = Store(store_url), Store(store_url, run_migrations=False)  # two replicas
    try:
        cid = store.create_conversation("diagnosis", "u")
        with failing_writes(store) as disk:
            with pytest.raises(RuntimeError), store.turn(cid, hold=HOLD):
                disk.on()  # the disk fills up in the middle of the turn: its writes and the release fail
                raise RuntimeError("turn failed on a write")
            with pytest.raises(TurnBusy):
                other.acquire_turn(cid, hold=60, wait=0)
            disk.off()  # space again
            token = other.acquire_turn(cid, hold=60, wait=5)  # far less than one lease, let alone the turn
        assert token is not None
    finally:
        store.engine.dispose()
        other.engine.dispose()


def test_a_turn_that_failed_gives_the_lease_back_at_once(store):
    cid = store.create_conversation("faq", "u")
    with pytest.raises(RuntimeError), store.turn(cid, hold=HOLD):
        raise RuntimeError("model call failed")
    assert store.acquire_turn(cid, hold=60, wait=0) is not None


def test_a_turn_longer_than_the_lease_keeps_it_by_heartbeat(store):
    store.lease_seconds = 0.6
    cid = store.create_conversation("faq", "u")
    with store.turn(cid, hold=HOLD) as token:
        time.sleep(2.0)
        with pytest.raises(TurnBusy):
            store.acquire_turn(cid, hold=60, wait=0)
        store.renew_turn(cid, token, hold=HOLD)  # still its own


def test_turns_share_the_process_heartbeat_thread_and_start_no_thread_of_their_own(store, monkeypatch):
    """Issue #25: every turn started a heartbeat thread and joined it at its end (two thread hand-overs under
    the GIL per API request); one thread of the process renews every running turn's lease now. Counted."""
    from core.store import conversations

    cid = store.create_conversation("faq", "u")
    with store.turn(cid, hold=HOLD):  # the process's heartbeat thread runs from the first turn on
        pass
    started: list[str] = []
    real_start = conversations.threading.Thread.start

    def counting_start(thread):
        started.append(thread.name)
        return real_start(thread)

    monkeypatch.setattr(conversations.threading.Thread, "start", counting_start)
    for _ in range(10):
        with store.turn(cid, hold=HOLD) as token:
            assert len(conversations.HEARTBEATS) >= 1 and token is not None
    assert started == [] and len(conversations.HEARTBEATS) == 0
    assert conversations.HEARTBEATS.threads_started == 1
