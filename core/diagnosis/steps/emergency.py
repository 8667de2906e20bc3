"""An emergency typed at any step (seed 000 §6 applied everywhere): handled as an emergency.

The state machine calls :func:`intercept` before dispatching typed text. At the vehicle choice, the
photo confirmation, the spec check, the resolution buttons, the reservation choices, the booking form
and its confirmation, and after DONE, text the rules (or the rules with the learned layer) read as
critical never goes to the choice judgment (which could only say 「入力をどの選択肢とも判断できません
でした」 or, worse, map it to a button): it is recorded as a symptom, the urgency becomes critical
(can_drive False) and the critical answer with the manual's emergency steps is shown
(:func:`core.diagnosis.emergency.emergency_answer`). A dispatch booking already under way keeps its
form (and what was typed in it) with the emergency steps above it; anything else goes to the booking
choices (dispatch only). FREE_TEXT and a DIAGNOSING question handle critical text themselves.
"""
from __future__ import annotations

from core.diagnosis.context import DiagnosisContext
from core.diagnosis.emergency import emergency_answer, is_emergency
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, SessionState
from core.diagnosis.steps import reservation
from core.diagnosis.steps.common import add_user, apply_keyword_urgency, raise_urgency

NO_VEHICLE_NOTE = "お車を選んでいただくと、その車の取扱説明書の該当箇所をご案内できます。"
CONTINUE_DISPATCH = "ロードサービス・出張点検の手配をこのまま続けます。"


def _applies(session: SessionState) -> bool:
    if session.current_step == ChatStep.FREE_TEXT:
        return False  # the symptom step checks critical text itself
    if session.current_step == ChatStep.DIAGNOSING:
        return session.pending_kind == "resolution"  # a question's answer goes through run_turn's checks
    return True


def intercept(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse | None:
    """The emergency response for typed critical text at a step that would not read it as a symptom, else None."""
    text = (request.message or "").strip()
    if not text or request.rewind_to_turn is not None or not _applies(session):
        return None
    keyword = is_emergency(ctx, text, session.symptom_text)
    if keyword is None:
        return None
    if not session.symptom_text:
        session.symptom_text = text
    session.collected_symptoms.append(text)
    add_user(session, text)
    apply_keyword_urgency(session, keyword)
    raise_urgency(session, "critical", can_drive=False, visit_urgency="immediate")
    answer = emergency_answer(ctx, session.vehicle_id, text, keyword.reasons)
    lead = answer.message if session.vehicle_id else f"{answer.message}\n\n{NO_VEHICLE_NOTE}"
    if session.current_step in (ChatStep.BOOKING_INFO, ChatStep.BOOKING_CONFIRM) and session.booking_type == "dispatch":
        session.last_rag_sources = list(answer.sources)
        if session.current_step == ChatStep.BOOKING_INFO:
            return reservation.booking_form(session, message=f"{lead}\n\n{CONTINUE_DISPATCH}")
        return reservation.booking_confirm_prompt(session, note=f"{lead}\n\n{CONTINUE_DISPATCH}")
    session.booking_type = None
    return reservation.enter(session, ctx, lead=lead, rag_sources=answer.sources)
