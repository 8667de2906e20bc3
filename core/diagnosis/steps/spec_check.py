"""SPEC_CHECK (seed 000 §5): is the symptom normal behaviour described in the manual?

Phase 1 (``spec_check_shown`` False): the safety gate first (``normal_answer_blocked``: a symptom no
manual normal case confirms, or a case whose question must be asked first → DIAGNOSING without a
call); then a model call with SPEC_CLASSIFICATION_SCHEMA; ``is_spec`` with ``confidence`` high →
show the explanation and ask whether it solved the problem; anything else (or a failed call) falls
through to DIAGNOSING. An information question (semantic intent ``info``) is answered here too.
An information question — a how-to or value question with no symptom (semantic intent ``info``, no
danger section on top), or a question about what a lamp means (「エンジン警告灯って何？」) — is answered
by the §10 ``query`` service from the section about its subject (a lamp question from that lamp's
entry in the lamp table), with no urgency; nothing is said when no section speaks of the subject (「4WD」
asked of a two-wheel-drive car's manual). Every answer quoting a section that carries a ⚠ warning or
caution carries it too, cited (``with_warnings``: seed 000 §3's safety gate on information answers).
Phase 2 (``spec_check_shown`` True, also reached from a DIAGNOSING ``spec_answer``): ``resolved``
→ DONE; ``not_resolved`` / ``already_tried`` → DIAGNOSING (spec answers are then off).
"""
from __future__ import annotations

import re

from core.diagnosis import llm_calls
from core.diagnosis.actions import RESTART, RESTART_CHOICES, SPEC_CHOICES, SPEC_FEEDBACK
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, PromptInfo, SessionState
from core.diagnosis.offline_policy import lamps_named
from core.diagnosis.rag import (
    RagHit,
    citation,
    cited_first,
    merge_sources,
    rag_context,
    rag_search,
    shares_subject,
    to_sources,
    with_named_case,
    with_warnings,
)
from core.diagnosis.steps import diagnosing
from core.diagnosis.steps.common import add_user, chosen_value, respond
from core.diagnosis.urgency_rules import KeywordUrgency, is_lamp_question
from core.diagnosis.urgency_semantic import as_context, assess, normal_answer_blocked
from core.prompts import load_prompt, render
from core.text.pii import mask_pii

RESOLVED_MESSAGE = "解決してよかったです。ほかにも気になる点があれば、新しい問診でお気軽にご相談ください。"


def is_lamp_query(ctx: DiagnosisContext, text: str) -> bool:
    """A question about what a lamp means, with no lamp (nor anything else) the rules read as a symptom."""
    return is_lamp_question(text) and ctx.rules.check(text).level == "none"


def is_information(ctx: DiagnosisContext, text: str, keyword: KeywordUrgency, hits: list[RagHit]) -> bool:
    """An information question (see the module docstring), not a symptom."""
    if is_lamp_query(ctx, text):
        return True
    # a warning section on top is answered with its warning carried; a danger section is the symptom's
    return keyword.intent == "info" and keyword.level == "none" and bool(hits) and hits[0].content_type != "danger"


LAMP_TITLE = re.compile(r"警告灯|表示灯|ランプ|インジケーター")


def _lamp_section(hits: list[RagHit], text: str) -> RagHit | None:
    named = set(lamps_named(text))
    return next((h for h in hits if named & set(lamps_named(h.section))), None) if named else None


def _is_lamp_entry(hit: RagHit) -> bool:
    return bool(LAMP_TITLE.search(hit.section))


def _information_answer(session: SessionState, ctx: DiagnosisContext, hits: list[RagHit]) -> ChatResponse:
    text = session.symptom_text
    # a lamp's entry answers a question about a lamp (「4WD」 alone names the 4WD lamp, and the 4WD mode too)
    lamp = _lamp_section(hits, text) if LAMP_TITLE.search(text) or is_lamp_question(text) else None
    relevant = [h for h in hits if h is lamp or shares_subject(h, text)]
    if lamp is None and is_lamp_question(text):  # 「赤いビックリマークは何？」: the lamp table's entries found
        lamp = next((h for h in hits if _is_lamp_entry(h)), None)
        relevant = [h for h in hits if _is_lamp_entry(h)]
    if lamp is not None:
        relevant = [lamp] + [h for h in relevant if h is not lamp]
    elif not LAMP_TITLE.search(text):  # a question naming no lamp is not answered from a lamp's entry
        relevant = [h for h in relevant if not _is_lamp_entry(h)] + [h for h in relevant if _is_lamp_entry(h)]
    preferred = lamp or (relevant[0] if relevant else None)
    answer = llm_calls.query(ctx, session, text, hits=relevant, step="spec_check", preferred=preferred)
    if not answer.ok:
        session.current_step = ChatStep.DIAGNOSING
        return diagnosing.run_turn(session, text, ctx)
    quoted = next((h for s in answer.sources or [] for h in relevant if h.section_id == s.section_id), None)
    message = with_warnings(answer.answer, quoted)
    sources = merge_sources(answer.sources, to_sources(relevant))
    session.spec_check_shown = True
    session.collected_symptoms.append(text)
    add_user(session, text)
    prompt = PromptInfo(type="single_choice", message=f"{message}\n\n{diagnosing.RESOLUTION_QUESTION}",
                        choices=[c.model_copy() for c in SPEC_CHOICES], action=SPEC_FEEDBACK)
    return respond(session, prompt, pending_kind="spec", rag_sources=sources)


