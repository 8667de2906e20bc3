"""Nothing is lost: every flow page writes through to the store and resumes from ``?session=``; the
library, bookings and debug pages read the shared store (AppTest; each AppTest is a fresh browser)."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.identity import ADMIN, OPERATOR, Identity
from core.store import get_store
from tests.pages.conftest import APP

CASE = "業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。"
POLICY = "委託料総額を上限とするよう修正を求めるべきです。「賠償額は委託料総額を上限とする。」"
ADMIN_ID = Identity(name="管理者", email="admin@example.jp", source="proxy", roles=frozenset({OPERATOR, ADMIN}))


def browser(session: str | None = None, page: str | None = None) -> AppTest:
    """A new browser tab (fresh session state), optionally opening ``?session=…`` on ``page``."""
    at = AppTest.from_file(APP, default_timeout=90)
    if session:
        at.query_params["session"] = session
    at.run()
    assert not at.exception
    if page:
        at.switch_page(page)
        if session:
            at.query_params["session"] = session
        at.run()
        assert not at.exception
    return at


def knowledge_with_draft() -> AppTest:
    at = browser()
    at.chat_input[0].set_value(CASE).run()
    at.chat_input[0].set_value(POLICY).run()
    assert not at.exception and at.session_state.knowledge_outputs
    return at


def test_knowledge_conversation_resumes_in_another_browser_exactly():
    first = knowledge_with_draft()
    sid = first.query_params["session"][0] if isinstance(first.query_params["session"], list) else first.query_params["session"]
    assert sid == first.session_state.session_id
    second = browser(sid)
    assert [m.name for m in second.chat_message] == [m.name for m in first.chat_message]
    assert [e["content"] for e in second.session_state.chat] == [e["content"] for e in first.session_state.chat]
    assert second.session_state.knowledge_outputs[0]["target_clause"] == first.session_state.knowledge_outputs[0]["target_clause"]
    assert second.session_state.knowledge_outputs[0]["status"] == "draft"
    assert "payload" not in second.session_state.chat[0]  # attachment text is never stored


def test_unknown_session_gets_a_notice_and_a_new_conversation():
    at = browser("no-such-conversation")
    assert any("見つからないか、有効期限が切れています" in i.value for i in at.info)
    assert at.session_state.session_id != "no-such-conversation" and at.session_state.chat == []


def test_confirmed_entry_appears_in_the_library_and_a_later_turn_starts_a_new_draft():
    at = knowledge_with_draft()
    entry_id = at.session_state.knowledge_outputs[0]["id"]
    at.button(key=f"confirm_entry_{entry_id}").click().run()
    assert get_store().get_entry(entry_id)["status"] == "confirmed"
    at.chat_input[0].set_value("タイトル: 損害賠償上限の明記").run()
    assert get_store().get_entry(entry_id)["status"] == "confirmed"
    library = browser(page="pages/library.py")
    table = library.dataframe[0].value
    assert entry_id in list(table["No."]) and "🟢 確定済み" in list(table["状態"])


def test_new_conversation_over_a_draft_asks_first():
    at = knowledge_with_draft()
    old = at.session_state.session_id
    at.button(key="reset_chat").click().run()
    assert any("下書きが 1 件あります" in w.value for w in at.warning)
    assert at.session_state.session_id == old and at.session_state.chat
    at.button(key="reset_yes").click().run()
    assert at.session_state.session_id != old and at.session_state.chat == []
    assert get_store().conversation_outputs(old)  # the draft stays in the library


def test_recent_conversations_reopen_an_older_one():
    first = knowledge_with_draft()
    old = first.session_state.session_id
    first.button(key="reset_chat").click().run()
    first.button(key="reset_yes").click().run()
    first.button(key=f"open_knowledge_{old}").click().run()
    assert not first.exception
    assert first.session_state.session_id == old and len(first.session_state.chat) == 4


def test_faq_conversation_resumes():
    at = browser(page="pages/faq.py")
    at.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    sid = at.session_state.faq_conversation_id
    again = browser(sid, page="pages/faq.py")
    assert again.session_state.faq_conversation_id == sid
    assert [t["user"] for t in again.session_state.faq_chat] == ["オイル交換の目安は？"]
    assert again.session_state.faq_state["turn_id"] == at.session_state.faq_state["turn_id"]


def test_library_edit_keeps_history_and_archive_is_admin_only():
    knowledge_with_draft()
    entry = get_store().list_entries()[0]
    get_store().edit_entry(entry["id"], {"knowledge_title": "賠償上限の明記"}, Identity(name="山田"))
    assert [h["action"] for h in get_store().entry_history(entry["id"])][-1] == "edit"
    get_store().set_entry_status(entry["id"], "archive", ADMIN_ID)
    lib = browser(page="pages/library.py")
    assert any("条件に合うナレッジはありません" in i.value for i in lib.info)  # archived is hidden by default
    lib.multiselect(key="lib_status").set_value(["archived"]).run()
    assert list(lib.dataframe[0].value["タイトル"]) == ["賠償上限の明記"]


def test_bookings_page_lists_filters_and_cancel_asks_first():
    store = get_store()
    number = store.create_booking(None, booking_type="dispatch", contact={"name": "佐藤", "phone": "090"},
                                  urgency="critical", vehicle_label="カイワ ミライ")
    store.create_booking(None, booking_type="visit", contact={"name": "鈴木"}, urgency="low")
    at = browser(page="pages/bookings.py")
    table = at.dataframe[0].value
    assert set(table["予約番号"]) >= {number} and len(table) == 2
    at.multiselect(key="bk_urgency").set_value(["critical"]).run()
    assert list(at.dataframe[0].value["予約番号"]) == [number]


def test_debug_page_shows_records_from_every_browser():
    at = browser(page="pages/faq.py")
    at.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    assert get_store().count_debug_records() > 0
    other = browser(page="pages/debug_log.py")
    assert other.dataframe and len(other.dataframe[0].value) == get_store().count_debug_records()
    assert other.button(key="clear_debug").disabled  # clearing is for admins


def test_uploads_are_stored_as_metadata_only():
    import hashlib

    from tests.helpers.documents import make_docx

    data = make_docx(["業務委託契約書", "第8条（損害賠償）乙は秘密の条文を賠償する。"], [["項目", "金額"], ["委託料", "月額50万円"]], [])
    at = browser()
    at.chat_input[0].set_value("添付の契約書です").upload("contract.docx", data).run()
    assert not at.exception
    sid = at.session_state.session_id
    [user] = [t for t in get_store().list_turns(sid) if t["role"] == "user"]
    [meta] = user["attachments"]
    assert meta["name"] == "contract.docx" and meta["size"] == len(data)
    assert meta["sha256"] == hashlib.sha256(data).hexdigest() and "pages" in meta  # None for a DOCX
    stored = repr(get_store().list_turns(sid, include_superseded=True))
    assert "秘密の条文" not in stored and "月額50万円" not in stored  # never the text
    answer = [t for t in get_store().list_turns(sid) if t["role"] == "assistant"][0]
    assert answer["latency_ms"] is not None and answer["provider"] == "offline" and answer["method"]
