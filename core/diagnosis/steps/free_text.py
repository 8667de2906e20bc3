"""FREE_TEXT (seed 000 §3): take the first symptom description and route it.

1. keep it as ``symptom_text``; 2. keyword urgency critical → RESERVATION; 3. manual search, then
the rules fused with the semantic layer and the sections' markers (critical → RESERVATION);
4. ``should_route_to_spec_check`` (3 safety gates, 3 path conditions) → SPEC_CHECK, unless
``normal_answer_blocked`` (a symptom no manual normal case confirms, or a case whose question must
be asked first); an information question (semantic intent ``info``, level none, no danger section
on top) → SPEC_CHECK as well; 5. ``should_hint_spec`` (soft threshold) sets ``spec_hint``;
6. → DIAGNOSING (first turn).
"""
from __future__ import annotations

from typing import Any

from core.diagnosis.context import DiagnosisContext
from core.diagnosis.emergency import emergency_answer
from core.diagnosis.guards import should_hint_spec, should_route_to_spec_check
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, PromptInfo, SessionState
from core.diagnosis.rag import rag_search, with_named_case
from core.diagnosis.steps import diagnosing, reservation, spec_check
from core.diagnosis.steps.common import add_user, apply_keyword_urgency, respond, save_snapshot
from core.diagnosis.urgency_semantic import assess, normal_answer_blocked, prefetch_vote

SYMPTOM_QUESTION = ("どのような症状がありますか？いつ・どんなときに起きるかも含めて、できるだけ具体的に教えてください。"
                    "（例: 「エンジン警告灯がついた」「ブレーキを踏むとキーキー鳴る」）")


def handle_free_text(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    text = (request.message or "").strip()
    if not text and isinstance(request.action_value, str) and request.action_value.strip():
        text = request.action_value.strip()
    if not text:
        return respond(session, PromptInfo(type="text", message=SYMPTOM_QUESTION), record=False)
    save_snapshot(session, 1)  # rewinding to turn 1 comes back here
    return route_symptom(session, text, ctx)


def route_symptom(session: SessionState, text: str, ctx: DiagnosisContext) -> ChatResponse:
    """Steps 2–6 for a symptom ``text``: also the route of a new symptom or topic raised later
    (:mod:`core.diagnosis.steps.topic_shift`)."""
    session.symptom_text = text
    keyword = ctx.rules.check(text)
    if keyword.is_critical:
        return _critical(session, ctx, text, keyword)
    prefetch_vote(text)  # the vote's vector is embedded beside the search's
    hits = with_named_case(ctx, rag_search(ctx, text, session.vehicle_id), text, session.vehicle_id)
    keyword = assess(ctx.rules, [text], text, hits)
    if keyword.is_critical and not spec_check.is_lamp_query(ctx, text):  # (a lamp question: its entry, warnings and all)
        return _critical(session, ctx, text, keyword, hits)
    info = spec_check.is_information(ctx, text, keyword, hits)
    if info or (should_route_to_spec_check(hits, keyword.level, ctx.thresholds) and not normal_answer_blocked(keyword, [text])):
        session.current_step = ChatStep.SPEC_CHECK
        return spec_check.handle_spec_check(session, ChatRequest(session_id=session.session_id), ctx)
    session.spec_hint = should_hint_spec(hits, keyword.level, ctx.thresholds) and not normal_answer_blocked(keyword, [text])
    session.current_step = ChatStep.DIAGNOSING
    return diagnosing.run_turn(session, text, ctx)


def _critical(session: SessionState, ctx: DiagnosisContext, text: str, keyword: Any,
              hits: list | None = None) -> ChatResponse:
    """A critical symptom goes straight to the booking path with the reasons, the manual's emergency
    section and its steps (:func:`core.diagnosis.emergency.emergency_answer`)."""
    session.collected_symptoms.append(text)
    add_user(session, text)
    apply_keyword_urgency(session, keyword)
    answer = emergency_answer(ctx, session.vehicle_id, text, keyword.reasons, hits)
    return reservation.enter(session, ctx, lead=answer.message, rag_sources=answer.sources)
