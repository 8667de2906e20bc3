"""Store conformance: the same tests for SQLite and PostgreSQL (parametrised by ``store_url``)."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import inspect

from core.diagnosis.models import ChatStep
from core.diagnosis.stored_sessions import StoredSessionStore
from core.store.chat_sync import sync_chat
from core.store.store import Store

ROOT = Path(__file__).resolve().parents[3]


# ---- schema and conversations ---------------------------------------------------------------------
def test_migrations_create_every_table_and_reopen_is_idempotent(store_url):
    first = Store(store_url)
    names = set(inspect(first.engine).get_table_names())
    assert {"conversations", "turns", "knowledge_entries", "entry_history", "bookings", "debug_records",
            "audit_log", "alembic_version"} <= names
    cid = first.create_conversation("faq", "u")
    second = Store(store_url)  # a second replica starting on the same database
    assert second.get_conversation(cid)["flow"] == "faq"


def test_conversation_roundtrip_state_merge_and_unknown_ids(store, operator):
    cid = store.create_conversation("diagnosis", operator, title="t", state={"a": 1})
    got = store.get_conversation(cid)
    assert got["owner"] == "yamada@example.jp" and got["owner_label"] == "山田" and got["state"] == {"a": 1}
    store.update_conversation(cid, merge_state={"b": 2}, title="新しい題", status="done")
    got = store.get_conversation(cid)
    assert got["state"] == {"a": 1, "b": 2} and got["title"] == "新しい題" and got["status"] == "done"
    assert store.get_conversation("nope") is None
    assert store.get_conversation("x" * 500) is None
    assert store.get_conversation("") is None
    with pytest.raises(ValueError):
        store.create_conversation("other", operator)


def test_list_conversations_newest_first_and_skips_empty(store, operator):
    empty = store.create_conversation("knowledge", operator)
    older = store.create_conversation("knowledge", operator, title="古い")
    store.append_turn(older, {"role": "user", "content": "a"}, role="user")
    newer = store.create_conversation("knowledge", operator, title="新しい")
    store.append_turn(newer, {"role": "user", "content": "b"}, role="user")
    other = store.create_conversation("faq", operator)
    store.append_turn(other, {"user": "c"}, role="exchange")
    listed = store.list_conversations("knowledge")
    assert [c["id"] for c in listed] == [newer, older]
    assert listed[0]["turn_count"] == 1
    assert empty in [c["id"] for c in store.list_conversations("knowledge", include_empty=True)]


# ---- turns ----------------------------------------------------------------------------------------
def test_turns_keep_order_columns_and_never_attachment_text(store):
    cid = store.create_conversation("knowledge", "u")
    seq1 = store.append_turn(cid, {"id": "u1", "role": "user", "content": "条項", "payload": "本文の全文",
                                   "file_texts": ["本文の全文"]}, role="user", user_input="条項",
                             attachments=[{"name": "a.pdf", "size": 10, "pages": 1, "sha256": "ab"}])
    seq2 = store.append_turn(cid, {"id": "a1", "role": "assistant", "content": "回答"}, role="assistant",
                             turn_json={"state": {"phase": "collect_case"}}, step="collect_case", method="offline",
                             attempts=1, latency_ms=3.5, provider="offline", model="rules")
    assert (seq1, seq2) == (1, 2)
    rows = store.list_turns(cid)
    assert rows[0]["entry"] == {"id": "u1", "role": "user", "content": "条項"}
    assert rows[0]["attachments"][0]["sha256"] == "ab"
    assert rows[1]["turn_json"] == {"state": {"phase": "collect_case"}} and rows[1]["method"] == "offline"
    assert "本文の全文" not in repr(store.list_turns(cid))


def test_sync_chat_appends_updates_and_supersedes(store):
    cid = store.create_conversation("knowledge", "u")
    chat = [{"id": "u1", "role": "user", "content": "一"}, {"id": "a1", "role": "assistant", "content": "二"}]
    assert sync_chat(store, cid, chat, flow="knowledge") == 2
    assert sync_chat(store, cid, chat, flow="knowledge") == 0  # nothing changed, nothing written
    chat[0]["failed"] = True
    assert sync_chat(store, cid, chat, flow="knowledge") == 1
    assert store.chat_entries(cid)[0]["failed"] is True
    del chat[:]  # a resend removed the failed pair
    chat.append({"role": "user", "content": "三"})
    sync_chat(store, cid, chat, flow="knowledge")
    assert [e["content"] for e in store.chat_entries(cid)] == ["三"]
    assert len(store.list_turns(cid, include_superseded=True)) == 3  # kept for analytics
    assert chat[0]["id"]  # an id was given to the new entry


# ---- knowledge library ----------------------------------------------------------------------------
ENTRY = {"knowledge_title": "損害賠償の上限", "contract_type": "業務委託契約", "target_clause": "損害賠償",
         "review_points": "上限額の有無", "action_plan": "上限を設ける", "clause_sample": "第10条"}


def test_drafts_update_in_place_until_confirmed_then_a_new_draft_starts(store, operator):
    cid = store.create_conversation("knowledge", operator)
    [eid] = store.record_knowledge(cid, [ENTRY], operator)
    [same] = store.record_knowledge(cid, [{**ENTRY, "action_plan": "上限を契約金額までとする"}], operator)
    assert same == eid
    assert [h["action"] for h in store.entry_history(eid)] == ["drafted", "model_update"]
    confirmed = store.set_entry_status(eid, "confirm", operator)
    assert confirmed["status"] == "confirmed" and confirmed["confirmed_by"] == "yamada@example.jp"
    [new] = store.record_knowledge(cid, [{**ENTRY, "knowledge_title": "別の論点"}], operator)
    assert new != eid
    assert store.get_entry(eid)["status"] == "confirmed"
    assert store.get_entry(eid)["knowledge_title"] == "損害賠償の上限"
    assert [e["id"] for e in store.conversation_outputs(cid)] == [new]
    with pytest.raises(ValueError):
        store.set_entry_status(eid, "confirm", operator)  # already confirmed


def test_edit_keeps_history_and_archive_needs_admin(store, operator, admin):
    [eid] = store.record_knowledge(None, [ENTRY], operator)
    edited = store.edit_entry(eid, {"knowledge_title": "上限条項"}, operator)
    assert edited["knowledge_title"] == "上限条項" and edited["version"] == 2
    history = store.entry_history(eid)
    assert history[-1]["action"] == "edit" and history[-1]["data"]["knowledge_title"] == "上限条項"
    assert history[-1]["changed_by"] == "yamada@example.jp"
    with pytest.raises(PermissionError):
        store.set_entry_status(eid, "archive", operator)
    assert store.set_entry_status(eid, "archive", admin)["status"] == "archived"
    with pytest.raises(ValueError):
        store.edit_entry(eid, {"knowledge_title": "x"}, operator)
    audit = store.list_audit("knowledge_entry", eid)
    assert [a["action"] for a in audit] == ["entry.archive", "entry.edit"]
    assert audit[0]["actor"] == "admin@example.jp" and "admin" in audit[0]["actor_roles"]


def test_library_search_and_filters(store, operator):
    store.record_knowledge(None, [ENTRY], operator)
    store.record_knowledge(None, [{**ENTRY, "contract_type": "秘密保持契約", "knowledge_title": "秘密情報の範囲",
                                   "target_clause": "秘密情報の定義"}], operator)
    assert {e["contract_type"] for e in store.list_entries()} == {"業務委託契約", "秘密保持契約"}
    assert [e["knowledge_title"] for e in store.list_entries(query="秘密 定義")] == ["秘密情報の範囲"]
    assert [e["knowledge_title"] for e in store.list_entries(contract_type=["業務委託契約"])] == ["損害賠償の上限"]
    assert store.list_entries(status=["confirmed"]) == []
    assert store.contract_types() == sorted(["業務委託契約", "秘密保持契約"])
    assert store.list_entries(query="%") == []  # LIKE wildcards in a search are plain text


# ---- bookings -------------------------------------------------------------------------------------
def test_bookings_numbered_idempotent_filtered_and_status_changes(store, operator):
    cid = store.create_conversation("diagnosis", operator)
    contact = {"name": "佐藤", "phone": "090-0000-0000"}
    number = store.create_booking(cid, booking_type="dispatch", contact=contact, urgency="critical", actor=operator)
    assert number.startswith("KW-")
    assert store.create_booking(cid, booking_type="dispatch", contact=contact, urgency="critical") == number
    store.create_booking(None, booking_type="visit", contact={"name": "鈴木"}, urgency="low")
    assert [b["number"] for b in store.list_bookings(urgency=["critical"])] == [number]
    assert len(store.list_bookings(status=["requested"])) == 2
    today = store.get_booking(number)["created_at"][:10]
    assert len(store.list_bookings(date_from=today, date_to=today)) == 2
    assert store.list_bookings(date_from="2000-01-01", date_to="2000-01-02") == []
    assert store.set_booking_status(number, "confirmed", operator)["status"] == "confirmed"
    store.set_booking_status(number, "cancelled", operator)
    with pytest.raises(ValueError):
        store.set_booking_status(number, "confirmed", operator)
    assert [a["action"] for a in store.list_audit("booking", number)][:2] == ["booking.cancelled", "booking.confirmed"]


# ---- debug records --------------------------------------------------------------------------------
def test_debug_records_shared_and_clearing_needs_admin(store, operator, admin):
    for i in range(3):
        store.add_debug_record({"session_id": "c1" if i < 2 else "c2", "flow": "faq", "outcome": "ok", "n": i},
                               operator)
    assert [r["n"] for r in store.list_debug_records()] == [0, 1, 2]
    assert [r["n"] for r in store.list_debug_records(conversation_id="c1")] == [0, 1]
    assert store.count_debug_records() == 3
    with pytest.raises(PermissionError):
        store.clear_debug_records(operator)
    assert store.clear_debug_records(admin, conversation_id="c1") == 2
    assert store.count_debug_records() == 1


# ---- diagnosis sessions ---------------------------------------------------------------------------
def test_stored_sessions_roundtrip_expire_and_book_once(store, operator):
    now = [1000.0]
    sessions = StoredSessionStore(store, owner=operator, ttl_seconds=60, clock=lambda: now[0])
    session = sessions.create()
    session.vehicle_id, session.make, session.model, session.year = "v1", "カイワ", "ミライ", 2022
    session.state_snapshots.append({"turn": 1, "state": {"x": 1}})
    sessions.update(session)
    again = sessions.get(session.session_id)
    assert again.vehicle_id == "v1" and again.state_snapshots == [{"turn": 1, "state": {"x": 1}}]
    # a second console replica sees the same session
    assert StoredSessionStore(Store(store.url), clock=lambda: now[0]).get(session.session_id).make == "カイワ"
    session.current_step = ChatStep.DONE
    session.booking_type, session.booking_data, session.urgency_level = "visit", {"name": "佐藤"}, "medium"
    sessions.update(session)
    sessions.update(session)
    bookings = store.list_bookings(conversation_id=session.session_id)
    assert len(bookings) == 1 and bookings[0]["vehicle_label"] == "カイワ ミライ 2022"
    assert store.get_conversation(session.session_id)["status"] == "done"
    now[0] += 61
    assert sessions.get(session.session_id) is None
    assert store.get_conversation(session.session_id)["status"] == "expired"


# ---- concurrency ----------------------------------------------------------------------------------
def test_threads_writing_turns_to_different_conversations_lose_nothing(store):
    ids = [store.create_conversation("faq", f"u{i}") for i in range(6)]
    errors: list[BaseException] = []

    def write(cid: str) -> None:
        try:
            for n in range(15):
                store.append_turn(cid, {"user": f"{cid}-{n}"}, role="exchange")
                store.add_debug_record({"session_id": cid, "n": n})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(cid,)) for cid in ids]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    for cid in ids:
        rows = store.list_turns(cid)
        assert [r["seq"] for r in rows] == list(range(1, 16))
        assert [r["entry"]["user"] for r in rows] == [f"{cid}-{n}" for n in range(15)]
        assert store.count_debug_records(cid) == 15


WRITER = """
import sys
from core.store.store import Store
store = Store(sys.argv[1])
cid = store.create_conversation("knowledge", sys.argv[2])
for n in range(int(sys.argv[3])):
    store.append_turn(cid, {"content": f"{sys.argv[2]}-{n}"}, role="user")
