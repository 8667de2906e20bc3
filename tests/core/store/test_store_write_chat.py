"""Store conformance, a turn's writes in one transaction (``Store.write_chat``, issue #25): appends, in-place
updates, supersedes, the state merge and the lease check land together or not at all. SQLite and PostgreSQL."""
from __future__ import annotations

import pytest
from sqlalchemy import event

from core.store.chat_sync import sync_chat
from core.store.conversations import TurnBusy
from core.store.debug_records import DebugQuery


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


def _record(sid: str, task: str, **extra) -> dict:
    return {"time": "2026-11-27T01:00:00.000+00:00", "session_id": sid, "flow": "diagnosis", "step": "diagnosing",
            "task": task, "provider": "offline", "model": "offline", "kind": "call", "outcome": "ok",
            "messages": [{"role": "user", "content": "[電話番号] から連絡"}], "raw_output": "{}", **extra}


def test_a_turns_debug_records_land_with_its_chat_in_one_transaction(store, operator):
    """Issue #25: the debug records of a turn's model calls wait for the turn's chat write and are stored in
    its one fenced transaction (they were one transaction each), in order, whole, annotations included; the
    log then holds their summaries with the stored ids, as when each was written on its own."""
    from core.store.debug_sink import SUMMARY_KEYS, StoredDebugLog

    cid = store.create_conversation("diagnosis", operator, title="車両問診")
    token = store.acquire_turn(cid, hold=30)
    log = StoredDebugLog(store, operator)
    counted, stop = count_write_transactions(store)
    try:
        with log.holding():
            log.append(_record(cid, "choice_judgment"))
            log.append(_record(cid, "choice_tag", errors=["x" * 500]))
            log.annotate(log[-2:], judgment_method="tag_fallback")
            assert counted["writes"] == 0 and store.list_debug_records(conversation_id=cid) == []
            sync_chat(store, cid, [{"role": "user", "text": "ブレーキが鳴る"}], flow="diagnosis",
                      merge_state={"last_response": {"n": 1}}, fence=token, release=True, debug=log)
    finally:
        stop()
    assert counted["writes"] == 1
    stored = store.list_debug_records(conversation_id=cid)
    assert [r["task"] for r in stored] == ["choice_judgment", "choice_tag"]
    assert [r["judgment_method"] for r in stored] == ["tag_fallback"] * 2 and stored[0]["owner"] == operator.user_id
    assert stored[1]["errors"] == ["x" * 500] and stored[0]["messages"][0]["content"] == "[電話番号] から連絡"
    assert [r["_store_id"] for r in log] == [r["id"] for r in stored]
    assert all(set(r) <= set(SUMMARY_KEYS) for r in log) and log[1]["errors"] == ["x" * 300]
    assert store.count_debug_records(query=DebugQuery(methods=("tag_fallback",), steps=("diagnosing",))) == 1
    assert len(store.list_turns(cid)) == 1 and store.get_conversation(cid)["turn_token"] is None


def test_debug_records_of_a_turn_that_fails_are_stored_in_one_transaction_of_their_own(store, operator):
    """A turn that fails before its chat write (an error, a lost lease) still keeps its calls: the waiting
    records are written when the turn's block ends, all in one transaction. Both engines."""
    from core.store.debug_sink import StoredDebugLog

    cid = store.create_conversation("diagnosis", operator)
    log = StoredDebugLog(store, operator)
    counted, stop = count_write_transactions(store)
    try:
        with pytest.raises(RuntimeError), log.holding():
            log.append(_record(cid, "diagnostic"))
            log.append(_record(cid, "diagnostic", kind="repair", outcome="schema_error"))
            raise RuntimeError("the model call's fallback failed too")
    finally:
        stop()
    assert counted["writes"] == 1
    assert [r["kind"] for r in store.list_debug_records(conversation_id=cid)] == ["call", "repair"]
    assert all(r.get("_store_id") for r in log)

    token = store.acquire_turn(cid, hold=30)
    store.release_turn(cid, token)
    store.acquire_turn(cid, hold=30)  # another turn took the conversation: this one's chat write is refused
    with pytest.raises(TurnBusy), log.holding():
        log.append(_record(cid, "rag_answer"))
        sync_chat(store, cid, [{"role": "user", "text": "まだ鳴る"}], flow="diagnosis", merge_state={"x": 1},
                  fence=token, release=True, debug=log)
    assert [r["task"] for r in store.list_debug_records(conversation_id=cid)][-1] == "rag_answer"
    assert store.list_turns(cid) == [] and log[-1]["_store_id"]


def test_debug_records_the_store_cannot_take_are_kept_whole_in_the_log(store, operator):
    """The store refusing writes (a full disk) fails neither the turn nor loses a record: each is kept whole
    in the log (the only copy), as before."""
    from core.store.debug_sink import StoredDebugLog
    from tests.helpers.failing_writes import FailingWrites

    cid = store.create_conversation("diagnosis", operator)
    log = StoredDebugLog(store, operator)
    failing = FailingWrites(store)
    try:
        failing.on()
        with log.holding():
            log.append(_record(cid, "diagnostic"))
            log.annotate(log[-1:], guards=[{"guard": "g"}])
    finally:
        failing.off()
        failing.restore()
    assert store.list_debug_records(conversation_id=cid) == []
    assert "_store_id" not in log[0] and log[0]["messages"] and log[0]["guards"] == [{"guard": "g"}]


def test_a_fenced_turns_chat_write_is_four_statements(store, operator):
    """Issue #25: the turn's chat write sends four statements whatever it holds: the lease check, which also
    reads the state to merge and the turns' highest ``seq`` (they were three statements); the new turns, one
    multi-row insert; the conversation's update; the turn's debug records, one multi-row insert. Both
    engines; counted at the driver."""
    from core.store.debug_sink import StoredDebugLog

    cid = store.create_conversation("diagnosis", operator, state={"session": {"step": 1}})
    sync_chat(store, cid, [{"role": "assistant", "step": "vehicle_id", "message": "車両は？"}], flow="diagnosis")
    chat = [*store.chat_entries(cid), {"role": "user", "text": "ミライ"},
            {"role": "assistant", "step": "free_text", "message": "症状は？"}]
    token = store.acquire_turn(cid, hold=30)
    log = StoredDebugLog(store, operator)
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement.split(None, 1)[0].upper())

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        with log.holding():
            log.append(_record(cid, "diagnostic"))
            log.append(_record(cid, "rag_answer"))
            sync_chat(store, cid, chat, flow="diagnosis", merge_state={"last_response": {"n": 2}}, title="ミライ",
                      fence=token, release=True, stored=store.entry_hashes(cid), debug=log)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert statements[1:] == ["UPDATE", "INSERT", "UPDATE", "INSERT"], statements  # [0]: entry_hashes' read
    turns = store.list_turns(cid)
    assert [(t["seq"], t["role"]) for t in turns] == [(1, "assistant"), (2, "user"), (3, "assistant")]
    conversation = store.get_conversation(cid)
    assert conversation["state"] == {"session": {"step": 1}, "last_response": {"n": 2}}
    assert conversation["title"] == "ミライ" and conversation["turn_token"] is None
    assert conversation["state_version"] == 2 and len(store.list_debug_records(conversation_id=cid)) == 2
