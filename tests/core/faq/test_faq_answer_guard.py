"""FAQ NLG through core.answer_guard (issue #26): a scripted model that hands the question back as the
answer, or invents a figure, is asked once more, then replaced by the offline answer or an honest
"could not answer" — never shown as a grounded answer."""
import json

from core.answer_guard import NOT_ANSWERED
from core.faq import nodes
from core.faq.flow import ask, start_session
from core.llm.scripted import ScriptedClient

QUESTION = "オイル交換の目安はどのくらいですか？"
INTENT = json.dumps({"intent_type": "faq", "confidence": 0.9, "query": "オイル交換の目安", "keywords": [],
                     "reason": "test"}, ensure_ascii=False)
PLAN = json.dumps({"tool_name": "kb_search", "query": "オイル交換の目安", "top_k": 3, "reason": "test"},
                  ensure_ascii=False)


def answer(message, citations=("kb:101",)):
    return json.dumps({"message": message, "citations": list(citations)}, ensure_ascii=False)


def nlg(result):
    return next(e for e in result.trace if e["node"] == "NLG")


def test_the_question_handed_back_is_regenerated_once(fake_kb, config):
    log = []
    client = ScriptedClient([INTENT, PLAN, answer(QUESTION), answer("5,000kmまたは6か月ごとの交換がおすすめです。")])
    result = ask(start_session("s"), QUESTION, client=client, kb=fake_kb, config=config, log=log)
    assert result.outcome == "answered" and result.message.startswith("5,000km")
    assert nlg(result)["guard"] == {"outcome": "regenerated", "findings": ["echo_user"]}
    second = client.requests[-1].messages
    assert second[-2] == {"role": "assistant", "content": answer(QUESTION)} and "繰り返し" in second[-1]["content"]
    assert log[-1]["guards"][0]["guard"] == "echo_user" and log[-1]["guards"][0]["action"] == "regenerated"


def test_an_invented_figure_twice_falls_back_to_the_offline_answer(fake_kb, config):
    log = []
    invented = answer("オイル交換は5年6万kmごとです。")
    client = ScriptedClient([INTENT, PLAN, invented, invented])
    result = ask(start_session("s"), QUESTION, client=client, kb=fake_kb, config=config, log=log)
    assert "6万km" not in result.message and "5年" not in result.message
    assert nlg(result)["guard"] == {"outcome": "offline", "findings": ["unsupported_figure", "unsupported_figure"]}
    assert result.outcome == "answered" and result.citations == ["kb:101"]  # the offline answer quotes the article
    assert "5,000km" in result.message
    assert log[-1]["provider"] == "offline" and log[-1]["guards"][0]["figures"] == ["5年", "6万km"]


def test_when_nothing_passes_the_answer_is_an_honest_could_not_answer(fake_kb, config, monkeypatch):
    echo = answer(QUESTION)
    monkeypatch.setattr(nodes, "offline_client", lambda: ScriptedClient([echo]))  # the offline answer fails too
    client = ScriptedClient([INTENT, PLAN, echo, echo])
    result = ask(start_session("s"), QUESTION, client=client, kb=fake_kb, config=config)
    assert result.message == NOT_ANSWERED and result.citations == [] and result.outcome == "not_found"
    assert nlg(result)["guard"]["outcome"] == "not_answered"


def test_a_good_answer_is_used_as_it_is(fake_kb, config):
    client = ScriptedClient([INTENT, PLAN, answer("エンジンオイルは5,000kmまたは6か月ごとの交換をおすすめしています。")])
    result = ask(start_session("s"), QUESTION, client=client, kb=fake_kb, config=config)
    assert result.outcome == "answered" and "guard" not in nlg(result) and client.remaining == 0
