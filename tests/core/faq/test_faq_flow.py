"""The UC-01 flow end to end on a fake KB: branches, retry / backoff, fallback, not found,
citation validation, model failures, multi-turn state, trace fields."""
import json

import pytest

from core.faq import replies
from core.faq.config import FAQConfig
from core.faq.flow import ask, start_session
from core.faq.kb import FaultyKB
from core.llm.base import ProviderError
from core.llm.scripted import ScriptedClient

TRACE_FIELDS = {"session_id", "turn_id", "node", "action", "latency_ms", "outcome", "intent_type", "confidence",
                "tool_name", "tool_status", "tool_ref", "citations", "error_type"}


def nodes(result):
    return [e["node"] for e in result.trace]


def intent(kind, query="オイル交換の目安"):
    return json.dumps({"intent_type": kind, "confidence": 0.9, "query": query, "keywords": [], "reason": "test"},
                      ensure_ascii=False)


PLAN = json.dumps({"tool_name": "kb_search", "query": "オイル交換の目安", "top_k": 3, "reason": "test"},
                  ensure_ascii=False)


def answer(message, citations):
    return json.dumps({"message": message, "citations": citations}, ensure_ascii=False)


def test_faq_hit_runs_the_happy_path_and_cites_real_articles(fake_kb, client, config):
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    assert nodes(result) == ["API", "IR", "GST", "GE", "TOOL", "NLG"]
    assert result.outcome == "answered"
    assert result.citations[0] == "kb:101" and set(result.citations) <= set(fake_kb.articles)
    # a real answer from the article text, not a template
    assert "5,000kmまたは6か月ごと" in result.message and "詳しくは kb:101「オイル交換の目安はどのくらいですか？」" in result.message
    assert [r.task for r in client.requests] == ["faq_intent", "faq_plan", "faq_answer"]
    state = result.state
    assert state["dialogue_mode"] == "ANSWER" and list(state["plan"]) == ["GE", "TOOL", "NLG"]
    assert state["tool.tool_name"] == "kb_search" and state["tool.tool_status"] == "ok"
    assert list(state["tool.tool_ref"]) == ["kb:101", "kb:102"]
    assert [m["role"] for m in state["messages"]] == ["user", "annotation", "tool", "assistant"]


