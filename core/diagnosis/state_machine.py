"""The state machine (seed 000 §1–2): ``ChatStep`` → handler, and ``process_step`` to dispatch.

Before dispatching: ``restart`` resets the session to VEHICLE_ID (the service moves it to a new id), and a request with
``rewind_to_turn`` is handled by the DIAGNOSING rewind from whatever step the session is in
(e.g. back from RESERVATION to an earlier answer), typed text that reads as an emergency is
handled as one at any step (:mod:`core.diagnosis.steps.emergency`), and a new symptom or topic typed
where an answer was expected is re-routed as a new thread (:mod:`core.diagnosis.steps.topic_shift`).
"""
from __future__ import annotations

from typing import Callable

from core.diagnosis.actions import RESTART
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, SessionState
from core.diagnosis.steps import emergency, topic_shift
from core.diagnosis.steps.diagnosing import handle_diagnosing, handle_rewind
from core.diagnosis.steps.done import handle_done, restart
from core.diagnosis.steps.free_text import handle_free_text
from core.diagnosis.steps.photo_confirm import handle_photo_confirm
from core.diagnosis.steps.reservation import handle_booking_confirm, handle_booking_info, handle_reservation
from core.diagnosis.steps.spec_check import handle_spec_check
from core.diagnosis.steps.urgency import handle_urgency_check
from core.diagnosis.steps.vehicle_id import handle_vehicle_id

Handler = Callable[[SessionState, ChatRequest, DiagnosisContext], ChatResponse]

STEP_HANDLERS: dict[ChatStep, Handler] = {
    ChatStep.VEHICLE_ID: handle_vehicle_id,
    ChatStep.PHOTO_CONFIRM: handle_photo_confirm,
    ChatStep.FREE_TEXT: handle_free_text,
    ChatStep.SPEC_CHECK: handle_spec_check,
    ChatStep.DIAGNOSING: handle_diagnosing,
    ChatStep.URGENCY_CHECK: handle_urgency_check,
    ChatStep.RESERVATION: handle_reservation,
    ChatStep.BOOKING_INFO: handle_booking_info,
    ChatStep.BOOKING_CONFIRM: handle_booking_confirm,
    ChatStep.DONE: handle_done,
}


def process_step(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    if request.action == RESTART:
        return restart(session, ctx)
    if request.rewind_to_turn is not None:
        return handle_rewind(session, request, ctx)
    urgent = emergency.intercept(session, request, ctx)
    if urgent is not None:
        return urgent
    shifted = topic_shift.intercept(session, request, ctx)
    if shifted is not None:
        return shifted
    return STEP_HANDLERS[session.current_step](session, request, ctx)