def _phase1(session: SessionState, ctx: DiagnosisContext) -> ChatResponse:
    hits = with_named_case(ctx, rag_search(ctx, session.symptom_text, session.vehicle_id), session.symptom_text,
                           session.vehicle_id)
    keyword = assess(ctx.rules, [session.symptom_text], session.symptom_text, hits)
    if is_information(ctx, session.symptom_text, keyword, hits):
        return _information_answer(session, ctx, hits)
    if keyword.intent != "info" and normal_answer_blocked(keyword, [session.symptom_text]):
        session.current_step = ChatStep.DIAGNOSING
        return diagnosing.run_turn(session, session.symptom_text, ctx)
    vehicle = f"{session.make or ''} {session.model or ''}（{session.year or '-'}年式）"
    messages = [{"role": "system", "content": load_prompt("diagnosis_system")},
                {"role": "user", "content": render("spec_classification", vehicle=vehicle,
                                                   symptom=mask_pii(session.symptom_text), rag_context=rag_context(hits))}]
    result = llm_calls.call_structured(
        ctx, session, task=llm_calls.SPEC_TASK, messages=messages, step="spec_check", prompt="spec_classification",
        context={"symptom": mask_pii(session.symptom_text), "hits": [h.as_dict() for h in hits],
                 "keyword": {"level": keyword.level, "reasons": keyword.reasons}, "urgency": as_context(keyword)},
        temperature=0.0)
    data = result.data if result.ok else None
    if not data or not data["is_spec"] or data["confidence"] != "high":
        session.current_step = ChatStep.DIAGNOSING
        return diagnosing.run_turn(session, session.symptom_text, ctx)
    explanation = data["explanation"].strip()
    if data.get("matched_section") and data["matched_section"] not in explanation:
        explanation += citation(data["matched_section"], data.get("page"))
    matched = data.get("matched_section_id")
    quoted = [h for h in hits if h.section_id == matched or h.section == data.get("matched_section")]
    explanation = with_warnings(explanation, quoted[0] if quoted else None)
    sources = cited_first(to_sources(hits), hits, "".join(f"「{h.section}」" for h in quoted[:1]))
    session.spec_check_shown = True
    session.collected_symptoms.append(session.symptom_text)
    add_user(session, session.symptom_text)
    prompt = PromptInfo(type="single_choice", message=f"{explanation}\n\n{diagnosing.RESOLUTION_QUESTION}",
                        choices=[c.model_copy() for c in SPEC_CHOICES], action=SPEC_FEEDBACK)
    return respond(session, prompt, pending_kind="spec", rag_sources=sources)


def handle_spec_check(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    session.current_step = ChatStep.SPEC_CHECK
    if not session.spec_check_shown:
        return _phase1(session, ctx)
    value, judgment = chosen_value(ctx, session, request, SPEC_FEEDBACK, SPEC_CHOICES)
    if value == "resolved":
        session.current_step = ChatStep.DONE
        return respond(session, PromptInfo(type="text", message=RESOLVED_MESSAGE, choices=list(RESTART_CHOICES),
                                           action=RESTART), pending_kind="done", judgment=judgment)
    if value in ("not_resolved", "already_tried") or (request.message or "").strip():
        session.spec_rejected = True
        user_input = diagnosing.SPEC_FEEDBACK_INPUTS.get(str(value)) or (request.message or "").strip()
        return diagnosing.run_turn(session, user_input, ctx, judgment=judgment)
    prompt = session.last_prompt or PromptInfo(type="single_choice", message=diagnosing.RESOLUTION_QUESTION,
                                               choices=[c.model_copy() for c in SPEC_CHOICES], action=SPEC_FEEDBACK)
    return respond(session, prompt, pending_kind="spec", record=False, rag_sources=session.last_rag_sources)