def test_every_trace_entry_has_the_uc01_fields(fake_kb, client, config):
    result = ask(start_session("sess-a"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    for entry in result.trace:
        assert TRACE_FIELDS <= set(entry)
        assert entry["session_id"] == "sess-a" and entry["turn_id"] == 1 and entry["latency_ms"] >= 0
    last = result.trace[-1]
    assert last["intent_type"] == "faq" and last["confidence"] > 0.5
    assert last["tool_name"] == "kb_search" and last["tool_status"] == "ok" and last["tool_ref"] == ["kb:101", "kb:102"]
    assert last["citations"] == len(result.citations)
    tool = next(e for e in result.trace if e["node"] == "TOOL")
    assert tool["attempts"] == 1 and tool["hits"] == 2


def test_procedure_goes_step_by_step_through_the_kb(fake_kb, client, config):
    result = ask(start_session("s"), "オイル交換の手続きの方法は？", client=client, kb=fake_kb, config=config)
    assert result.state["intent"]["intent_type"] == "procedure"
    assert result.state["dialogue_mode"] == "STEP_BY_STEP" and "TOOL" in nodes(result)


@pytest.mark.parametrize("text, mode, kind", [
    ("こんにちは", "SMALLTALK", "greeting"),
    ("ありがとうございました", "SMALLTALK", "thanks"),
    ("何ができますか", "SMALLTALK", "about"),
    ("明日の天気って晴れる？", "REDIRECT", "oos"),
])
def test_oos_and_question_go_to_np_without_a_kb_search(text, mode, kind, fake_kb, client, config):
    result = ask(start_session("s"), text, client=client, kb=fake_kb, config=config)
    assert nodes(result) == ["API", "IR", "GST", "NP"]
    assert result.outcome == "smalltalk" and result.citations == []
    assert result.state["dialogue_mode"] == mode and result.trace[-1]["action"] == kind
    assert fake_kb.retriever.queries == []
    assert [r.task for r in client.requests] == ["faq_intent"]


@pytest.mark.parametrize("text, outcome, rule", [
    ("お酒を飲んでから3時間たてば運転していいですか", "refused", "drunk_driving"),
    ("値引きはいくらまでできますか", "handoff", "discount_guarantee"),
])
def test_policy_refuse_and_handoff(text, outcome, rule, fake_kb, client, config):
    result = ask(start_session("s"), text, client=client, kb=fake_kb, config=config)
    assert nodes(result) == ["API", "IR", "GST", "NP"] and result.outcome == outcome
    policy = result.state["policy"]
    assert policy["disallowed"] is True and policy["rule_id"] == rule
    assert result.message.startswith(policy["message"]) and "。" in result.message
    assert (replies.HANDOFF_NOTE in result.message) == (outcome == "handoff")
    assert fake_kb.retriever.queries == []


def test_kb_timeout_is_retried_with_backoff_then_falls_back(fake_kb, client, sleeps):
    kb = FaultyKB(fake_kb, mode="timeout")
    config = FAQConfig(strict=True, kb_max_retries=2, kb_backoff_s=0.5, sleep=sleeps.append)
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=kb, config=config)
    assert kb.calls == 3 and sleeps == [0.5, 1.0]
    assert nodes(result) == ["API", "IR", "GST", "GE", "TOOL", "Fallback"]
    assert result.outcome == "fallback" and result.citations == []
    assert result.state["last_error"]["error_type"] == "timeout" and result.state["tool.tool_status"] == "error"
    assert "タイムアウト" in result.message and "3 回" in result.message and replies.NEXT_STEP in result.message
    assert result.trace[-1]["error_type"] == "timeout"
    assert "faq_answer" not in [r.task for r in client.requests]


def test_retry_count_and_backoff_follow_the_config(fake_kb, client, sleeps):
    kb = FaultyKB(fake_kb, mode="timeout")
    config = FAQConfig(strict=True, kb_max_retries=4, kb_backoff_s=0.25, kb_backoff_max_s=1.0, sleep=sleeps.append)
    ask(start_session("s"), "オイル交換の目安は？", client=client, kb=kb, config=config)
    assert kb.calls == 5 and sleeps == [0.25, 0.5, 1.0, 1.0]


def test_a_timeout_that_recovers_within_the_retries_answers(fake_kb, client, sleeps, config):
    kb = FaultyKB(fake_kb, mode="timeout", times=2)
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=kb, config=config)
    assert result.outcome == "answered" and kb.calls == 3 and sleeps == [0.5, 1.0]
    assert next(e for e in result.trace if e["node"] == "TOOL")["attempts"] == 3


def test_a_kb_error_is_not_retried(fake_kb, client, sleeps, config):
    kb = FaultyKB(fake_kb, mode="error")
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=kb, config=config)
    assert kb.calls == 1 and sleeps == []
    assert result.outcome == "fallback" and result.message == replies.fallback("kb_error")


def test_no_hit_above_the_threshold_is_not_found_without_a_model_answer(fake_kb, client, config):
    result = ask(start_session("s"), "カーナビの地図更新はできますか", client=client, kb=fake_kb, config=config)
    assert fake_kb.retriever.queries  # searched, but the only hit (0.2) is below min_score
    assert result.outcome == "not_found" and result.citations == [] and result.message == replies.NOT_FOUND
    assert "faq_answer" not in [r.task for r in client.requests]  # nothing to invent from
    assert result.state["tool.tool_status"] == "empty"


