"""Offline FAQ policies: deterministic stand-ins for the model's IR, GE and NLG calls.

* ``classify_intent`` (task ``faq_intent``): :func:`core.faq.intent_rules.classify`.
* ``plan_tool`` (task ``faq_plan``): always ``kb_search`` with the intent's query.
* ``answer`` (task ``faq_answer``): several questions in one message (``parts``) are answered one by
  one, each from its own best article and citing it; otherwise an extractive answer — the sentences of the top article that
  share the most words with the question, whole (a list's lead sentence with its matching items,
  never an item alone: :mod:`core.text.quoting`), then
  「詳しくは kb:012「…」をご覧ください。」; a second article is cited when it is nearly as
  relevant and about the same subject. Citations are only ids that were retrieved.

They read the facts from ``request.context`` (PII already masked by the flow).
"""
from __future__ import annotations

import re
from typing import Any

from core.faq import answerability
from core.faq.intent_rules import classify
from core.llm.base import LLMRequest
from core.text import quoting


def classify_intent(request: LLMRequest) -> dict[str, Any]:
    ctx = request.context
    return classify(ctx.get("text", ""), ctx.get("previous_query"))


def plan_tool(request: LLMRequest) -> dict[str, Any]:
    ctx = request.context
    return {"tool_name": "kb_search", "query": ctx.get("query") or ctx.get("text") or "検索",
            "top_k": int(ctx.get("top_k") or 3), "reason": "FAQ 記事を検索して根拠を得る"}


def _tokens(text: str) -> set[str]:
    return quoting.tokens(text)


def units(body: str) -> list[str]:
    """Sentences of ``body``; list lines (``・…``, ``【…】``, ``1. …``) and headings stay whole."""
    return [u.text for u in quoting.units(body)]


def best_sentences(body: str, query: str, limit: int = 2, question: str = "") -> list[str]:
    """The ``limit`` sentences sharing most words with the user's ``question`` (twice) and the
    search ``query`` (once: a follow-up's query also carries the earlier topic), in document order;
    a sentence introducing a list brings the items that match (all of them when none does), a
    matching item brings the sentence introducing its list — never a fragment of a list
    (:func:`core.text.quoting.quote`)."""
    if question:
        return quoting.quote(body, question, limit=limit, extra=query)
    return quoting.quote(body, query, limit=limit)


def _join(lines: list[str]) -> str:
    return quoting.join(lines)


def answer(request: LLMRequest) -> dict[str, Any]:
    ctx = request.context
    hits = ctx.get("hits") or []
    if not hits:
        return {"message": "ご質問に該当する FAQ 記事が見つかりませんでした。", "citations": []}
    parts = [p for p in ctx.get("parts") or [] if p.get("hits")]
    if len(parts) > 1:
        return _answer_each(parts)
    question = ctx.get("query") or ctx.get("question") or ""
    top = hits[0]
    body = _with_fact(_join(best_sentences(top.get("text", ""), question, question=ctx.get("question") or "")),
                      top.get("text", ""), ctx.get("question") or question)
    cited = [top]
    q_tokens = _tokens(question)
    for other in hits[1:int(ctx.get("max_citations") or 2)]:
        close = other.get("score", 0) >= 0.9 * top.get("score", 0) and other.get("score", 0) >= 0.5
        if close and q_tokens & _tokens(other.get("title", "")) & _tokens(top.get("title", "")):
            cited.append(other)
    more = f"詳しくは {top['id']}「{top['title']}」をご覧ください。"
    if len(cited) > 1:
        more += "関連する記事: " + "、".join(f"{h['id']}「{h['title']}」" for h in cited[1:]) + "。"
    return {"message": f"{body}\n\n{more}", "citations": [h["id"] for h in cited]}


def _answer_each(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several questions: each answered from its own best article, with that article cited."""
    blocks, cited = [], []
    for part in parts:
        top = next((h for h in part["hits"] if h["id"] not in cited), part["hits"][0])
        body = _with_fact(_join(best_sentences(top.get("text", ""), part["question"], question=part["question"])),
                          top.get("text", ""), part["question"])
        blocks.append(f"【{part['question'].strip()}】\n{body}\n詳しくは {top['id']}「{top['title']}」をご覧ください。")
        if top["id"] not in cited:
            cited.append(top["id"])
    return {"message": "\n\n".join(blocks), "citations": cited}


_WHEN_ASKED = re.compile(r"いつ|時期|目安|何キロ|何km|何年|何か月|何ヶ月|どのくらい|どれくらい|どれぐらい|どのぐらい|頻度|ごと")
_WHEN_STATED = re.compile(r"[0-9０-９][0-9０-９,，.]*\s*(km|キロ|か月|カ月|ヶ月|年|万km)|ごと|毎年")


def _with_fact(body: str, text: str, question: str) -> str:
    """``body`` plus the article's sentence stating the fact asked for (a price, a duration:
    :mod:`core.faq.answerability`; an interval or a time for 「いつ」「目安」) when the quoted sentences
    leave it out."""
    if _WHEN_ASKED.search(question[:1000]) and not _WHEN_STATED.search(body):
        stated = next((u.text for u in quoting.units(text) if _WHEN_STATED.search(u.text)), "")
        if stated:
            return f"{stated}\n{body}" if body else stated
    for facet in answerability.asked_facets(question):
        head = answerability.head_word(question, facet)
        for unit in quoting.units(text):
            if facet.evidence.search(unit.text) and (head is None or head in unit.text) and unit.text not in body:
                return f"{body}\n{unit.text}" if body else unit.text
    return body
