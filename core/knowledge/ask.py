"""Ask the knowledge base: a reviewer's question answered only from confirmed entries, with citations.

:func:`ask` searches the confirmed entries (:class:`core.knowledge.retrieval.KnowledgeIndex`), and when
some fit, makes **one** schema-checked call through ``core.engine.structured_call`` (task and schema
``knowledge_answer``: ``{answer, sources}`` like seed 000 §10; prompts ``knowledge_answer_system`` and
``knowledge_answer``, each entry in its own data block). The model's sources are kept only when they
name an entry that was retrieved, ordered most relevant first (retrieval score); an answer that cites
none of them is not an answer built from the knowledge base, so it becomes 「該当するナレッジはありません。」
— as when nothing scores ``MIN_SCORE`` (then no call is made at all). The question is masked for
personal data before it goes to the model or the debug log; so are the retrieved entries, as the library
listing masks them. The answer is checked, not only its sources (``core.knowledge.answer_guard``: no
text of an uncited entry, no address that is not in a cited entry, no instructions) and masked.

:func:`offline_answer` is the built-in provider's policy: it quotes the best entry (and a second one
scoring close to it) — its action plan and review points, word for word — with its number and title.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, MutableSequence

from core.answer_guard import REGENERATION_TAIL, check_answer, guarded, offline_client, regeneration_messages
from core.debuglog import CallTags
from core.engine import RetryPolicy, structured_call
from core.knowledge.answer_guard import checked_answer, masked_hit, quotable_lines
from core.knowledge.case_facts import contract_type_of, topic_of
from core.knowledge.confirmation import incomplete_label
from core.knowledge.retrieval import KnowledgeHit, KnowledgeIndex
from core.knowledge.similar import entry_topic, related
from core.prompts import load_prompt, render
from core.schemas import load_schema
from core.text.pii import mask_pii
from core.text.untrusted import data_block
from core.validation import ENTRY_FIELDS

logger = logging.getLogger(__name__)

ASK_TASK = "knowledge_answer"
NO_KNOWLEDGE = "該当するナレッジはありません。"
FAILED = "一時的に回答を作成できませんでした。時間をおいてもう一度お試しください。"
MAX_QUESTION_CHARS = 2000
ASK_HITS = 3
ENTRY_FIELD_CHARS = 600
SECOND_ENTRY_RATIO = 0.8
# A later hit unrelated to the question and to the best entry is still shown to the model when it scores
# this close to the best (the best may be the wrong one). Measured on bench/data/knowledge_queries.yaml
# (48 questions, top 3 at MIN_SCORE; docs/answer-quality-kb.md): 0.8 keeps all 40 right entries found and
# raises the share of shown entries related to the right one 0.722 → 0.802; 0.9 / 0.95 reach 0.849 / 0.886
# but lose one right entry.
CLOSE_RATIO = 0.8  # the offline answer quotes a second entry scoring at least this share of the best


@dataclass
class KnowledgeAnswer:
    """``answer`` and the cited entries (most relevant first); ``ok`` False = the model call failed."""

    ok: bool
    answer: str
    sources: list[KnowledgeHit] = field(default_factory=list)
    quotes: dict[int, str] = field(default_factory=dict)  # entry id -> the sentences the answer used
    error_type: str | None = None

    def as_response(self) -> dict[str, Any]:
        return {"answer": self.answer, "sources": [h.source() for h in self.sources]}


def _entry_block(hit: KnowledgeHit) -> str:
    e = hit.entry
    lines = [f"No.{hit.entry_id} {e.get('knowledge_title') or ''}",
             f"契約類型: {e.get('contract_type') or ''}", f"対象条項: {e.get('target_clause') or ''}",
             f"審査ポイント:\n{str(e.get('review_points') or '')[:ENTRY_FIELD_CHARS]}",
             f"対応方針:\n{str(e.get('action_plan') or '')[:ENTRY_FIELD_CHARS]}",
             f"条文例: {str(e.get('clause_sample') or '')[:ENTRY_FIELD_CHARS]}"]
    return data_block("\n".join(lines))


def _context_entry(hit: KnowledgeHit) -> dict[str, Any]:
    fields = ("knowledge_title", "contract_type", "target_clause", "review_points", "action_plan", "clause_sample")
    return {"entry_id": hit.entry_id, "score": round(hit.score, 4), **{f: str(hit.entry.get(f) or "") for f in fields}}


def _flat(text: str) -> str:
    return "".join(str(text or "").split())


def _grounded(data: dict[str, Any], hits: list[KnowledgeHit]) -> tuple[list[KnowledgeHit], dict[int, str]]:
    by_id = {h.entry_id: h for h in hits}
    cited: dict[int, str] = {}
    for item in data.get("sources") or []:
        try:
            entry_id = int(item.get("entry_id"))
        except (TypeError, ValueError):
            continue
        hit = by_id.get(entry_id)
        if hit is None or entry_id in cited:
            continue
        body = _flat("\n".join(str(hit.entry.get(f) or "") for f in ENTRY_FIELDS))
        quoted = str(item.get("content") or "").strip()
        lines = [ln.strip().lstrip("・") for ln in quoted.split("\n") if ln.strip()]
        cited[entry_id] = quoted if lines and all(_flat(ln) in body for ln in lines) else ""
    ordered = sorted((by_id[i] for i in cited), key=lambda h: -h.score)
    return ordered, cited


def ask(question: str, index: KnowledgeIndex, client: Any, *, log: MutableSequence[dict[str, Any]] | None = None,
        session_id: str = "", retry: RetryPolicy | None = None) -> KnowledgeAnswer:
    """The answer to ``question`` from the confirmed entries (module docstring). Never raises for a
    model or search failure (``ok=False`` with :data:`FAILED`)."""
    asked = (question or "").strip()[:MAX_QUESTION_CHARS]
    if not asked:
        return KnowledgeAnswer(ok=True, answer=NO_KNOWLEDGE)
    try:
        hits = index.search(asked, n=ASK_HITS)
    except Exception:  # noqa: BLE001 - a broken index is a failed answer, never a crash
        logger.warning("knowledge search failed", exc_info=True)
        return KnowledgeAnswer(ok=False, answer=FAILED, error_type="retrieval")
    hits = answering(asked, hits)
    if not hits:
        return KnowledgeAnswer(ok=True, answer=NO_KNOWLEDGE)
    hits = [masked_hit(h) for h in hits]  # what leaves the knowledge base is masked as the listing is
    masked = mask_pii(asked)
    system = load_prompt("knowledge_answer_system")
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": render("knowledge_answer", question=masked,
                                                   entries="\n\n".join(_entry_block(h) for h in hits))}]
    context = {"question": masked, "entries": [_context_entry(h) for h in hits]}

    def call(model: Any, stack: list[dict[str, Any]], step: str = "ask", keep_tail: int = 1) -> Any:
        return structured_call(model, stack, schema=load_schema(ASK_TASK), name=ASK_TASK, temperature=0.0,
                               context=context, log=log, retry=retry, keep_tail=keep_tail,
                               tags=CallTags(session_id=session_id, flow="knowledge", step=step, prompt="knowledge_answer"))

    result = call(client, messages)
    if result.ok:  # the question handed back, or a figure no cited entry states: once more, then the offline answer
        checked = guarded(result, lambda r: _non_answer(r.data or {}, masked, hits),
                          lambda finding: call(client, regeneration_messages(messages, result.raw, finding,
                                                                             "answer, sources"), "ask-guard",
                                                 REGENERATION_TAIL),
                          lambda: call(offline_client(), messages, "ask-offline"), log=log, task=ASK_TASK,
                          flow="knowledge")
        if checked.result is None:
            return KnowledgeAnswer(ok=False, answer=FAILED, error_type="not_answered")
        result = checked.result
    if not result.ok:
        return KnowledgeAnswer(ok=False, answer=FAILED, error_type=result.error_type)
    sources, quotes = _grounded(result.data or {}, hits)
    if not sources:
        return KnowledgeAnswer(ok=True, answer=NO_KNOWLEDGE)
    answer = checked_answer(str(result.data["answer"]).strip(), sources, hits, question=masked,
                            instructions=(system, load_prompt("knowledge_answer")))
    notes = [f"※ No.{h.entry_id} は{incomplete_label(h.entry).strip('（）')}のナレッジです。"
             for h in sources if incomplete_label(h.entry)]
    if notes:  # an incomplete entry is never a source without saying so
        answer += "\n\n" + "\n".join(notes)
    return KnowledgeAnswer(ok=True, answer=answer, sources=sources, quotes=quotes)


def answering(question: str, hits: list[KnowledgeHit]) -> list[KnowledgeHit]:
    """The hits that answer ``question``: the best one, and after it only entries about the contract
    type or clause topic the question names or the best entry is about (a second entry that merely
    scores close — another contract's payment clause under a question on confidentiality — is not a
    source)."""
    if len(hits) < 2:
        return hits
    top = hits[0]
    asked_type, asked_topic = contract_type_of(question), topic_of(question)
    top_type, top_topic = contract_type_of(top.contract_type), entry_topic(top.entry)
    return [top] + [h for h in hits[1:] if related(asked_type, asked_topic, h.entry) or related(top_type, top_topic, h.entry)
                     or h.score >= CLOSE_RATIO * top.score]


def _non_answer(data: dict[str, Any], question: str, hits: list[KnowledgeHit]) -> Any:
    """The echo and figure checks of ``core.answer_guard`` on an ask answer: the sources are the entries
    it cites (all retrieved ones when it cites none of them) and the question."""
    cited = {int(s.get("entry_id")) for s in data.get("sources") or [] if str(s.get("entry_id", "")).isdigit()}
    used = [h for h in hits if h.entry_id in cited] or hits
    texts = [question, *("\n".join(str(h.entry.get(f) or "") for f in ENTRY_FIELDS) for h in used)]
    return check_answer(str(data.get("answer") or ""), user_text=question, sources=texts)


def offline_answer(request: Any) -> dict[str, Any]:
    """Offline policy of ``knowledge_answer``: the best entry (and a close second) quoted word for word."""
    entries = sorted((request.context or {}).get("entries") or [], key=lambda e: -float(e.get("score") or 0))
    if not entries:
        return {"answer": NO_KNOWLEDGE, "sources": []}
    top = float(entries[0].get("score") or 0)
    used = [entries[0]] + [e for e in entries[1:2] if float(e.get("score") or 0) >= SECOND_ENTRY_RATIO * top]
    parts, sources = [], []
    for e in used:
        plan, points = quotable_lines(e["action_plan"]), quotable_lines(e["review_points"])
        where = "・".join(x for x in (e["contract_type"], e["target_clause"]) if x)
        block = [f"当社の確定済みナレッジ No.{e['entry_id']}「{e['knowledge_title']}」（{where}）では、次のように整理しています。"]
        if plan:
            block.append("対応方針:\n" + "\n".join(plan))
        if points:
            block.append("審査ポイント:\n" + "\n".join(points))
        parts.append("\n".join(block))
        sources.append({"entry_id": int(e["entry_id"]), "content": "\n".join(plan or points)})
    return {"answer": "\n\n".join(parts), "sources": sources}
