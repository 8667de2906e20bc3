"""Similar confirmed knowledge for a conversation in progress: what the case is, and the entries like it.

As soon as the contract type and the clause (or its topic) are known, :func:`case_key` turns the
conversation into a search query: from the draft when there is one, else from what the user wrote
(read by the same rules the offline interviewer uses; a real model's turns are not needed for it).
:func:`similar_entries` searches the confirmed entries (:mod:`core.knowledge.retrieval`), never the
conversation's own. The page shows them beside the chat (staff extend an entry instead of writing a
duplicate) and the interviewer's request carries the best one or two as house style.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from core.knowledge.case_facts import contract_type_of, facts_from_texts, topic_of
from core.knowledge.retrieval import MIN_SCORE, KnowledgeHit, KnowledgeIndex

CASE_TEXT_CHARS = 300  # how much of the user's own account joins the query
SIMILAR_SHOWN = 3
EXAMPLES_SENT = 2
# Similar entries and house style: an entry is proposed only when it is about the same contract type or
# the same clause topic (:func:`related`) and scores at least this. Measured with
# ``python -m bench.knowledge_recall`` (48 questions, top 3): without the filter, 0.3 shows 72 % related
# entries and 0.6 is needed for 92 %, losing the right entry for 40 % of the questions; with the filter
# every shown entry is related at 0.3 and the right entry is kept as often as without it (0.833). So the
# filter, not a higher score, does the work; the threshold stays the search's own.
SIMILAR_MIN_SCORE = MIN_SCORE
SEARCHED = 10  # candidates read before the relatedness filter


@dataclass(frozen=True)
class CaseKey:
    contract_type: str
    clause: str
    query: str
    topic: str = ""


def entry_topic(entry: Mapping[str, Any]) -> str:
    """The clause topic of a stored entry (its clause heading first, then its title)."""
    return topic_of(str(entry.get("target_clause") or "")) or topic_of(str(entry.get("knowledge_title") or ""))


def related(contract_type: str, topic: str, entry: Mapping[str, Any]) -> bool:
    """The entry is about the same contract type or the same clause topic (both unknown: not related)."""
    same_type = bool(contract_type) and contract_type_of(str(entry.get("contract_type") or "")) == contract_type
    same_topic = bool(topic) and entry_topic(entry) == topic
    return same_type or same_topic


def _user_texts(chat: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(e.get("user_text") or e.get("content") or "") for e in chat
            if e.get("role") == "user" and not e.get("gated") and not e.get("failed")]


def case_key(chat: Sequence[Mapping[str, Any]], outputs: Sequence[Mapping[str, Any]] = (),
             pending_text: str = "") -> CaseKey | None:
    """The case's contract type, clause and search query, or None while either is unknown."""
    draft = next((e for e in outputs if e.get("contract_type") and (e.get("target_clause") or e.get("knowledge_title"))),
                 None)
    if draft is not None:
        parts = [draft.get("contract_type"), draft.get("target_clause"), draft.get("knowledge_title"),
                 str(draft.get("review_points") or "")[:CASE_TEXT_CHARS]]
        topic = entry_topic(draft) or topic_of(str(draft.get("review_points") or ""))
        return CaseKey(contract_type_of(str(draft["contract_type"])) or str(draft["contract_type"]),
                       str(draft.get("target_clause") or ""), "\n".join(str(p) for p in parts if p), topic)
    texts = [t for t in [*_user_texts(chat), pending_text] if t and t.strip()]
    if not texts:
        return None
    facts = facts_from_texts(texts)
    clause = facts.topic or facts.target_clause
    if not facts.contract_type or not clause:
        return None
    account = " ".join(texts)[:CASE_TEXT_CHARS]
    return CaseKey(facts.contract_type, facts.target_clause or facts.topic,
                   "\n".join(p for p in (facts.contract_type, facts.topic, facts.target_clause, account) if p),
                   facts.topic)


def similar_entries(index: KnowledgeIndex | None, key: CaseKey | None, *, conversation_id: str | None = None,
                    n: int = SIMILAR_SHOWN) -> list[KnowledgeHit]:
    """The confirmed entries most like the case (best first), not this conversation's own, and only
    those about the same contract type or clause topic (:func:`related`)."""
    if index is None or key is None:
        return []
    hits = index.search(key.query, n=max(n, SEARCHED), min_score=SIMILAR_MIN_SCORE,
                        exclude_conversation=conversation_id)
    return [h for h in hits if related(key.contract_type, key.topic, h.entry)][:n]
