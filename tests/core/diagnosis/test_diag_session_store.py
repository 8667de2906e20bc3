"""The TTL session store and its protocol."""
from __future__ import annotations

from core.diagnosis.models import ChatStep
from core.diagnosis.session_store import InMemorySessionStore, SessionStore


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_create_get_update_delete_roundtrip():
    store = InMemorySessionStore()
    assert isinstance(store, SessionStore)
    session = store.create()
    assert session.current_step == ChatStep.VEHICLE_ID and session.max_diagnostic_turns == 8
    session.symptom_text = "変わった"
    assert store.get(session.session_id).symptom_text == ""  # stored copy untouched until update
    store.update(session)
    assert store.get(session.session_id).symptom_text == "変わった"
    store.delete(session.session_id)
    assert store.get(session.session_id) is None
    assert store.get(None) is None and store.get("nope") is None


def test_session_expires_after_ttl_since_last_update():
    clock = Clock()
    store = InMemorySessionStore(ttl_seconds=60, clock=clock)
    session = store.create()
    clock.now += 59
    assert store.get(session.session_id) is not None
    store.update(session)  # refreshes the TTL
    clock.now += 59
    assert store.get(session.session_id) is not None
    clock.now += 2
    assert store.get(session.session_id) is None
    assert len(store) == 0


def test_purge_expired_removes_only_old_sessions():
    clock = Clock()
    store = InMemorySessionStore(ttl_seconds=10, clock=clock)
    old = store.create()
    clock.now += 8
    fresh = store.create()
    clock.now += 5
    assert store.purge_expired() == 1
    assert store.get(old.session_id) is None and store.get(fresh.session_id) is not None


def test_max_turns_setting_reaches_new_sessions():
    assert InMemorySessionStore(max_diagnostic_turns=3).create().max_diagnostic_turns == 3
