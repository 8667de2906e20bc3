"""Store conformance, a turn's writes in one transaction (``Store.write_chat``, issue #25): appends, in-place
updates, supersedes, the state merge and the lease check land together or not at all. SQLite and PostgreSQL."""
from __future__ import annotations

import pytest
from sqlalchemy import event

from core.store.chat_sync import sync_chat
from core.store.conversations import TurnBusy


def count_write_transactions(store):
    """Counts the store's write transactions (its writer's ``begin``) while the test runs."""
    counted = {"writes": 0}

    def begin(conn):
        if conn.get_execution_options().get("kaiwa_write"):
            counted["writes"] += 1

    event.listen(store.engine, "begin", begin)
    return counted, lambda: event.remove(store.engine, "begin", begin)


def test_a_synced_chat_and_its_state_are_one_transaction(store, operator):
    cid = store.create_conversation("diagnosis", operator, state={"session": {"step": 1}})
    chat = [{"role": "assistant", "step": "vehicle_id", "message": "車両は？"}]
    sync_chat(store, cid, chat, flow="diagnosis")
    chat += [{"role": "user", "text": "ミライ"}, {"role": "assistant", "step": "free_text", "message": "症状は？"}]
    chat[0]["message"] = "車両を選んでください"
    counted, stop = count_write_transactions(store)
    try:
        written = sync_chat(store, cid, chat, flow="diagnosis", merge_state={"last_response": {"n": 2}})
    finally:
        stop()
    assert written == 3 and counted["writes"] == 1
    turns = store.list_turns(cid)
    assert [(t["seq"], t["role"], t["step"]) for t in turns] == [(1, "assistant", "vehicle_id"), (2, "user", None),
                                                                  (3, "assistant", "free_text")]
    assert turns[0]["entry"]["message"] == "車両を選んでください" and turns[1]["ok"] is True
    assert store.get_conversation(cid)["state"] == {"session": {"step": 1}, "last_response": {"n": 2}}


def test_a_turn_that_lost_its_lease_writes_nothing(store, operator):
    cid = store.create_conversation("faq", operator)
    token = store.acquire_turn(cid, hold=30)
    store.release_turn(cid, token)
    other = store.acquire_turn(cid, hold=30)  # another turn took the conversation
    with pytest.raises(TurnBusy):
        sync_chat(store, cid, [{"user": "質問", "outcome": "answered"}], flow="faq", merge_state={"x": 1}, fence=token,
                  release=True)
    assert store.list_turns(cid) == [] and "x" not in store.get_conversation(cid)["state"]
    sync_chat(store, cid, [{"user": "質問", "outcome": "answered"}], flow="faq", merge_state={"x": 1}, fence=other,
              release=True)
    assert len(store.list_turns(cid)) == 1 and store.get_conversation(cid)["turn_token"] is None


def test_a_turns_title_and_status_land_with_its_chat(store, operator):
    """The diagnosis session's own write (its state, title and status) rides in the turn's one transaction."""
    cid = store.create_conversation("diagnosis", operator, title="車両問診")
    token = store.acquire_turn(cid, hold=30)
    counted, stop = count_write_transactions(store)
    try:
        sync_chat(store, cid, [{"role": "user", "text": "ブレーキが鳴る"}], flow="diagnosis",
                  merge_state={"session": {"current_step": "done"}, "last_response": {"n": 1}},
                  title="ミライバ: ブレーキが鳴る", status="done", fence=token, release=True)
    finally:
        stop()
    conversation = store.get_conversation(cid)
    assert counted["writes"] == 1 and conversation["title"] == "ミライバ: ブレーキが鳴る"
    assert conversation["status"] == "done" and conversation["turn_token"] is None
    assert conversation["state"] == {"session": {"current_step": "done"}, "last_response": {"n": 1}}


def test_chat_entries_report_the_digests_entry_hashes_would(store, operator):
    """One read of the turns serves both the transcript refresh and the write's diff (issue #25)."""
    cid = store.create_conversation("diagnosis", operator)
    chat = [{"role": "assistant", "step": "vehicle_id", "message": "車両は？"}, {"role": "user", "text": "ミライ"}]
    sync_chat(store, cid, chat, flow="diagnosis")
    sync_chat(store, cid, chat[:1], flow="diagnosis")  # the user turn superseded: not live, not reported
    hashes: dict[str, str] = {}
    entries = store.chat_entries(cid, hashes=hashes)
    assert [e["message"] for e in entries] == ["車両は？"]
    assert hashes == store.entry_hashes(cid) and len(hashes) == 1


def test_reads_inside_reading_share_one_transaction_and_see_the_same_rows(store, operator):
    """Issue #25: ``Store.reading()`` — a turn's conversation row and its turns in one read transaction (a
    nested block uses the outer one); outside it every read has its own, as before. Both engines; counted."""
    cid = store.create_conversation("diagnosis", operator, state={"session": {"step": 1}})
    sync_chat(store, cid, [{"role": "assistant", "step": "vehicle_id", "message": "車両は？"}], flow="diagnosis")
    begins: list[bool] = []

    def begin(conn):
        begins.append(bool(conn.get_execution_options().get("kaiwa_write")))

    event.listen(store.engine, "begin", begin)
    try:
        with store.reading():
            conversation = store.get_conversation(cid)
            with store.reading():
                entries = store.chat_entries(cid)
        inside = list(begins)
        store.get_conversation(cid)
        store.chat_entries(cid)
    finally:
        event.remove(store.engine, "begin", begin)
    assert inside == [False] and begins == [False, False, False]
    assert conversation["state"] == {"session": {"step": 1}} and [e["message"] for e in entries] == ["車両は？"]
