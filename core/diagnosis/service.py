"""``ChatService`` (seed 000 §1): get or create the session → ``process_step`` → store it.

Typed text first passes ``core.text.input_gate`` (too long anywhere, no Japanese in the symptom):
a stopped input gets the prompt on screen again with the reason as ``notice``, and nothing else runs.
A handler that raises (a bug, not a model failure: those are handled in the steps) leaves the
stored session unchanged and returns the last prompt with the safe fallback message. A restart (the
button or typed at DONE) is a new session with a new id; the old one is left exactly as it was.

One service may be shared by threads (the HTTP API): each request runs on its own copy of the
context (``DiagnosisContext.for_request``), so one session's client, debug log and RAG cache are
never another's.
"""
from __future__ import annotations

import logging
from typing import Any, MutableSequence

from core.diagnosis.context import UNSET, DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, PromptInfo, SessionState
from core.diagnosis.session_store import InMemorySessionStore, SessionStore
from core.diagnosis.state_machine import process_step
from core.diagnosis.steps.common import NOT_TAKEN_MESSAGE, urgency_info
from core.diagnosis.steps.vehicle_id import vehicle_prompt
from core.engine import client_deadline, turn_deadline
from core.llm.offline import OfflineClient
from core.text.input_gate import NOT_JAPANESE, NOT_JAPANESE_SYMPTOM
from core.text.input_gate import check as check_input

logger = logging.getLogger(__name__)

EXPIRED_NOTICE = "前回の問診は有効期限が切れたため、最初からやり直します。"
UNKNOWN_NOTICE = "指定された問診（session_id）は見つかりません。新しい問診を始めます。"


def _gate(session: SessionState, request: ChatRequest) -> ChatResponse | None:
    """``core.text.input_gate`` on typed text: too long at any step; no Japanese in a symptom (FREE_TEXT).
    The prompt on screen stays (its buttons too) and the reason is the response's notice."""
    if request.message is None:
        return None
    symptom = session.current_step == ChatStep.FREE_TEXT
    gate = check_input(request.message, japanese=symptom,
                       not_japanese_message=NOT_JAPANESE_SYMPTOM if symptom else NOT_JAPANESE)
    if gate is None:
        return None
    prompt = session.last_prompt or PromptInfo()
    return ChatResponse(session_id=session.session_id, current_step=session.current_step.value, prompt=prompt,
                        urgency=urgency_info(session), rag_sources=session.last_rag_sources,
                        manual_coverage=session.manual_coverage, diagnostic_turn=session.diagnostic_turn,
                        notice=gate.message)


class ChatService:
    """Entry point of the diagnosis chat. ``client`` is any chat client (OfflineClient, OpenAI-compatible,
    ScriptedClient); ``retriever`` anything with the ``core.rag`` ``search`` signature (default: the
    process-wide manual retriever, built on first need); ``log`` the debug-record list (or None)."""

    def __init__(self, client: Any = None, *, store: SessionStore | None = None, retriever: Any = UNSET,
                 log: MutableSequence[dict[str, Any]] | None = None, context: DiagnosisContext | None = None,
                 **context_options: Any):
        if context is None:
            if client is None:
                client = OfflineClient()
            context = DiagnosisContext(client=client, retriever=retriever, log=log, **context_options)
        self.ctx = context
        self.store: SessionStore = store if store is not None else InMemorySessionStore()

    def start(self, **overrides: Any) -> ChatResponse:
        """A new session showing the vehicle choices."""
        return self.process(ChatRequest(), **overrides)

    def get_session(self, session_id: str | None) -> SessionState | None:
        return self.store.get(session_id)

    def rewind_points(self, session_id: str | None) -> list[int]:
        """The turns ``rewind_to_turn`` can go back to (oldest first)."""
        session = self.store.get(session_id)
        return [int(s["turn"]) for s in session.state_snapshots] if session else []

    def process(self, request: ChatRequest, *, client: Any = None, log: Any = UNSET) -> ChatResponse:
        """Handle one request. ``client`` / ``log`` replace the context's for this call only (the
        page passes the active client and ``debug_sink()`` each time); safe to call from threads."""
        ctx = self.ctx.for_request(client=client, log=log)
        session = self.store.get(request.session_id)
        if session is None:
            session = self.store.create()
            notice = None
            if request.session_id:
                expired = getattr(self.store, "expired", None)
                notice = EXPIRED_NOTICE if expired is not None and expired(request.session_id) else UNKNOWN_NOTICE
            response = vehicle_prompt(session, ctx, notice=notice)
            self.store.update(session)
            if request.session_id or not (request.message or request.action):
                return response
        gated = _gate(session, request)
        if gated is not None:  # no model call, no retrieval; the session is unchanged
            return gated
        backup = session.model_copy(deep=True)
        before = {s.get("turn") for s in session.state_snapshots}
        try:
            with turn_deadline(client_deadline(ctx.client)):  # the turn's model calls share one deadline
                response = process_step(session, request, ctx)
            created = [s.get("turn") for s in session.state_snapshots if s.get("turn") not in before]
            if created and response.rewound_to_turn is None:
                response = response.model_copy(update={"snapshot_turn": int(created[-1])})
        except Exception:  # noqa: BLE001 - keep the stored session consistent
            logger.exception("diagnosis step %s failed", session.current_step.value)
            session = backup
            prompt = (session.last_prompt or PromptInfo()).model_copy(update={"message": NOT_TAKEN_MESSAGE})
            response = ChatResponse(session_id=session.session_id, current_step=session.current_step.value,
                                    prompt=prompt, urgency=urgency_info(session), rag_sources=session.last_rag_sources,
                                    manual_coverage=session.manual_coverage, diagnostic_turn=session.diagnostic_turn,
                                    fallback=True)
        if session._restarted:
            return self._as_new_session(session, response)
        self.store.update(session)
        return response

    def _as_new_session(self, session: SessionState, response: ChatResponse) -> ChatResponse:
        """The fresh state of a restart under a new session id; the finished session is not written."""
        fresh = self.store.create()
        moved = session.model_copy(update={"session_id": fresh.session_id, "created_at": fresh.created_at})
        self.store.update(moved)
        return response.model_copy(update={"session_id": fresh.session_id})