print(cid)
"""


def test_two_processes_writing_at_once_lose_nothing(store_url):
    Store(store_url)  # migrate first, as the console does on start
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, f"p{i}", "30"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outputs]
    store = Store(store_url)
    for i, (out, _) in enumerate(outputs):
        rows = store.list_turns(out.strip())
        assert [r["entry"]["content"] for r in rows] == [f"p{i}-{n}" for n in range(30)]


def test_stored_entries_mask_personal_data_unless_kept_but_never_keep_secrets(store, operator):
    text = "担当 090-1234-5678 key sk-abcdefghijklmnopqrstuvwx"
    [masked] = store.record_knowledge(None, [{**ENTRY, "clause_sample": text}], operator)
    assert "090-1234-5678" not in store.get_entry(masked)["clause_sample"]
    [kept] = store.record_knowledge(None, [{**ENTRY, "clause_sample": text}], operator, keep_contract_text=True)
    stored = store.get_entry(kept)["clause_sample"]
    assert "090-1234-5678" in stored and "sk-abcdefghijklmnopqrstuvwx" not in stored
    edited = store.edit_entry(masked, {"action_plan": "連絡先 taro@example.jp"}, operator)
    assert "taro@example.jp" not in edited["action_plan"]


def test_stored_debug_log_annotates_records_already_stored(store):
    from core.store.debug_sink import StoredDebugLog

    log = StoredDebugLog(store, "op")
    log.append({"session_id": "c9", "task": "choice_judgment"})
    log.append({"session_id": "c9", "task": "choice_tag"})
    log.annotate(log[-2:], judgment_method="tag_fallback")
    assert [r["judgment_method"] for r in store.list_debug_records(conversation_id="c9")] == ["tag_fallback"] * 2
    assert all(r["judgment_method"] == "tag_fallback" for r in log)
