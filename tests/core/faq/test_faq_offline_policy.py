"""Offline policies: the extractive answer quotes the top article and cites retrieved ids only."""
from core.faq.offline_policy import answer, best_sentences, plan_tool, units
from core.llm.base import LLMRequest

BODY = ("車検は満了日の1か月前から受けられます。\n次の書類が必要です。\n・車検証\n・自賠責保険証明書\n"
        "満了日を過ぎると公道を走行できません。費用は車種により異なります。")


def hit(doc_id, title, text, score=0.9):
    return {"id": doc_id, "title": title, "category": "c", "score": score, "text": text}


def test_units_keep_list_lines_whole():
    assert units(BODY) == ["車検は満了日の1か月前から受けられます。", "次の書類が必要です。", "・車検証", "・自賠責保険証明書",
                           "満了日を過ぎると公道を走行できません。", "費用は車種により異なります。"]


def test_best_sentences_follow_the_question_and_bring_their_list():
    picked = best_sentences(BODY, "車検に必要な書類", limit=1)
    assert picked == ["次の書類が必要です。", "・車検証", "・自賠責保険証明書"]
    assert best_sentences(BODY, "費用", limit=1) == ["費用は車種により異なります。"]


def test_answer_quotes_the_article_and_cites_it():
    request = LLMRequest(messages=[], task="faq_answer", context={
        "question": "車検の費用は？", "query": "車検の費用",
        "hits": [hit("kb:004", "車検の費用", BODY), hit("kb:039", "支払方法", "現金とカードが使えます。", 0.6)]})
    data = answer(request)
    assert data["citations"] == ["kb:004"]
    assert "費用は車種により異なります。" in data["message"]
    assert data["message"].endswith("詳しくは kb:004「車検の費用」をご覧ください。")


def test_a_nearly_as_relevant_article_on_the_same_subject_is_cited_as_related():
    request = LLMRequest(messages=[], task="faq_answer", context={
        "question": "車検の費用", "query": "車検の費用",
        "hits": [hit("kb:004", "車検の費用", BODY, 0.95), hit("kb:052", "車検の書類", "車検証が必要です。", 0.9)]})
    data = answer(request)
    assert data["citations"] == ["kb:004", "kb:052"] and "関連する記事: kb:052「車検の書類」" in data["message"]


def test_no_hits_means_no_citations():
    assert answer(LLMRequest(messages=[], task="faq_answer", context={"hits": []}))["citations"] == []


def test_plan_uses_the_query():
    plan = plan_tool(LLMRequest(messages=[], task="faq_plan", context={"query": "車検 費用", "top_k": 4}))
    assert plan == {"tool_name": "kb_search", "query": "車検 費用", "top_k": 4, "reason": plan["reason"]}
