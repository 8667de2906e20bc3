"""Confirmed knowledge entries as a regression set for the knowledge flow (seed 003 §7.2: evaluation).

For every confirmed entry whose source conversation is in the store, :func:`regression_scenarios` makes
one ``core.eval`` scenario: the user's messages as stored (PII-masked, up to the moment the entry was
confirmed), then ``{action: confirm}``, expecting what the reviewers confirmed —

* ``knowledge_contains``: the same contract type, and the clause's article number (「第8条」) or, without
  one, its heading;
* ``knowledge_fields``: every field the confirmed entry has filled is filled again;
* ``confirmed: true`` and a draft phase.

Wording is not compared (a model, or a later prompt, may phrase the review points differently); what the
entry is about is. Left out, and counted: entries without a stored conversation, and conversations with
attachments (their text is never stored, so the conversation cannot be replayed as it was).

``python -m core.eval --from-library [--db URL] [--write FILE] [--provider offline|openai]`` runs the set
(or writes it as a scenario file).
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from core.store.store import Store
from core.text.pii import mask_pii
from core.validation import ENTRY_FIELDS

MESSAGE_CHARS = 4000
_ARTICLE = re.compile(r"第\s{0,2}[0-9一二三四五六七八九十百]{1,4}\s{0,2}条")
_HEADING = re.compile(r"[（(]([^）)]{1,20})[）)]")


def _clause_expectation(target_clause: str) -> str:
    article = _ARTICLE.search(target_clause or "")
    if article:
        return re.sub(r"\s", "", article.group(0))
    heading = _HEADING.search(target_clause or "")
    return heading.group(1) if heading else (target_clause or "").strip()[:20]


def scenario_for(store: Store, entry: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """``(scenario, "")`` for a confirmed entry, or ``(None, why it is left out)``."""
    conversation_id = entry.get("conversation_id")
    if not conversation_id or store.get_conversation(conversation_id) is None:
        return None, "no_conversation"
    confirmed_at = str(entry.get("confirmed_at") or "")
    turns: list[dict[str, Any]] = []
    for row in store.list_turns(conversation_id):
        if row["role"] != "user" or not row.get("ok", True):
            continue
        if confirmed_at and str(row.get("created_at") or "") > confirmed_at:
            break
        if row.get("attachments"):
            return None, "attachments"
        text = (row.get("user_input") or "").strip()
        if text:
            turns.append({"message": mask_pii(text[:MESSAGE_CHARS])})
    if not turns:
        return None, "no_messages"
    filled = [f for f in ENTRY_FIELDS if str(entry.get(f) or "").strip()]
    contains = {"contract_type": str(entry.get("contract_type") or "")}
    clause = _clause_expectation(str(entry.get("target_clause") or ""))
    if clause:
        contains["target_clause"] = clause
    expect: dict[str, Any] = {"phase": ["draft_knowledge", "review_knowledge"], "confirmed": True,
                              "knowledge_contains": {k: v for k, v in contains.items() if v}}
    if filled:
        expect["knowledge_fields"] = filled
    title = str(entry.get("knowledge_title") or "")[:40]
    return {"name": f"ナレッジ No.{entry['id']} の再現: {title}", "flow": "knowledge",
            "turns": [*turns, {"action": "confirm"}], "expect": expect}, ""


def regression_scenarios(store: Store, *, contract_type: str | None = None,
                         limit: int = 500) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The regression set of ``store``'s confirmed entries, and how many were left out and why."""
    scenarios: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    for entry in store.list_entries(status="confirmed", contract_type=contract_type, limit=limit):
        scenario, why = scenario_for(store, entry)
        if scenario is None:
            skipped[why] = skipped.get(why, 0) + 1
        else:
            scenarios.append(scenario)
    return scenarios, skipped
