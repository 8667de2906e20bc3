"""Helpers shared by the step handlers: building responses, reading button actions, turning typed
text into a choice, urgency bookkeeping and rewind snapshots."""
from __future__ import annotations

from typing import Sequence

from core.diagnosis.actions import ACTION_ALIASES
from core.diagnosis.choice_judgment import judge_choice
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import (ChatRequest, ChatResponse, Choice, ChoiceJudgmentInfo, PromptInfo, RagSource,
                                   SessionState, UrgencyInfo, urgency_rank)
from core.diagnosis.urgency_rules import KeywordUrgency

FALLBACK_MESSAGE = "他に気になる症状や状況があれば教えてください。"  # a question replaced (duplicate, denied topic)
# A failed diagnosis turn (issue #26): it says the answer could not be produced and that the message is kept
# (it is in the conversation already: the next turn reads it), never reads as if the message was understood.
FAILURE_MESSAGE = ("申し訳ありません。回答を作成できませんでした。お送りいただいた内容は会話に残っています。"
                   "もう一度送信するか、続けて状況を入力してください。")
# A turn that failed before anything was stored (the session went back to what it was): the message is not taken.
NOT_TAKEN_MESSAGE = "申し訳ありません。回答を作成できませんでした。この入力はまだ受け付けていませんので、もう一度送信してください。"
LEVEL_DEFAULT_VISIT = {"critical": "immediate", "high": "today", "medium": "this_week", "low": "when_convenient"}


def action_of(request: ChatRequest) -> tuple[str | None, object]:
    """``(action, value)`` with the accepted aliases resolved (``action="confirm"`` → ``booking/confirm``)."""
    action = (request.action or "").strip() or None
    if action in ACTION_ALIASES and request.action_value in (None, ""):
        return ACTION_ALIASES[action]
    value = request.action_value.strip() if isinstance(request.action_value, str) else request.action_value
    return action, value


def urgency_info(session: SessionState) -> UrgencyInfo | None:
    if not session.urgency_level or session.urgency_level == "none":
        return None
    return UrgencyInfo(level=session.urgency_level, can_drive=session.can_drive,
                       visit_urgency=session.visit_urgency, reasons=list(session.urgency_reasons))


def respond(session: SessionState, prompt: PromptInfo, *, pending_kind: str | None = None,
            rag_sources: Sequence[RagSource] | None = None, judgment: ChoiceJudgmentInfo | None = None,
            fallback: bool = False, record: bool = True, rewound_to_turn: int | None = None,
            notice: str | None = None) -> ChatResponse:
    """The response for ``prompt``; it becomes the session's on-screen prompt (``last_prompt``) and,
    with ``record``, an assistant entry of the conversation history."""
    session.last_prompt = prompt
    session.pending_kind = pending_kind if prompt.choices else None
    if rag_sources is not None:
        session.last_rag_sources = list(rag_sources)
    if record and prompt.message:
        session.conversation_history.append({"role": "assistant", "content": prompt.message})
    return ChatResponse(session_id=session.session_id, current_step=session.current_step.value, prompt=prompt,
                        urgency=urgency_info(session), rag_sources=list(rag_sources or []),
                        manual_coverage=session.manual_coverage, diagnostic_turn=session.diagnostic_turn,
                        rewound_to_turn=rewound_to_turn, judgment=judgment, fallback=fallback, notice=notice)


def choice_from_text(ctx: DiagnosisContext, session: SessionState, text: str | None,
                     choices: Sequence[Choice]) -> ChoiceJudgmentInfo | None:
    """Judge typed ``text`` against ``choices`` (None when there is no text or no choice)."""
    if not (text or "").strip() or not choices:
        return None
    question = session.last_prompt.message if session.last_prompt else ""
    return judge_choice(ctx, session, text.strip(), choices, question=question[-400:], step=session.current_step.value)


def chosen_value(ctx: DiagnosisContext, session: SessionState, request: ChatRequest, button_action: str,
                 choices: Sequence[Choice]) -> tuple[object, ChoiceJudgmentInfo | None]:
    """The value of the pressed ``button_action`` button, or of the choice the typed text meant
    (with the judgment that decided it); ``(None, None)`` when neither says anything."""
    action, value = action_of(request)
    if action == button_action:
        return value, None
    judgment = choice_from_text(ctx, session, request.message, choices)
    return (judgment.value if judgment else None), judgment


def raise_urgency(session: SessionState, level: str, *, can_drive: bool | None = None,
                  visit_urgency: str | None = None, reasons: Sequence[str] = ()) -> None:
    """Keep the highest urgency seen; a level at least as high brings its can_drive/visit_urgency."""
    if level in (None, "", "none"):
        return
    for reason in reasons:
        if reason and reason not in session.urgency_reasons:
            session.urgency_reasons.append(reason)
    if urgency_rank(level) < urgency_rank(session.urgency_level):
        return
    same = urgency_rank(level) == urgency_rank(session.urgency_level)
    session.urgency_level = level
    if can_drive is not None:
        session.can_drive = (session.can_drive and can_drive) if (same and session.can_drive is not None) else can_drive
    elif level == "critical":
        session.can_drive = False
    session.visit_urgency = visit_urgency or LEVEL_DEFAULT_VISIT.get(level, session.visit_urgency)


def apply_keyword_urgency(session: SessionState, keyword: KeywordUrgency) -> None:
    raise_urgency(session, keyword.level, can_drive=keyword.can_drive, visit_urgency=keyword.visit_urgency,
                  reasons=keyword.reasons)


def save_snapshot(session: SessionState, turn: int) -> None:
    """Snapshot the state just before the user's ``turn``-th answer (kept once per turn, capped at
    ``max_diagnostic_turns`` entries, oldest dropped)."""
    if any(s.get("turn") == turn for s in session.state_snapshots):
        return
    session.state_snapshots.append({"turn": turn, "state": session.snapshot_state()})
    limit = max(1, session.max_diagnostic_turns)
    if len(session.state_snapshots) > limit:
        session.state_snapshots = session.state_snapshots[-limit:]


def add_user(session: SessionState, text: str) -> None:
    session.conversation_history.append({"role": "user", "content": text})
