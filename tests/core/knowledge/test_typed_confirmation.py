"""Typing 「確定」 in the interview (issue #15): it confirms through the button's path (permission-checked,
audited, recorded with who) or the reply says to press the button; the reply never claims what did not
happen."""
from __future__ import annotations

import json

import pytest

from core.identity import Identity
from core.knowledge.confirmation import is_typed_confirmation
from core.knowledge.conversation import KnowledgeConversations
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient
from core.store.store import Store

CASE = "業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。"
POLICY = "委託料総額を上限とするよう修正を求めるべきです。「賠償額は委託料総額を上限とする。」"
YAMADA = Identity(name="山田", source="local")


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'k.db'}")
    yield s
    s.engine.dispose()


def drafted(store: Store, owner) -> tuple[KnowledgeConversations, str, list, list]:
    conversations = KnowledgeConversations(store, owner)
    cid = conversations.new()
    chat: list = []
    outputs: list = []
    for text in (CASE, POLICY):
        conversations.submit(cid, chat, outputs, text, [], OfflineClient())
    assert [e["status"] for e in outputs] == ["draft"]
    return conversations, cid, chat, outputs


def test_a_typed_confirmation_confirms_like_the_button_and_says_so(store):
    conversations, cid, chat, outputs = drafted(store, YAMADA)
    outcome = conversations.submit(cid, chat, outputs, "確定", [], OfflineClient())
    entry = store.get_entry(outputs[0]["id"])
    assert entry["status"] == "confirmed" and entry["confirmed_by_label"] == "山田（未確認）"
    assert [e["status"] for e in outputs] == ["confirmed"]  # what the page shows beside the chat
    [audit] = [a for a in store.list_audit("knowledge_entry", entry["id"]) if a["action"] == "entry.confirm"]
    assert audit["actor_label"] == "山田（未確認）"
    reply = outcome.assistant_entry["content"]
    assert f"ライブラリで確定済みにしました（No.{entry['id']}・記録: 山田（未確認））" in reply
    stored = store.chat_entries(cid)[-1]["content"]
    assert stored == reply  # the note is part of the stored reply, so a reload shows it too


def test_without_the_permission_the_reply_says_to_press_the_button(store):
    nobody = Identity(name="閲覧者", source="local", roles=frozenset())
    conversations, cid, chat, outputs = drafted(store, nobody)
    outcome = conversations.submit(cid, chat, outputs, "これでお願いします", [], OfflineClient())
    assert store.get_entry(outputs[0]["id"])["status"] == "draft"
    reply = outcome.assistant_entry["content"]
    assert "まだ確定されていません" in reply and "このナレッジを確定する」ボタン" in reply
    assert "確定しました" not in reply.replace("確定済みにしました", "")
    assert not [a for a in store.list_audit("knowledge_entry") if a["action"] == "entry.confirm"]


def test_a_reply_that_claims_a_confirmation_that_did_not_happen_is_corrected(store):
    conversations, cid, chat, outputs = drafted(store, YAMADA)
    claim = {"control": {"schema_version": "1.0", "mode": "interview"},
             "state": {"phase": "review_knowledge", "missing_info": []},
             "assistant_message": "ナレッジを確定しました。", "knowledge_json": None}
    outcome = conversations.submit(cid, chat, outputs, "ほかに気をつける点はありますか",
                                   [], ScriptedClient([json.dumps(claim, ensure_ascii=False)]))
    assert store.get_entry(outputs[0]["id"])["status"] == "draft"
    assert "ライブラリではまだ確定されていません" in outcome.assistant_entry["content"]


def test_a_typed_confirmation_before_any_draft_confirms_nothing(store):
    conversations = KnowledgeConversations(store, YAMADA)
    cid = conversations.new()
    chat: list = []
    outputs: list = []
    outcome = conversations.submit(cid, chat, outputs, "確定", [], OfflineClient())
    assert not store.list_entries(conversation_id=cid, status="confirmed")
    assert "確定しました" not in outcome.assistant_entry["content"]


@pytest.mark.parametrize("text,expected", [
    ("確定", True), ("確定します。", True), ("これでお願いします", True), ("問題ありません！", True),
    ("まだ確定しないでください", False), ("確定ですか？", False), ("タイトル: 確定版", False), ("確定前に相談したい", False),
    ("この条項は相手方が一方的に確定させる内容になっていて、こちらに不利でした。", False), ("", False), (None, False),
])
def test_what_reads_as_a_typed_confirmation(text, expected):
    assert is_typed_confirmation(text) is expected
