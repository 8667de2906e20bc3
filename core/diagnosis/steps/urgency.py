"""URGENCY_CHECK (seed 000 §6): run the two-stage ``UrgencyAssessor``; high/critical → RESERVATION,
low/medium → advice and DONE."""
from __future__ import annotations

from core.diagnosis.actions import RESTART, RESTART_CHOICES
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, PromptInfo, SessionState
from core.diagnosis.rag import rag_search, to_sources
from core.diagnosis.steps import reservation
from core.diagnosis.steps.common import raise_urgency, respond
from core.diagnosis.urgency_assessor import LEVEL_LABELS, UrgencyAssessor


def handle_urgency_check(session: SessionState, request: ChatRequest | None, ctx: DiagnosisContext, *,
                         lead: str = "") -> ChatResponse:
    session.current_step = ChatStep.URGENCY_CHECK
    query = session.rewritten_query or session.symptom_text
    hits = rag_search(ctx, query, session.vehicle_id)
    result = UrgencyAssessor(ctx).assess(session, hits)
    # The assessment is the final word: it replaces the running level, keeping the reasons.
    session.urgency_level = None
    raise_urgency(session, result.level, can_drive=result.can_drive, visit_urgency=result.visit_urgency,
                  reasons=result.reasons)
    sources = to_sources(hits)
    intro = f"緊急度の評価: {LEVEL_LABELS.get(result.level, result.level)}"
    if result.level in ("high", "critical"):
        return reservation.enter(session, ctx, lead="\n\n".join(p for p in (lead, intro, result.recommendation) if p),
                                 rag_sources=sources)
    session.current_step = ChatStep.DONE
    lines = [p for p in (lead, intro, result.recommendation) if p]
    if result.reasons:
        lines.append("判断の理由: " + "／".join(result.reasons[:4]))
    lines.append("症状が悪化した場合や新しい症状が出た場合は、無理に運転せず販売店へご相談ください。")
    prompt = PromptInfo(type="text", message="\n\n".join(lines), choices=list(RESTART_CHOICES), action=RESTART)
    return respond(session, prompt, pending_kind="done", rag_sources=sources)
