"""DONE: the session is finished; ``restart`` (button or typed text) begins a new diagnosis. The handler
resets the session object and marks it restarted; ``ChatService`` then stores that fresh state under a
new session id, so the finished conversation (its turns, its booking) stays as it was."""
from __future__ import annotations

from core.diagnosis.actions import RESTART, RESTART_CHOICES
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse, PromptInfo, SessionState
from core.diagnosis.steps.common import choice_from_text, respond
from core.diagnosis.steps.vehicle_id import vehicle_prompt


def reset_session(session: SessionState) -> None:
    """Back to a fresh VEHICLE_ID state, keeping the id, the turn limit and the creation time."""
    fresh = SessionState(session_id=session.session_id, max_diagnostic_turns=session.max_diagnostic_turns,
                         created_at=session.created_at, updated_at=session.updated_at)
    for name in SessionState.model_fields:
        setattr(session, name, getattr(fresh, name))


def restart(session: SessionState, ctx: DiagnosisContext, **kwargs) -> ChatResponse:
    reset_session(session)
    session._restarted = True
    return vehicle_prompt(session, ctx, **kwargs)


def handle_done(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    judgment = choice_from_text(ctx, session, request.message, RESTART_CHOICES)
    if judgment and judgment.value == RESTART:
        return restart(session, ctx, judgment=judgment)
    prompt = PromptInfo(type="text", message="この問診は完了しています。新しい問診を始めるには「新しい問診を始める」を押してください。",
                        choices=list(RESTART_CHOICES), action=RESTART)
    return respond(session, prompt, pending_kind="done", record=False, judgment=judgment)
