"""FAQ NLG through core.answer_guard (issue #26): a scripted model that hands the question back as the
answer, or invents a figure, is asked once more, then replaced by the offline answer or an honest
"could not answer" — never shown as a grounded answer."""
import json

from core.answer_guard import NOT_ANSWERED
from core.faq import nodes
from core.faq.flow import ask, start_session
from core.llm.scripted import ScriptedClient
from core.text.untrusted import OPEN

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


def test_on_a_small_context_the_second_request_keeps_the_question_and_its_articles(fake_kb, config):
    """The regeneration is the first request plus the rejected answer and the reason. Fitting it to a small
    context trims the articles, as it did for the first request; it never drops the question with them
    as older history (it did: the model was asked to answer again with only the reason in front of it)."""
    log = []
    client = ScriptedClient([INTENT, PLAN, answer(QUESTION), answer("5,000kmまたは6か月ごとの交換がおすすめです。")])
    client.context_tokens = 400  # the articles do not fit whole
    result = ask(start_session("s"), QUESTION, client=client, kb=fake_kb, config=config, log=log)
    assert result.outcome == "answered" and result.message.startswith("5,000km")
    first, second = client.requests[-2].messages, client.requests[-1].messages
    assert second[:len(first)] == first  # the question and its (trimmed) articles, as first sent
    assert QUESTION in second[-3]["content"] and OPEN in second[-3]["content"] and "kb:101" in second[-3]["content"]
    assert second[-2]["content"] == answer(QUESTION) and "繰り返し" in second[-1]["content"]
    fits = [r["call"]["fit"] for r in log if r["task"] == "faq_answer"]
    assert len(fits) == 2 and all("参照テキスト" in " ".join(f) for f in fits)
    assert not any("以前の会話" in note for f in fits for note in f)
