"""The model calls of the diagnosis flow, all through ``core.engine.structured_call`` (or, for the
plain-text tasks, ``core.engine.text_call``), tagged for the debug log.

Every function returns a result object and never raises: a failed call is ``ok=False`` / ``None``
and the caller shows a safe fallback message.

:func:`query` is seed 000 §10's ``RAGService.query(symptom, vehicle_id, make, model, year)``: the one
service behind every answer that quotes the manual as its answer (the diagnostic ``provide_answer``,
information and lamp questions): the manual search (score > 0.3, the session's vehicle), then
:func:`rag_answer`. :func:`rag_answer` is its answer call: after retrieval, RAG_ANSWER_PROMPT
(``prompts/rag_answer.md``) over the cited sections, or NO_RAG_ANSWER_PROMPT
(``prompts/no_rag_answer.md``) when none is left, schema-checked (``schemas/rag_answer.schema.json``)
and repaired like every other call; its sources are checked against what was retrieved.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from core.answer_guard import REGENERATION_TAIL, check_answer, guarded, offline_client, regeneration_messages
from core.debuglog import CallTags
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import SessionState
from core.diagnosis.rag import (
    MAX_QUERY_CHARS,
    RagAnswer,
    RagHit,
    grounded_sources,
    rag_context,
    rag_search,
    relative_cut,
)
from core.engine import structured_call, text_call
from core.prompts import load_prompt, render
from core.results import StructuredResult
from core.schemas import load_schema, to_strict_schema
from core.text.pii import mask_pii

FLOW = "diagnosis"
# Offline-policy task names (also the schema names of the structured tasks).
DIAGNOSTIC_TASK = "diagnostic_response"
URGENCY_TASK = "urgency_assessment"
SPEC_TASK = "spec_classification"
CHOICE_JUDGMENT_TASK = "choice_judgment"
CHOICE_TAG_TASK = "choice_tag"
CHOICE_EVALUATION_TASK = "choice_evaluation"
SUMMARY_TASK = "diagnosis_summary"
RAG_ANSWER_TASK = "rag_answer"
# The text the customer reads, streamed to the page while the model writes it (core.llm.stream).
STREAM_FIELDS = {DIAGNOSTIC_TASK: "message", RAG_ANSWER_TASK: "answer"}


def tags(session: SessionState, step: str, prompt: str) -> CallTags:
    return CallTags(session_id=session.session_id, flow=FLOW, step=step, prompt=prompt)


def call_structured(ctx: DiagnosisContext, session: SessionState, *, task: str, messages: list[dict[str, str]],
                    context: dict[str, Any], step: str, prompt: str, temperature: float = 0.3,
                    max_repairs: int = 2, client: Any = None, keep_tail: int = 1) -> StructuredResult:
    """One schema-checked call of ``task`` (= the schema name in ``schemas/``); the customer-facing text of
    the diagnostic and RAG answers streams to the page's sink, when it set one. ``client``: another client
    than the session's (the built-in provider, for the answer guards' offline fallback). ``keep_tail``:
    trailing messages fitting never drops (``REGENERATION_TAIL`` for an answer guard's second request)."""
    return structured_call(client or ctx.client, messages, schema=load_schema(task), name=task, context=context,
                           log=ctx.log, tags=tags(session, step, prompt), max_repairs=max_repairs, temperature=temperature,
                           retry=ctx.retry, stream_field=STREAM_FIELDS.get(task), wire_schema=wire_schema(task),
                           keep_tail=keep_tail)


@lru_cache(maxsize=32)  # the diagnosis tasks' schemas (a handful); schema files are read once per process anyway
def _wire_text(task: str) -> str:
    return json.dumps(to_strict_schema(load_schema(task)), ensure_ascii=False)


def wire_schema(task: str) -> dict[str, Any]:
    """The strict-mode wire copy of ``task``'s schema (a fresh copy), built once per task rather than on
    every call (``to_strict_schema`` walked the whole schema each time)."""
    return json.loads(_wire_text(task))


def call_text(ctx: DiagnosisContext, session: SessionState, *, task: str, messages: list[dict[str, str]],
              context: dict[str, Any], step: str, prompt: str, temperature: float = 0.0) -> str | None:
    """One plain-text call (no schema): the reply text, or None when the provider failed."""
    return text_call(ctx.client, messages, task=task, context=context, temperature=temperature, log=ctx.log,
                     tags=tags(session, step, prompt), retry=ctx.retry)


def rag_answer(ctx: DiagnosisContext, session: SessionState, question: str, hits: list[RagHit], *,
               step: str = "diagnosing", preferred: RagHit | None = None) -> RagAnswer:
    """The §10 answer for ``question`` from ``hits`` (after the citation cut); never raises. ``preferred``
    is the section the diagnostic answer already cites: it is kept and answered from first, so the
    manual's answer and the diagnosis never point at different pages."""
    cited = relative_cut(list(hits))
    if preferred is not None and preferred not in cited:
        cited = [preferred] + cited
    masked = mask_pii((question or "").strip()[:MAX_QUERY_CHARS])
    vehicle = f"{session.make or ''} {session.model or ''}（{session.year or '-'}年式）".strip()
    prompt = "rag_answer" if cited else "no_rag_answer"
    values = {"vehicle": vehicle, "question": masked}
    if cited:
        values["rag_context"] = rag_context(cited)
        values["preferred"] = (f"直前の回答で案内した節: 「{preferred.section}」（まずこの節から答えてください）"
                               if preferred is not None else "")
    messages = [{"role": "system", "content": load_prompt("diagnosis_system")},
                {"role": "user", "content": render(prompt, **values)}]
    context = {"question": masked, "hits": [h.as_dict() for h in cited],
               "preferred_section_id": preferred.section_id if preferred else None,
               "vehicle": {"vehicle_id": session.vehicle_id, "make": session.make, "model": session.model,
                           "year": session.year}}

    def call(stack: list[dict[str, str]], client: Any = None, keep_tail: int = 1) -> StructuredResult:
        return call_structured(ctx, session, task=RAG_ANSWER_TASK, messages=stack, step=step, prompt=prompt,
                               context=context, temperature=0.0, client=client, keep_tail=keep_tail)

    result = call(messages)
    if result.ok:  # the question handed back, a figure no cited section states: once more, then the offline answer
        sources_text = [masked, vehicle, *(f"{h.section}\n{h.text}" for h in cited)]
        checked = guarded(result, lambda r: check_answer(r.data.get("answer"), user_text=masked, sources=sources_text),
                          lambda finding: call(regeneration_messages(messages, result.raw, finding, "answer, sources"),
                                               keep_tail=REGENERATION_TAIL),
                          lambda: call(messages, offline_client()), log=ctx.log, task=RAG_ANSWER_TASK, flow=FLOW)
        if checked.result is None:
            return RagAnswer(ok=False, error_type="not_answered")
        result = checked.result
    if not result.ok:
        return RagAnswer(ok=False, error_type=result.error_type)
    sources = grounded_sources(result.data, cited) if cited else []
    return RagAnswer(ok=True, answer=result.data["answer"].strip(), sources=sources, grounded=bool(sources))


def query(ctx: DiagnosisContext, session: SessionState, symptom: str, *, hits: list[RagHit] | None = None,
          step: str = "diagnosing", preferred: RagHit | None = None) -> RagAnswer:
    """Seed 000 §10 ``query(symptom, vehicle_id, make, model, year)`` → ``{answer, sources}``: the
    session vehicle's manual searched for ``symptom`` (or the ``hits`` the step already has for it),
    then the answer call over them. Never raises (``ok`` False when the call failed)."""
    if hits is None:
        hits = rag_search(ctx, symptom, session.vehicle_id, make=None if session.vehicle_id else session.make,
                          model=None if session.vehicle_id else session.model,
                          year=None if session.vehicle_id else session.year)
    answer = rag_answer(ctx, session, symptom, list(hits), step=step, preferred=preferred)
    answer.hits = list(hits)
    return answer
