"""Input gates: over-long input and input without Japanese stop before any model call, in all flows."""
import json
import sys
from pathlib import Path

import pytest

from core.llm.scripted import ScriptedClient
from core.text.input_gate import NOT_JAPANESE, check, check_length, is_not_japanese
from core.text.pii import MAX_MESSAGE_CHARS

sys.path.insert(0, str(Path(__file__).parent / "diagnosis"))
sys.path.insert(0, str(Path(__file__).parent / "faq"))

from diagnosis_fakes import MIRAI, FakeRetriever, Hit, TaskClient  # noqa: E402
from faq_fakes import ARTICLES  # noqa: E402
from faq_fakes import FakeRetriever as FakeFAQRetriever  # noqa: E402

LONG = "ブレーキを踏むと音がする。" * (MAX_MESSAGE_CHARS // 13 + 10)


@pytest.mark.parametrize("text", ["hello", "Can I still drive my car?", "12345", "🚗💨", "😀😀😀", "！？", "1 2 3 ..."])
def test_text_without_japanese_is_not_japanese(text):
    assert is_not_japanese(text)
    assert check(text, japanese=True).message == NOT_JAPANESE
    assert check(text) is None  # only asked for when the caller needs Japanese


@pytest.mark.parametrize("text", ["P0301", "ABS", "Ｐ０３０１", "ブレーキ", "エンジン警告灯 on", "READYが点かない", "", "   "])
def test_japanese_codes_and_lamp_names_pass(text):
    assert not is_not_japanese(text) and check(text, japanese=True) is None


def test_length_gate_message_is_japanese_with_the_limit():
    assert check_length("あ" * MAX_MESSAGE_CHARS) is None
    gate = check_length("あ" * (MAX_MESSAGE_CHARS + 1))
    assert gate.kind == "too_long" and "入力が長すぎます" in gate.message and f"{MAX_MESSAGE_CHARS:,}" in gate.message
    assert check(LONG, japanese=True).kind == "too_long"  # length is checked first


def _diagnosis_at_free_text(client, retriever):
    from core.diagnosis import ChatRequest, ChatService

    service = ChatService(client, retriever=retriever)
    sid = service.start().session_id
    service.process(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI))
    service.process(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    return service, sid


@pytest.mark.parametrize("text", ["My brakes squeal", "🚗💨💨", "0000"])
def test_diagnosis_symptom_without_japanese_asks_for_japanese(text):
    from core.diagnosis import ChatRequest

    client, retriever = TaskClient(), FakeRetriever([Hit("v:s1", "ブレーキ鳴き")])
    service, sid = _diagnosis_at_free_text(client, retriever)
    before = service.get_session(sid).model_dump()
    r = service.process(ChatRequest(session_id=sid, message=text))
    assert r.current_step == "free_text" and r.notice.startswith("日本語で入力してください。")
    assert client.requests == [] and retriever.queries == []  # no model call, no search
    assert service.get_session(sid).model_dump() == before
    r = service.process(ChatRequest(session_id=sid, message="P0301 が出た"))  # Japanese goes on as before
    assert r.current_step != "free_text" and r.notice is None and retriever.queries


def test_diagnosis_over_long_input_gets_the_message_and_no_model_call():
    from core.diagnosis import ChatRequest

    client, retriever = TaskClient(), FakeRetriever()
    service, sid = _diagnosis_at_free_text(client, retriever)
    r = service.process(ChatRequest(session_id=sid, message=LONG))
    assert "入力が長すぎます" in r.notice and client.requests == [] and retriever.queries == []
    assert service.get_session(sid).symptom_text == ""


def test_faq_over_long_question_is_answered_without_model_or_kb():
    from core.faq.flow import ask, start_session
    from core.faq.kb import KnowledgeBase

    retriever = FakeFAQRetriever()
    client = ScriptedClient([])
    result = ask(start_session("s"), "オイル交換について" + LONG, client=client, kb=KnowledgeBase(ARTICLES, retriever=retriever))
    assert "入力が長すぎます" in result.message and result.outcome == "fallback" and result.citations == []
    assert client.requests == [] and retriever.queries == []
    assert [m["role"] for m in result.state["messages"]] == ["assistant"]  # the long text is not stored


def test_knowledge_over_long_turn_is_not_sent_nor_replayed():
    from core.knowledge.session import history_for_model, submit_turn

    client = ScriptedClient([])
    chat, knowledge = [], [{"contract_type": "old"}]
    outcome = submit_turn(chat, knowledge, "第3条の件。" + LONG, [], client)
    assert not outcome.result.ok and outcome.result.error_type == "input_too_long"
    assert client.requests == [] and knowledge == [{"contract_type": "old"}]
    assert "入力が長すぎます" in chat[-1]["content"] and len(chat[0]["content"]) <= 201
    assert history_for_model(chat) == []
    turn = {"control": {"schema_version": "1.0", "mode": "clarify"}, "state": {"phase": "x", "missing_info": []},
            "assistant_message": "はい", "knowledge_json": None}
    ok_client = ScriptedClient([json.dumps(turn, ensure_ascii=False)])
    submit_turn(chat, knowledge, "短い質問です", [], ok_client)
    assert [m["content"] for m in ok_client.requests[0].messages if m["role"] == "user"][-1].count("短い質問です") == 1
    assert all("入力が長すぎます" not in m["content"] for m in ok_client.requests[0].messages)
