"""Store conformance, races: one turn of a conversation at a time and one booking per form, on SQLite and
PostgreSQL, with real processes sending at the same moment (the harness is ``bench.races``, which also
counts them: ``python -m bench.races``), plus the turn lease's own rules and stale copies of a chat."""
from __future__ import annotations

import threading
import time

import pytest

from bench.races import (
    FORM,
    TO_CONFIRM,
    TO_FREE_TEXT,
    Workers,
    booking_round,
    conversations,
    form_round,
    prepare,
    turn_round,
)
from core.diagnosis.models import ChatRequest
from core.faq.conversation import FAQConversations
from core.knowledge.conversation import KnowledgeConversations
from core.llm.offline import OfflineClient
from core.store import bookings as bookings_module
from core.store.conversations import TurnBusy
from core.store.store import Store


@pytest.fixture
def workers(store_url, monkeypatch):
    monkeypatch.setenv("KAIWA_URGENCY_SEMANTIC", "off")
    Store(store_url)  # migrated before the workers open it, as the console does on start
    pool = Workers(store_url)
    yield pool
    pool.close()


# ---- real processes at the same moment ----------------------------------------------------------
def test_concurrent_turns_on_one_conversation_are_all_stored(store, workers):
    for n in range(5):
        result = turn_round(store, workers, n)
        assert all(r["ok"] for r in result["replies"]), result["replies"]  # the API's 200 for both
        assert result["lost"] == [], result
        entries = store.chat_entries(result["session_id"])
        texts = [e["text"] for e in entries if e["role"] == "user"]
        sent = [t for t in texts if t.endswith(("（0）", "（1）"))]
        assert len(sent) == 2  # both turns live, one after the other
        assert [e["role"] for e in entries[-4:]] == ["user", "assistant", "user", "assistant"]


def test_two_confirmations_of_one_booking_at_once_give_one_booking(store, workers):
    for _ in range(3):  # through the flow (the turn lease serialises them)
        result = booking_round(store, workers)
        assert result["errors"] == [] and result["bookings"] == 1, result
        session = conversations(store).sessions.get(result["session_id"])
        assert session.current_step.value == "done"
    for _ in range(5):  # straight to the store: the database itself refuses the second booking
        result = form_round(store, workers)
        assert result["errors"] == [] and result["bookings"] == 1 and result["same_number"], result


# ---- booking numbers --------------------------------------------------------------------------
def test_a_booking_number_that_is_taken_is_drawn_again(store, monkeypatch):
    drawn = iter(["KW-250101-AAAAAA", "KW-250101-AAAAAA", "KW-250101-BBBBBB"])
    monkeypatch.setattr(bookings_module, "new_booking_number", lambda: next(drawn))
    first = store.create_booking(store.create_conversation("diagnosis", "u"), booking_type="visit", contact=FORM)
    second = store.create_booking(store.create_conversation("diagnosis", "u"), booking_type="visit", contact=FORM)
    assert (first, second) == ("KW-250101-AAAAAA", "KW-250101-BBBBBB")


def test_a_cancelled_booking_frees_its_form(store, operator):
    cid = store.create_conversation("diagnosis", operator)
    first = store.create_booking(cid, booking_type="visit", contact=FORM)
    store.set_booking_status(first, "cancelled", operator)
    second = store.create_booking(cid, booking_type="visit", contact=FORM)
    assert second != first and store.create_booking(cid, booking_type="visit", contact=FORM) == second


def test_a_session_stored_as_done_always_has_its_booking(store, monkeypatch):
    sid = prepare(store, TO_CONFIRM)

    def broken(*args, **kwargs):
        raise RuntimeError("bookings table unavailable")

    monkeypatch.setattr(store, "create_booking", broken)
    with pytest.raises(RuntimeError):
        conversations(store).handle(ChatRequest(session_id=sid, action="booking", action_value="confirm"))
    assert store.get_conversation(sid)["status"] == "active"  # not done without its booking
    monkeypatch.undo()
    done = conversations(store).handle(ChatRequest(session_id=sid, action="booking", action_value="confirm"))
    assert done.current_step == "done" and len(store.list_bookings(conversation_id=sid)) == 1


