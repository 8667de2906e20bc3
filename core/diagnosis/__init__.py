"""Vehicle diagnosis chat (問診, seed 000): a state machine from vehicle selection to booking.

Quick start::

    from core.diagnosis import ChatService, ChatRequest
    service = ChatService(client)                      # client: OfflineClient / OpenAI-compatible / ScriptedClient
    r = service.start()                                # VEHICLE_ID: r.prompt.choices = catalog vehicles
    r = service.process(ChatRequest(session_id=r.session_id, action="select_vehicle", action_value=r.prompt.choices[0].value))
    r = service.process(ChatRequest(session_id=r.session_id, action="confirm_photo", action_value="yes"))
    r = service.process(ChatRequest(session_id=r.session_id, message="エンジン警告灯がついた"))
    # r.current_step, r.prompt (type/message/choices/action/image/booking_*), r.urgency, r.rag_sources ...
    r = service.process(ChatRequest(session_id=r.session_id, rewind_to_turn=1))   # answer turn 1 again

Options: ``ChatService(client, store=..., retriever=..., log=debug_list, thresholds=Thresholds(...),
retry=RetryPolicy(...))``; ``process(request, client=..., log=...)`` swaps the client / debug list;
``get_session(id)`` returns the ``SessionState`` (``conversation_history``, ``booking_data`` …) and
``rewind_points(id)`` the turns a rewind can go back to. Picture and icon paths
(``prompt.image``, ``Choice.icon``) are relative to the repository root (``core.paths.ROOT``).
A failed model call never raises: ``response.fallback`` is True and the message says the answer could not
be produced and that the customer's message is kept (``steps.common.FAILURE_MESSAGE``, issue #26).
Each button of a prompt sends ``ChatRequest(action=prompt.action, action_value=choice.value)``;
typed text at a step with buttons is matched to a button (``response.judgment``: method
exact / structured_output / tag_fallback / ai_judge / failed). Action names and values:
:mod:`core.diagnosis.actions`. The booking form sends ``action="submit_booking"`` with
``action_value={"name":…, "phone":…, "address"|"preferred_datetime":…}``.

Modules: ``models`` (pydantic models of §8), ``service`` (ChatService), ``session_store`` (TTL store
protocol + in-memory store), ``state_machine`` (STEP_HANDLERS, process_step), ``steps/*`` (one
handler per step), ``guards`` (§11), ``urgency_rules`` / ``urgency_assessor`` (§6), ``rag`` (§10),
``choice_judgment`` (seed 004), ``prompt_builder``, ``llm_calls``, ``offline_policy`` /
``offline_choice`` (the offline provider's policies, registered below), ``scenario`` (runner adapter).
"""
from core.llm.offline import register_policy

for _task, _target in {
    "diagnostic_response": "core.diagnosis.offline_policy:diagnose",
    "urgency_assessment": "core.diagnosis.offline_policy:assess_urgency",
    "spec_classification": "core.diagnosis.offline_policy:classify_spec",
    "diagnosis_summary": "core.diagnosis.offline_policy:summarize",
    "choice_judgment": "core.diagnosis.offline_choice:judge_structured",
    "choice_tag": "core.diagnosis.offline_choice:judge_tag",
    "choice_evaluation": "core.diagnosis.offline_choice:evaluate",
}.items():
    register_policy(_task, _target)

from core.diagnosis import actions  # noqa: E402
from core.diagnosis.context import DiagnosisContext, Thresholds  # noqa: E402
from core.diagnosis.models import (BookingField, ChatRequest, ChatResponse, ChatStep, Choice,  # noqa: E402
                                   ChoiceJudgmentInfo, PromptInfo, RagSource, SessionState, UrgencyInfo)
from core.diagnosis.service import ChatService  # noqa: E402
from core.diagnosis.session_store import InMemorySessionStore, SessionStore  # noqa: E402
from core.diagnosis.state_machine import STEP_HANDLERS, process_step  # noqa: E402

__all__ = [
    "actions", "BookingField", "ChatRequest", "ChatResponse", "ChatService", "ChatStep", "Choice", "ChoiceJudgmentInfo",
    "DiagnosisContext", "InMemorySessionStore", "PromptInfo", "RagSource", "STEP_HANDLERS", "SessionState",
    "SessionStore", "Thresholds", "UrgencyInfo", "process_step",
]
