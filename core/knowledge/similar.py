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

from core.knowledge.case_facts import facts_from_texts
from core.knowledge.retrieval import KnowledgeHit, KnowledgeIndex

CASE_TEXT_CHARS = 300  # how much of the user's own account joins the query
SIMILAR_SHOWN = 3
EXAMPLES_SENT = 2


@dataclass(frozen=True)
class CaseKey:
    contract_type: str
    clause: str
    query: str


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
        return CaseKey(str(draft["contract_type"]), str(draft.get("target_clause") or ""),
                       "\n".join(str(p) for p in parts if p))
    texts = [t for t in [*_user_texts(chat), pending_text] if t and t.strip()]
    if not texts:
        return None
    facts = facts_from_texts(texts)
    clause = facts.topic or facts.target_clause
    if not facts.contract_type or not clause:
        return None
    account = " ".join(texts)[:CASE_TEXT_CHARS]
    return CaseKey(facts.contract_type, facts.target_clause or facts.topic,
                   "\n".join(p for p in (facts.contract_type, facts.topic, facts.target_clause, account) if p))


def similar_entries(index: KnowledgeIndex | None, key: CaseKey | None, *, conversation_id: str | None = None,
                    n: int = SIMILAR_SHOWN) -> list[KnowledgeHit]:
    """The confirmed entries most like the case (best first), not this conversation's own."""
    if index is None or key is None:
        return []
    return index.search(key.query, n=n, exclude_conversation=conversation_id)
