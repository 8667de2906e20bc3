"""Offline FAQ policies: deterministic stand-ins for the model's IR, GE and NLG calls.

* ``classify_intent`` (task ``faq_intent``): :func:`core.faq.intent_rules.classify`.
* ``plan_tool`` (task ``faq_plan``): always ``kb_search`` with the intent's query.
* ``answer`` (task ``faq_answer``): an extractive answer — the sentences of the top article that
  share the most words with the question (with the bullet list they introduce), then
  「詳しくは kb:012「…」をご覧ください。」; a second article is cited when it is nearly as
  relevant and about the same subject. Citations are only ids that were retrieved.

They read the facts from ``request.context`` (PII already masked by the flow).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any

from core.faq.intent_rules import classify
from core.llm.base import LLMRequest

_SENTENCE = re.compile(r"[^。]+。?")
_LIST_ITEM = ("・", "【", "※", "-")
MAX_LIST_LINES = 8


def classify_intent(request: LLMRequest) -> dict[str, Any]:
    ctx = request.context
    return classify(ctx.get("text", ""), ctx.get("previous_query"))


def plan_tool(request: LLMRequest) -> dict[str, Any]:
    ctx = request.context
    return {"tool_name": "kb_search", "query": ctx.get("query") or ctx.get("text") or "検索",
            "top_k": int(ctx.get("top_k") or 3), "reason": "FAQ 記事を検索して根拠を得る"}


def _tokens(text: str) -> set[str]:
    try:
        from core.rag.ja_tokens import get_tokenizer

        return set(get_tokenizer()(text))
    except Exception:  # noqa: BLE001 - tokenizer unavailable: character bigrams
        t = unicodedata.normalize("NFKC", text)
        return {t[i:i + 2] for i in range(len(t) - 1)}


def units(body: str) -> list[str]:
    """Sentences of ``body``; list lines (``・…``, ``【…】``) stay whole."""
    out: list[str] = []
    for line in (raw.strip() for raw in body.splitlines()):
        if not line:
            continue
        if line.startswith(_LIST_ITEM):
            out.append(line)
        else:
            out.extend(s.strip() for s in _SENTENCE.findall(line) if s.strip())
    return out


def _is_item(unit: str) -> bool:
    return unit.startswith(_LIST_ITEM)


def best_sentences(body: str, query: str, limit: int = 2, question: str = "") -> list[str]:
    """The ``limit`` sentences sharing most words with ``query`` (words of the user's own
    ``question`` count double: a follow-up's query also carries the earlier topic), in document
    order, each followed by the list lines it introduces."""
    parts = units(body)
    if not parts:
        return []
    wanted, asked = _tokens(query), _tokens(question)
    scored = [(len(wanted & _tokens(u)) + len(asked & _tokens(u)), -i) for i, u in enumerate(parts) if not _is_item(u)]
    if not scored:
        return parts[:MAX_LIST_LINES]
    if max(score for score, _ in scored) == 0:
        scored = [(0, neg) for _, neg in sorted(scored, key=lambda x: -x[1])]
    chosen = sorted(sorted(scored, reverse=True)[:limit], key=lambda x: -x[1])
    out: list[str] = []
    for _, neg in chosen:
        i = -neg
        out.append(parts[i])
        j = i + 1
        while j < len(parts) and _is_item(parts[j]) and j - i <= MAX_LIST_LINES:
            out.append(parts[j])
            j += 1
    return list(dict.fromkeys(out))


def _join(lines: list[str]) -> str:
    text = ""
    for line in lines:
        if text and (_is_item(line) or _is_item(text.splitlines()[-1])):
            text += "\n"
        text += line
    return text


def answer(request: LLMRequest) -> dict[str, Any]:
    ctx = request.context
    hits = ctx.get("hits") or []
    if not hits:
        return {"message": "ご質問に該当する FAQ 記事が見つかりませんでした。", "citations": []}
    question = ctx.get("query") or ctx.get("question") or ""
    top = hits[0]
    body = _join(best_sentences(top.get("text", ""), question, question=ctx.get("question") or ""))
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