# ---- the turn lease ---------------------------------------------------------------------------
def test_a_second_turn_waits_for_the_first_then_gives_up_with_turn_busy(store):
    cid = store.create_conversation("faq", "u")
    token = store.acquire_turn(cid, hold=60)
    assert token is not None
    started = time.monotonic()
    with pytest.raises(TurnBusy) as busy:
        store.acquire_turn(cid, hold=60, wait=0.3)
    assert time.monotonic() - started >= 0.3 and "処理しています" in busy.value.message
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(store.acquire_turn(cid, hold=60, wait=30)))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # still waiting
    store.release_turn(cid, token)
    waiter.join(timeout=30)
    assert got and got[0] not in (None, token)
    assert store.acquire_turn("no-such-conversation", hold=60) is None


def test_a_lapsed_lease_is_taken_over_and_the_late_turn_cannot_write(store):
    cid = store.create_conversation("diagnosis", "u", state={"n": 0})
    late = store.acquire_turn(cid, hold=0.05)
    time.sleep(0.15)  # the first process hangs past its lease
    fresh = store.acquire_turn(cid, hold=60, wait=0)
    assert fresh is not None
    with pytest.raises(TurnBusy):
        store.renew_turn(cid, late, hold=60)
    with pytest.raises(TurnBusy):
        store.update_conversation(cid, merge_state={"n": 1}, fence=late)
    store.update_conversation(cid, merge_state={"n": 2}, fence=fresh)
    assert store.get_conversation(cid)["state"] == {"n": 2}


def test_a_turn_while_another_runs_past_the_wait_is_refused_and_changes_nothing(store):
    sid = prepare(store, TO_FREE_TEXT)
    before = store.chat_entries(sid)
    store.acquire_turn(sid, hold=60)  # another process is in the middle of a turn
    convs = conversations(store)
    convs.wait = 0.2
    with pytest.raises(TurnBusy):
        convs.handle(ChatRequest(session_id=sid, message="エアコンの風が弱い"))
    assert store.chat_entries(sid) == before


# ---- stale copies: the console's tab and the API (or a second tab) on one conversation ---------
def test_a_turn_from_a_stale_console_copy_keeps_the_api_turn(store):
    page = conversations(store, owner="operator")
    transcript: list[dict] = []
    response = page.start(transcript)
    for request in TO_FREE_TEXT:
        response = page.send(transcript, ChatRequest(session_id=response.session_id, **request), prompt=response.prompt)
    sid = response.session_id
    conversations(store).handle(ChatRequest(session_id=sid, message="エアコンの風が弱い"))  # through the API
    page.send(transcript, ChatRequest(session_id=sid, action="answer", action_value="dont_know"),
              prompt=response.prompt)  # the console still shows the free-text prompt
    users = [e["text"] for e in store.chat_entries(sid) if e["role"] == "user"]
    assert "エアコンの風が弱い" in users and transcript == store.chat_entries(sid)


def test_two_tabs_on_one_knowledge_conversation_keep_both_turns(store):
    tab_a, tab_b = KnowledgeConversations(store, "a"), KnowledgeConversations(store, "b")
    cid = tab_a.new()
    chat_a, out_a, chat_b, out_b = [], [], [], []
    tab_a.submit(cid, chat_a, out_a, "業務委託契約の損害賠償条項を確認したい", [], OfflineClient())
    tab_b.submit(cid, chat_b, out_b, "上限は委託料の総額までにしたい", [], OfflineClient())  # b never reloaded
    users = [e["content"] for e in store.chat_entries(cid) if e["role"] == "user"]
    assert users == ["業務委託契約の損害賠償条項を確認したい", "上限は委託料の総額までにしたい"]
    assert [e["id"] for e in chat_b] == [e["id"] for e in store.chat_entries(cid)]


def test_two_tabs_on_one_faq_conversation_keep_both_turns(store):
    tab_a, tab_b = FAQConversations(store, "a"), FAQConversations(store, "b")
    cid, state = tab_a.new()
    chat_a: list[dict] = []
    chat_b: list[dict] = []
    tab_a.ask(cid, state, chat_a, "オイル交換の目安は？", client=OfflineClient())
    tab_b.ask(cid, state, chat_b, "車検の予約はできますか", client=OfflineClient())
    assert [e["user"] for e in store.chat_entries(cid)] == ["オイル交換の目安は？", "車検の予約はできますか"]