def test_nlg_drops_invented_citations_and_their_mentions(fake_kb, config):
    client = ScriptedClient([intent("faq"), PLAN,
                             answer("5,000kmごとです。詳しくは kb:101 と kb:999 をご覧ください。", ["kb:999", "kb:101"])])
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    assert result.outcome == "answered" and result.citations == ["kb:101"]
    assert "kb:999" not in result.message and "kb:101" in result.message
    assert next(e for e in result.trace if e["node"] == "NLG")["dropped_citations"] == 1


def test_nlg_with_only_invented_citations_is_treated_as_not_found(fake_kb, config):
    client = ScriptedClient([intent("faq"), PLAN, answer("保証で無料になります。", ["kb:999"])])
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    assert result.outcome == "not_found" and result.citations == [] and "無料" not in result.message


def test_nlg_model_failure_falls_back_with_reason(fake_kb, config):
    client = ScriptedClient([intent("faq"), PLAN, ProviderError("auth", "bad key")])
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    assert nodes(result)[-2:] == ["NLG", "Fallback"]
    assert result.outcome == "fallback" and result.message == replies.FALLBACK["model"]
    assert result.state["last_error"]["error_type"] == "nlg_provider_error"


def test_ir_model_failure_uses_the_rule_intent(fake_kb, config):
    client = ScriptedClient([ProviderError("auth", "bad key"), PLAN, answer("詳しくは kb:101 をご覧ください。", ["kb:101"])])
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    ir = next(e for e in result.trace if e["node"] == "IR")
    assert ir["error_type"] == "model_provider_error" and ir["model_ok"] is False
    assert result.state["intent"]["source"] == "rules" and result.outcome == "answered"


def test_ge_model_plan_is_used_and_clamped(fake_kb, config):
    plan = json.dumps({"tool_name": "kb_search", "query": "タイヤ 空気圧", "top_k": 50, "reason": "r"}, ensure_ascii=False)
    client = ScriptedClient([intent("faq", "空気"), plan, answer("月に1回です。kb:201", ["kb:201"])])
    result = ask(start_session("s"), "空気どれくらい？", client=client, kb=fake_kb, config=config)
    assert result.state["tool.tool_input"]["query"] == "タイヤ 空気圧" and result.state["tool.tool_input"]["top_k"] == 5
    assert result.citations == ["kb:201"]


def test_plan_without_model_uses_the_goal_query(fake_kb, client):
    config = FAQConfig(strict=True, plan_with_model=False)
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    assert [r.task for r in client.requests] == ["faq_intent", "faq_answer"] and result.outcome == "answered"


def test_state_is_kept_across_turns_and_follow_ups_reuse_the_topic(fake_kb, client, config):
    first = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config)
    second = ask(first.state, "じゃあ交換時期はどこで確認できる？", client=client, kb=fake_kb, config=config)
    assert first.state["turn_id"] == 1 and second.state["turn_id"] == 2
    assert second.state["intent"]["query"].startswith("オイル交換の目安")
    assert second.outcome == "answered" and "整備履歴で確認できます" in second.message
    assert [e["turn_id"] for e in second.trace] == [2] * 6
    assert len(second.state["trace"]) == 12
    assert [m["role"] for m in second.state["messages"]].count("user") == 2
    # the earlier exchange is shown to the model as history
    nlg_request = [r for r in client.requests if r.task == "faq_answer"][-1]
    assert any(m["role"] == "assistant" and "kb:101" in m["content"] for m in nlg_request.messages)


def test_a_model_question_intent_without_a_greeting_gets_the_about_reply(fake_kb, config):
    client = ScriptedClient([intent("question", "運転は難しい？")])
    result = ask(start_session("s"), "運転って難しいですか？", client=client, kb=fake_kb, config=config)
    assert result.outcome == "smalltalk" and result.trace[-1]["action"] == "about"
    assert result.message == replies.non_task("about", fake_kb.categories())
