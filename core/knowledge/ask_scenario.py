"""Scenario-runner adapter for ナレッジに質問 (``core.eval`` contract, flow ``ask``).

``run_scenario(scenario, client, log, store=None)`` asks each ``{message: "..."}`` of ``turns`` against the
**current library** — the confirmed entries of ``store`` (the runner passes the store it read the case from;
without one, the default store ``KAIWA_DB_URL``) — on the same path the page and ``POST /api/knowledge/ask``
use: :func:`core.knowledge.ask.ask` over :func:`core.knowledge.retrieval.knowledge_index`. Questions are
independent (ナレッジに質問 keeps no conversation), so the last one is the answer under test.

Returns the final observable state of the last answer: ``message`` (the answer), ``citations`` (the cited
entries as ``No.<id>``, most relevant first), ``citation_titles`` (their titles, same order), ``outcome``
(``answered`` — it cites entries; ``not_found`` — 「該当するナレッジはありません。」; ``fallback`` — the model
call failed), and ``trace`` (one ``{node: "ask", outcome, citations}`` per question).
"""
from __future__ import annotations

from typing import Any

from core.knowledge.ask import KnowledgeAnswer, ask
from core.knowledge.retrieval import knowledge_index
from core.store.db import default_url
from core.store.store import Store


def outcome_of(answer: KnowledgeAnswer) -> str:
    """answered / not_found / fallback, as a review item of ナレッジに質問 names them."""
    if not answer.ok:
        return "fallback"
    return "answered" if answer.sources else "not_found"


def citation_id(entry_id: Any) -> str:
    """How a cited entry is named in a scenario (``No.12``): the ``No.`` keeps 12 from matching 112."""
    return f"No.{entry_id}"


def _play(scenario: dict[str, Any], client: Any, log: list, store: Store) -> dict[str, Any]:
    index = knowledge_index(store)
    trace: list[dict[str, Any]] = []
    last: KnowledgeAnswer | None = None
    for turn in scenario.get("turns") or []:
        if not isinstance(turn, dict) or "message" not in turn:
            raise ValueError(f"unknown ask turn {turn!r} (expected {{message: ...}})")
        last = ask(str(turn["message"]), index, client, log=log, session_id="scenario-ask")
        trace.append({"node": "ask", "outcome": outcome_of(last),
                      "citations": [citation_id(h.entry_id) for h in last.sources]})
    sources = last.sources if last else []
    return {"step": None, "urgency": None, "can_drive": None, "message": last.answer if last else "",
            "citations": [citation_id(h.entry_id) for h in sources], "citation_titles": [h.title for h in sources],
            "outcome": outcome_of(last) if last else None, "trace": trace}


def run_scenario(scenario: dict[str, Any], client: Any, log: list, store: Store | None = None) -> dict[str, Any]:
    if store is not None:
        return _play(scenario, client, log, store)
    own = Store(default_url())
    try:
        return _play(scenario, client, log, own)
    finally:
        own.engine.dispose()
