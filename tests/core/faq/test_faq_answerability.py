"""FAQ answers reviewers can trust (issue #16): a question the knowledge base does not answer (a price it
does not list) is "not found" with the next step, never answered from a neighbouring article; two
questions in one message are both answered, each with its citation — offline and with a model."""
from __future__ import annotations

import json

import pytest

from core.faq.answerability import FACETS, answerable, asked_facets, split_questions, supports
from core.faq.flow import ask, start_session
from core.faq.kb import default_kb
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient

PRICE = FACETS[0]


@pytest.mark.parametrize("text,parts", [
    ("オイル交換の目安と、ワイパーの交換時期を教えてください。", ["オイル交換の目安", "ワイパーの交換時期を教えてください"]),
    ("車検はいつから受けられますか？あと代車は借りられますか？", ["車検はいつから受けられますか?", "代車は借りられますか?"]),
    ("バッテリーの寿命はどのくらい？それと、タイヤの空気圧はどれくらいにすればいい？",
     ["バッテリーの寿命はどのくらい?", "タイヤの空気圧はどれくらいにすればいい?"]),
    ("車検の費用はどのくらい？", ["車検の費用はどのくらい?"]),
    ("オイル交換とワイパー交換の時期", ["オイル交換とワイパー交換の時期"]),
    ("ありがとう。またね", ["ありがとう。またね"]),
])
def test_split_questions(text, parts):
    assert split_questions(text) == parts


def test_facets_and_support():
    assert [f.name for f in asked_facets("ワイパーの交換費用はいくら？")] == ["price"]
    assert [f.name for f in asked_facets("車検にはどのくらい時間がかかりますか")] == ["duration"]
    assert asked_facets("オイル交換の目安は？") == []
    wipers = {"id": "kb:9", "title": "ワイパーの交換時期", "text": "ワイパーは1年ごとの交換がおすすめです。"}
    road = {"id": "kb:1", "title": "ロードサービスの費用", "text": "新車保証期間中は無料でご利用いただけます。"}
    tyres = {"id": "kb:2", "title": "ローテーション", "text": "4本のタイヤの外径に差があると駆動系に負担がかかります。"}
    assert not supports(wipers, "ワイパーのゴムの交換費用はいくら", PRICE)
    assert supports(road, "ロードサービスはいくらかかりますか", PRICE)
    assert not supports(tyres, "タイヤ4本交換するといくら", PRICE)  # 「負担」 (a load) is not a price
    kept, missing = answerable([wipers], "ワイパーの交換費用はいくら")
    assert kept == [] and missing is PRICE
    assert answerable([wipers], "ワイパーの交換時期は？") == ([wipers], None)


def run(text, client=None):
    return ask(start_session("t"), text, client=client or OfflineClient(), kb=default_kb())


@pytest.mark.parametrize("text", ["ワイパーのゴムの交換費用はいくらですか？", "オイル交換の料金を教えて",
                                  "タイヤ4本交換するといくらかかりますか", "エアコンフィルターの値段は？"])
def test_a_price_the_kb_does_not_list_is_not_found_with_the_next_step(text):
    result = run(text)
    assert result.outcome == "not_found" and result.citations == []
    assert "料金についての記載がありません" in result.message and "お見積もり" in result.message


@pytest.mark.parametrize("text,article", [("車検の費用はどのくらい？", "kb:004"), ("ロードサービスの費用はかかりますか", None),
                                          ("代車は無料で借りられますか", "kb:030"), ("車検にはどのくらい時間がかかりますか", "kb:005")])
def test_facts_the_kb_states_are_answered(text, article):
    result = run(text)
    assert result.outcome == "answered" and result.citations
    if article:
        assert result.citations[0] == article


@pytest.mark.parametrize("text,articles", [
    ("オイル交換の目安と、ワイパーの交換時期を教えてください。", ["kb:007", "kb:009"]),
    ("車検はいつから受けられますか？あと代車は借りられますか？", ["kb:003", "kb:030"]),
    ("バッテリーの寿命はどのくらい？それと、タイヤの空気圧はどれくらいにすればいい？", ["kb:018", "kb:014"]),
])
def test_two_questions_are_both_answered_each_with_its_citation(text, articles):
    result = run(text)
    assert result.outcome == "answered" and result.citations == articles
    for article in articles:
        assert f"詳しくは {article}「" in result.message
    assert result.message.count("【") == 2


def answer_json(message, citations):
    return json.dumps({"message": message, "citations": citations}, ensure_ascii=False)


def intent_json(query):
    return json.dumps({"intent_type": "faq", "confidence": 0.9, "query": query, "keywords": [], "reason": "t"},
                      ensure_ascii=False)


def plan_json(query):
    return json.dumps({"tool_name": "kb_search", "query": query, "top_k": 3, "reason": "t"}, ensure_ascii=False)


def test_a_model_never_sees_an_article_that_does_not_state_the_price():
    q = "ワイパーのゴムの交換費用はいくらですか？"
    client = ScriptedClient([intent_json(q), plan_json(q), answer_json("ワイパーは2,000円です。kb:009", ["kb:009"])])
    result = run(q, client)
    assert result.outcome == "not_found" and result.citations == []
    assert [r.task for r in client.requests] == ["faq_intent", "faq_plan"]  # no answer call: nothing to answer from


def test_a_model_answering_one_of_two_questions_gets_the_other_named():
    q = "車検はいつから受けられますか？あと代車は借りられますか？"
    client = ScriptedClient([intent_json(q), plan_json(q), answer_json("満了日の1か月前から受けられます。", ["kb:003"])])
    result = run(q, client)
    assert result.outcome == "answered" and result.citations == ["kb:003"]
    assert "「代車は借りられますか」については、該当する FAQ 記事が見つかりませんでした" in result.message
    prompt = client.requests[-1].messages[-1]["content"]
    assert "ご質問は 2 点です" in prompt and "kb:030" in prompt
