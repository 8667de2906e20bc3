"""DIAGNOSING (seed 000 §4): the interview loop.

A. rewind (``handle_rewind``, also reached from any step via ``process_step``);
B. ``resolved`` yes → DONE, no → solutions_tried++ (more than 3 → URGENCY_CHECK, else ask again),
   book → RESERVATION (typed text while these buttons are shown is judged against them);
C. empty input → ask for the symptom;
D. ``run_turn``: the main loop, steps 1–14 (snapshot, keyword urgency, RAG, summary every 3 turns,
   candidate trigger, prompt, model call, topic-relevance / waiting-message re-calls, duplicate
   question, manual_coverage raise, urgency_flag routing, then the action table).

Urgency: the keyword rules (critical → RESERVATION at once), then, after the manual search, the
rules fused with the semantic layer and the sections' markers (``core.diagnosis.urgency_semantic``):
that level is what the prompt and the offline policy see (``context["urgency"]``). Every route to a
"this is normal" answer passes ``normal_answer_blocked``: a model ``spec_answer`` it blocks becomes
the normal case's question (or a plain answer). The manual_coverage raise (D12) applies to every
action, questions included (seed 000 §4). A rule or exemplar that says "do not drive" (a flat tyre) keeps can_drive False.
A confirmed normal answer drops what the semantic layer added back to the rules' own level.

Snapshots: ``state_snapshots`` holds ``{turn: N, state}`` with the state *just before* the user's
N-th answer (what was on screen), so ``rewind_to_turn=N`` lets the user answer turn N again.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Sequence

from core.answer_guard import check_answer, guarded, note, offline_client
from core.diagnosis import llm_calls
from core.diagnosis.actions import (
    ANSWER,
    DONT_KNOW,
    DONT_KNOW_LABEL,
    FREE_INPUT,
    RESOLUTION_CHOICES,
    RESOLVED,
    RESTART,
    RESTART_CHOICES,
    SPEC_CHOICES,
    SPEC_FEEDBACK,
)
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.denials import asks_about_denied
from core.diagnosis.emergency import emergency_answer
from core.diagnosis.guards import (
    append_default_choices,
    attach_icons,
    is_duplicate_question,
    is_irrelevant_topic,
    is_waiting_message,
    raise_for_coverage,
)
from core.diagnosis.interview import NOT_RESOLVED_INPUT, SPEC_FEEDBACK_INPUTS, narrowed, still_vague, vague_kind
from core.diagnosis.models import (
    ChatRequest,
    ChatResponse,
    ChatStep,
    ChoiceJudgmentInfo,
    PromptInfo,
    RagSource,
    SessionState,
    urgency_rank,
)
from core.diagnosis.offline_policy import lamps_named
from core.diagnosis.prompt_builder import (
    FLAG_FORCE_ANSWER,
    FLAG_GUARD,
    FLAG_RESTRICT_TOPIC,
    build_additional_instructions,
    build_diagnostic_messages,
    build_summary_messages,
    denied_symptoms,
    policy_context,
)
from core.diagnosis.rag import RagHit, cited_first, merge_sources, rag_search_many, to_sources, with_named_case
from core.diagnosis.steps import reservation
from core.diagnosis.steps.common import (
    FAILURE_MESSAGE,
    FALLBACK_MESSAGE,
    action_of,
    add_user,
    apply_keyword_urgency,
    choice_from_text,
    raise_urgency,
    respond,
    save_snapshot,
)
from core.diagnosis.steps.urgency import handle_urgency_check
from core.diagnosis.urgency_cap import URGENT_MESSAGE, cap_model_urgency
from core.diagnosis.urgency_rules import KeywordUrgency
from core.diagnosis.urgency_semantic import (
    as_context,
    assess,
    confirm_by_conversation,
    normal_answer_blocked,
    normal_cases,
)
from core.vehicles import find_vehicle

logger = logging.getLogger(__name__)

ASK_SYMPTOM_MESSAGE = "症状について教えてください。"
FREE_INPUT_MESSAGE = "ご自身の言葉で、状況をできるだけ具体的に入力してください。"
NORMAL_STATEMENT = re.compile(r"故障ではありません|異常ではありません|正常な(現象|動作|作動|制御)です|心配ありません")
NOT_COVERED_NOTE = "⚠️ 取扱説明書に該当する記載が見つからないため、ディーラーでの点検を推奨します。"
PARTIAL_NOTE = "ℹ️ この回答は取扱説明書の記載に加えて、一般的な知識に基づく内容を含みます。"
NO_DRIVE_NOTE = "🚨 自走は控えてください。安全な場所に停車し、ロードサービスの手配をおすすめします。"
INSPECT_SOON_NOTE = "⚠️ 早急な点検をおすすめします。"
RESOLUTION_QUESTION = "この内容で解決しましたか？"
DENIED_TOPIC_LINE = ("直前の質問トピック「{topic}」は、お客様が「ない」と述べた症状（{denied}）についての質問です。"
                     "否定された症状については質問せず、お客様が述べた症状に関係する内容だけを質問してください。")
RESTRICT_TOPIC_LINE = ("直前の質問トピック「{topic}」はお客様の症状「{symptom}」と関係がありません。"
                       "症状に直接関係する内容だけを質問してください。")
FORCE_ANSWER_LINE = ("待ちメッセージ（「まとめます」「お待ちください」など）は禁止です。"
                     "今ある情報で provide_answer として原因の候補と対処を回答してください。")


# --- A. rewind -------------------------------------------------------------------------------------

def handle_rewind(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    """Restore the snapshot of ``request.rewind_to_turn`` (everything but the snapshots), drop that
    snapshot and every later one, and show again what was on screen then."""
    turn = request.rewind_to_turn
    snapshot = next((s for s in session.state_snapshots if s.get("turn") == turn), None)
    if snapshot is None:
        available = "、".join(str(s["turn"]) for s in session.state_snapshots) or "なし"
        prompt = session.last_prompt or PromptInfo(type="text", message=ASK_SYMPTOM_MESSAGE)
        return respond(session, prompt, pending_kind=session.pending_kind, record=False,
                       rag_sources=session.last_rag_sources,
                       notice=f"ターン {turn} には戻れません（戻れるターン: {available}）。")
    kept = [s for s in session.state_snapshots if s.get("turn", 0) < turn]
    restored = SessionState.model_validate(snapshot["state"])
    for name in SessionState.model_fields:
        if name != "state_snapshots":
            setattr(session, name, getattr(restored, name))
    session.state_snapshots = kept
    prompt = session.last_prompt or PromptInfo(type="text", message=ASK_SYMPTOM_MESSAGE)
    response = respond(session, prompt, pending_kind=session.pending_kind, record=False,
                       rag_sources=session.last_rag_sources, rewound_to_turn=turn)
    return response


# --- B. resolved -----------------------------------------------------------------------------------

def handle_resolved(session: SessionState, value: str, ctx: DiagnosisContext, *,
                    judgment: ChoiceJudgmentInfo | None = None) -> ChatResponse:
    if value == "yes":
        session.current_step = ChatStep.DONE
        prompt = PromptInfo(type="text", choices=list(RESTART_CHOICES), action=RESTART,
                            message="解決してよかったです。同じ症状が再発したり、別の症状が出たりした場合は、お気軽にご相談ください。")
        return respond(session, prompt, pending_kind="done", judgment=judgment)
    if value == "book":
        return reservation.enter(session, ctx, lead="点検のご予約を承ります。", judgment=judgment)
    session.solutions_tried += 1
    if session.solutions_tried > ctx.thresholds.max_solutions_tried:
        return handle_urgency_check(session, None, ctx,
                                    lead="いくつかの対処を試しても解決しないため、緊急度を評価して点検をご案内します。")
    return run_turn(session, NOT_RESOLVED_INPUT, ctx, judgment=judgment)


# --- entry -----------------------------------------------------------------------------------------

def handle_diagnosing(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    if request.rewind_to_turn is not None:
        return handle_rewind(session, request, ctx)
    action, value = action_of(request)
    if action == RESOLVED and value in ("yes", "no", "book"):
        return handle_resolved(session, str(value), ctx)
    judgment = None
    if request.message and session.pending_kind == "resolution":
        judgment = choice_from_text(ctx, session, request.message, RESOLUTION_CHOICES)
        if judgment and judgment.value:
            return handle_resolved(session, judgment.value, ctx, judgment=judgment)
        return _resolution_reply(session, request.message.strip(), ctx)
    user_input = request.message or ""
    if action == ANSWER:
        if value == FREE_INPUT:
            prompt = PromptInfo(type="text", message=FREE_INPUT_MESSAGE)
            return respond(session, prompt, record=False, rag_sources=session.last_rag_sources)
        user_input = DONT_KNOW_LABEL if value == DONT_KNOW else str(value or "")
    if action == SPEC_FEEDBACK:  # a spec-check button pressed after the step moved on
        user_input = SPEC_FEEDBACK_INPUTS.get(str(value), user_input)
    if not user_input.strip():
        return respond(session, PromptInfo(type="text", message=ASK_SYMPTOM_MESSAGE), record=False)
    return run_turn(session, user_input.strip(), ctx, judgment=judgment)


RESOLUTION_FOLLOW_UP = ("「{text}」とのこと、承知しました。先ほどご案内した{source}の内容で解決しない点や、新しく気づいたこと"
                        "（いつ・どこで・どんな様子か）があれば教えてください。")


def _resolution_reply(session: SessionState, text: str, ctx: DiagnosisContext) -> ChatResponse:
    """Free text typed in reply to 「この内容で解決しましたか？」 that is none of its buttons: read as what
    the customer says (a new detail, a doubt) by the interview, without the failed button judgment; when
    that would only show the same answer again, a short follow-up question is asked instead."""
    answers = [m["content"] for m in session.conversation_history
               if m.get("role") == "assistant" and m.get("content", "").endswith(RESOLUTION_QUESTION)]
    shown = {_answer_text(a) for a in answers[-2:]}  # the answer, or the answer before this follow-up
    response = run_turn(session, text, ctx)
    if _answer_text(response.prompt.message) not in shown:
        return response
    if session.conversation_history and session.conversation_history[-1].get("role") == "assistant":
        session.conversation_history.pop()  # the repeated answer is not said twice
    source = (f"取扱説明書「{session.last_rag_sources[0].section}」" if session.last_rag_sources else "取扱説明書")
    message = f"{RESOLUTION_FOLLOW_UP.format(text=text[:60], source=source)}\n\n{RESOLUTION_QUESTION}"
    prompt = PromptInfo(type="single_choice", message=message, choices=[c.model_copy() for c in RESOLUTION_CHOICES],
                        action=RESOLVED)
    return respond(session, prompt, pending_kind="resolution", rag_sources=session.last_rag_sources)


def _answer_text(message: str) -> str:
    """A message without its closing question, whitespace folded: what is compared for a repeat."""
    return "".join(message.replace(RESOLUTION_QUESTION, "").split())


# --- D. main loop ----------------------------------------------------------------------------------

def _query(session: SessionState, user_input: str) -> str:
    base = session.rewritten_query or session.symptom_text
    fixed = {DONT_KNOW_LABEL, NOT_RESOLVED_INPUT, *SPEC_FEEDBACK_INPUTS.values()}
    if user_input and user_input not in base and user_input not in fixed:
        return f"{base} {user_input}".strip()
    return base or user_input


def _maybe_summarize(session: SessionState, ctx: DiagnosisContext) -> None:
    """Every ``summary_every`` turns, refresh the conversation summary (kept on failure)."""
    if session.diagnostic_turn % ctx.thresholds.summary_every:
        return
    text = llm_calls.call_text(ctx, session, task=llm_calls.SUMMARY_TASK, messages=build_summary_messages(session),
                               step="diagnosing", prompt="diagnosis_summary",
                               context={"symptom": session.symptom_text, "vehicle": f"{session.make} {session.model}",
                                        "history": list(session.conversation_history),
                                        "collected": list(session.collected_symptoms)})
    if text and text.strip():
        session.conversation_summary = text.strip()[:600]


def _call(ctx: DiagnosisContext, session: SessionState, hits: Sequence[RagHit], keyword: KeywordUrgency,
          user_input: str, extra: Sequence[tuple[str, str]] = (), client: Any = None):
    instructions = build_additional_instructions(session, keyword, extra, ctx.thresholds)
    messages = build_diagnostic_messages(session, hits, keyword, instructions, user_input, ctx.thresholds)
    vehicle = find_vehicle(ctx.catalog, session.vehicle_id)
    context = policy_context(session, hits, keyword, instructions, user_input, vehicle.powertrain if vehicle else "")
    context["urgency"] = as_context(keyword)
    return llm_calls.call_structured(ctx, session, task=llm_calls.DIAGNOSTIC_TASK, messages=messages, context=context,
                                     step="diagnosing", prompt="diagnosis_diagnostic", temperature=0.3, client=client)


def _non_answer(data: dict[str, Any], session: SessionState, hits: Sequence[RagHit], user_input: str):
    """The answer guards on a diagnostic turn (``core.answer_guard``): the customer's words handed back as
    the message, or a figure neither the retrieved sections nor the conversation state."""
    said = [str(m.get("content") or "") for m in session.conversation_history if m.get("role") == "user"]
    vehicle = f"{session.make or ''} {session.model or ''} {session.year or ''}年式"
    return check_answer(data.get("message"), user_text=user_input,
                        sources=[*said, vehicle, *(f"{h.section}\n{h.text}" for h in hits)])


def _guarded_call(ctx: DiagnosisContext, session: SessionState, hits: Sequence[RagHit], keyword: KeywordUrgency,
                  user_input: str):
    """The diagnostic call through the answer guards: a non-answer is asked for once more (its reason as an
    instruction), then the offline policy's answer; None when nothing passes (the turn fails honestly)."""
    result = _call(ctx, session, hits, keyword, user_input)
    if not result.ok:
        return result
    checked = guarded(result, lambda r: _non_answer(r.data, session, hits, user_input),
                      lambda finding: _call(ctx, session, hits, keyword, user_input, [(FLAG_GUARD, finding.reason)]),
                      lambda: _call(ctx, session, hits, keyword, user_input, client=offline_client()), log=ctx.log,
                      task=llm_calls.DIAGNOSTIC_TASK, flow="diagnosis")
    return checked.result


def _fallback(session: SessionState, sources: list[RagSource], judgment: ChoiceJudgmentInfo | None,
              keyword: KeywordUrgency) -> ChatResponse:
    # The model's urgency_flag is missing, so the rule-based level (e.g. a lit warning light = high)
    # is kept on the session instead of being lost with the failed call.
    apply_keyword_urgency(session, keyword)
    return respond(session, PromptInfo(type="text", message=FAILURE_MESSAGE), rag_sources=sources,
                   judgment=judgment, fallback=True)


def _cited_first(sources: list[RagSource], message: str, hits: Sequence[RagHit] = ()) -> list[RagSource]:
    """The sources with the section the message quotes first (added from ``hits`` when the cut dropped it)."""
    if hits:
        return cited_first(sources, list(hits), message)
    return sorted(sources, key=lambda s: 0 if s.section and s.section in message else 1)


def run_turn(session: SessionState, user_input: str, ctx: DiagnosisContext, *,
             judgment: ChoiceJudgmentInfo | None = None) -> ChatResponse:
    """Steps D1–D14 for one user input."""
    th = ctx.thresholds
    session.current_step = ChatStep.DIAGNOSING
    # D2 (taken before D1, see module docstring) + D1
    save_snapshot(session, session.diagnostic_turn + 1)
    session.collected_symptoms.append(user_input)
    add_user(session, user_input)
    session.diagnostic_turn += 1

    # D3 keyword urgency over every input (after a vague first line, over what the answers narrowed it to)
    described = narrowed(session.collected_symptoms)
    symptom = described[0] if described != session.collected_symptoms else session.symptom_text
    vague = still_vague(session.collected_symptoms, ctx.rules.check(session.collected_symptoms[0]).rule_ids)
    keyword = ctx.rules.check_many(described)
    for reason in [] if vague else keyword.reasons:  # shown as "判断の理由" if the flow ends in a reservation
        if reason not in session.urgency_reasons:
            session.urgency_reasons.append(reason)
    if keyword.is_critical:
        apply_keyword_urgency(session, keyword)
        answer = emergency_answer(ctx, session.vehicle_id, " ".join(session.collected_symptoms[-2:]), keyword.reasons)
        return reservation.enter(session, ctx, judgment=judgment, lead=answer.message, rag_sources=answer.sources)
    if session.diagnostic_turn > session.max_diagnostic_turns:
        return handle_urgency_check(session, None, ctx, lead="問診の上限回数に達したため、緊急度を評価して点検をご案内します。")

    # D4 RAG, then the rules fused with the semantic layer and the sections' markers
    queries = [symptom, _query(session, user_input)] if symptom != session.symptom_text else [
        _query(session, user_input), session.symptom_text]
    hits = with_named_case(ctx, rag_search_many(ctx, queries, session.vehicle_id), symptom, session.vehicle_id)
    sources = to_sources(hits)
    keyword = confirm_by_conversation(assess(ctx.rules, described, symptom, hits), session.asked_topics, hits)
    for reason in [] if vague else keyword.reasons:
        if reason not in session.urgency_reasons:
            session.urgency_reasons.append(reason)
    if keyword.is_critical:
        apply_keyword_urgency(session, keyword)
        answer = emergency_answer(ctx, session.vehicle_id, " ".join(session.collected_symptoms[-2:]), keyword.reasons,
                                  hits)
        return reservation.enter(session, ctx, judgment=judgment, lead=answer.message, rag_sources=answer.sources)
    # D5 summary, D6 candidates trigger
    _maybe_summarize(session, ctx)
    if session.last_confidence >= th.candidates_confidence or session.diagnostic_turn >= th.candidates_turn:
        session.candidates_shown = True

    # D7-D9 prompt, call, parse (through the answer guards: an echo or an invented figure is no answer)
    result = _guarded_call(ctx, session, hits, keyword, user_input)
    if result is None or not result.ok:
        # seed 000 §12: logger.error (the error's type and the session, never the customer's text)
        logger.error("LLM diagnostic call failed: session=%s turn=%d error=%s provider_error=%s attempts=%d",
                     session.session_id, session.diagnostic_turn,
                     getattr(result, "error_type", "answer_guard"), getattr(result, "provider_error", None),
                     getattr(result, "attempts", 0))
        return _fallback(session, sources, judgment, keyword)
    data: dict[str, Any] = dict(result.data)
    if vague:
        data = _interview_question(data, vague_kind(session.collected_symptoms[0]) or "noise")

    # D10 topic relevance → one re-call with a topic restriction
    context_text = " ".join(h.section + " " + h.text for h in hits)
    # (and a question about a symptom the customer denied, the same way)
    denied = denied_symptoms(session)
    if data["action"] in ("ask_question", "clarify_term"):
        line = None
        if asks_about_denied(data.get("question_topic"), data.get("message"), denied):
            line = DENIED_TOPIC_LINE.format(topic=data.get("question_topic"), denied="、".join(denied))
        elif is_irrelevant_topic(data.get("question_topic"), session.symptom_text, session.conversation_history,
                                 context_text):
            line = RESTRICT_TOPIC_LINE.format(topic=data.get("question_topic"), symptom=session.symptom_text)
        if line is not None:
            retry = _call(ctx, session, hits, keyword, user_input, [(FLAG_RESTRICT_TOPIC, line)])
            if retry.ok:
                data = dict(retry.data)
            if asks_about_denied(data.get("question_topic"), data.get("message"), denied):
                data.update(message=FALLBACK_MESSAGE, choices=None, question_topic=None)  # still asking it
    # D11 waiting message → one re-call forcing an answer
    if is_waiting_message(data.get("message")):
        retry = _call(ctx, session, hits, keyword, user_input, [(FLAG_FORCE_ANSWER, FORCE_ANSWER_LINE)])
        if retry.ok and not is_waiting_message(retry.data.get("message")):
            data = dict(retry.data)
        else:
            return _fallback(session, sources, judgment, keyword)
    # Duplicate question → generic message
    if data["action"] in ("ask_question", "clarify_term") and is_duplicate_question(
            data.get("message"), session.conversation_history[:-1]):
        data.update(message=FALLBACK_MESSAGE, choices=None)

    # Safety gate on every route to "this is normal"
    if data["action"] == "spec_answer" and normal_answer_blocked(keyword, session.collected_symptoms):
        data = _normal_case_question(data, keyword)
    data = _no_contradiction(data, keyword, session.collected_symptoms)
    data = _checked_urgency(ctx, session, hits, keyword, user_input, data)
    if keyword.can_drive is False:
        data["can_drive"] = False

    # Save what the model decided
    session.last_confidence = float(data.get("confidence_to_answer") or 0.0)
    if data.get("rewritten_query"):
        session.rewritten_query = data["rewritten_query"].strip()
    session.manual_coverage = data.get("manual_coverage")
    # D12 manual_coverage raise, D13 urgency_flag
    flag = raise_for_coverage(data.get("urgency_flag") or "none", session.manual_coverage)  # every action
    if flag == "critical":
        raise_urgency(session, "critical", can_drive=data.get("can_drive") if data.get("can_drive") is not None else False,
                      visit_urgency="immediate")
        lead, cited = _with_emergency_steps(ctx, session, data["message"], hits, sources)
        return reservation.enter(session, ctx, lead=lead, rag_sources=cited, judgment=judgment)
    # a level raised by the coverage guard takes that level's default visit urgency
    visit = data.get("visit_urgency") if flag == data.get("urgency_flag") else None
    raise_urgency(session, flag, can_drive=data.get("can_drive"), visit_urgency=visit)

    # D14 action table
    action = data["action"]
    if action == "spec_answer" and session.spec_rejected:
        action = "provide_answer"  # the spec explanation already failed once
    if action == "escalate":
        raise_urgency(session, "high" if flag not in ("high", "critical") else flag, can_drive=data.get("can_drive"),
                      visit_urgency=data.get("visit_urgency"))
        return reservation.enter(session, ctx, lead=data["message"], rag_sources=_cited_first(sources, data["message"], hits),
                                 judgment=judgment)
    if action == "spec_answer":
        if keyword.normal_confirmed:  # the customer's answer confirmed the manual's normal case
            _back_to_rule_level(session, ctx)
        session.current_step = ChatStep.SPEC_CHECK
        session.spec_check_shown = True
        prompt = PromptInfo(type="single_choice", message=f"{data['message']}\n\n{RESOLUTION_QUESTION}",
                            choices=[c.model_copy() for c in SPEC_CHOICES], action=SPEC_FEEDBACK)
        return respond(session, prompt, pending_kind="spec", rag_sources=_cited_first(sources, data["message"], hits),
                       judgment=judgment)
    if action == "provide_answer":  # §10: the manual's answer and its sources are shown with it
        named = [h for h in hits if h.section and h.section in data["message"]]  # the section the answer cites
        rag = llm_calls.query(ctx, session, _query(session, user_input), hits=named + [h for h in hits if h not in named],
                              preferred=named[0] if named else None)
        response = _provide_answer(session, data, flag, merge_sources(rag.sources if rag.ok else None, sources), ctx,
                                   judgment)
        response.rag_answer = rag.answer if rag.ok else None
        return response
    # ask_question / clarify_term
    topic = (data.get("question_topic") or "").strip()
    if topic and topic not in session.asked_topics:
        session.asked_topics.append(topic)
    choices = attach_icons(append_default_choices(data.get("choices")), topic)
    prompt = PromptInfo(type="single_choice" if choices else "text", message=data["message"], choices=choices,
                        action=ANSWER if choices else None)
    cited = _cited_first(sources, data["message"], hits)
    if not any(f"「{c.section}」" in data["message"] for c in cited):  # no section quoted: the one named first
        cited = _named_first(cited, session.symptom_text)
    return respond(session, prompt, pending_kind="question", rag_sources=cited, judgment=judgment)


VAGUE_QUESTIONS = {
    "noise": ("異音が出るタイミング", "どんなときに、どのあたりから聞こえる音ですか？（例: ブレーキを踏んだとき・前のほうから）",
              ["ブレーキを踏んだとき", "走り出し・加速するとき", "ハンドルを切ったとき", "一定の速度で走っているとき"]),
    "vibration": ("振動が出る条件", "振動はどんなときに感じますか？",
                  ["特定の速度で走っているとき", "ブレーキを踏んだとき", "停車中（アイドリング中）", "段差を越えたとき"]),
    "lamp": ("点灯している警告灯の種類", "メーターに出ている警告灯（ランプ）は、何色で、どんな形のマークですか？",
             ["赤色のマーク", "黄色・オレンジ色のマーク", "緑色・青色の表示"]),
}


def _interview_question(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """While the first description is vague: a question about it, never an answer or a rating (a model's
    or the offline policy's answer becomes the kind's question; its question is kept, without urgency)."""
    data = dict(data, urgency_flag="none", visit_urgency=None, can_drive=None)
    if data["action"] in ("ask_question", "clarify_term"):
        return data
    topic, message, choices = VAGUE_QUESTIONS.get(kind, VAGUE_QUESTIONS["noise"])
    return dict(data, action="ask_question", message=message, choices=list(choices), question_topic=topic)


def _checked_urgency(ctx: DiagnosisContext, session: SessionState, hits: Sequence[RagHit], keyword: KeywordUrgency,
                     user_input: str, data: dict[str, Any]) -> dict[str, Any]:
    """The model's urgency checked against the manual (``core.diagnosis.urgency_cap``), the reason in the
    debug log. A capped answer whose message still sends the customer to road service is replaced by the
    offline policy's answer (capped the same way), so the words and the level agree."""
    capped, finding = cap_model_urgency(data, keyword, hits, session.collected_symptoms)
    if finding is None:
        return data
    action = "capped"
    if URGENT_MESSAGE.search(capped.get("message") or ""):
        offline = _call(ctx, session, hits, keyword, user_input, client=offline_client())
        if offline.ok:
            capped, _ = cap_model_urgency(dict(offline.data), keyword, hits, session.collected_symptoms)
            action = "capped_offline_message"
    note(ctx.log, finding, action, task=llm_calls.DIAGNOSTIC_TASK, flow="diagnosis")
    return capped


NOT_NORMAL_NOTE = ("※取扱説明書には正常な動作としての説明もありますが、お伺いした症状はその条件に当てはまらない"
                   "可能性があるため、点検をおすすめします。")


def _no_contradiction(data: dict[str, Any], keyword: KeywordUrgency, texts: Sequence[str]) -> dict[str, Any]:
    """An answer must not quote 「故障ではありません」 and carry an urgency at once (a hybrid restarting
    itself at a red light once got 緊急度 高 with that quote). When the manual's normal case is
    confirmed and nothing blocks a normal answer, the answer becomes the spec answer it is (no
    urgency); otherwise the answer says why the normal explanation does not settle it."""
    if data["action"] not in ("provide_answer", "escalate") or not NORMAL_STATEMENT.search(data.get("message") or ""):
        return data
    if urgency_rank(data.get("urgency_flag")) < urgency_rank("medium"):
        return data
    if keyword.normal_confirmed and not normal_answer_blocked(keyword, texts):
        return dict(data, action="spec_answer", urgency_flag="none", visit_urgency=None)
    if NOT_NORMAL_NOTE not in data["message"]:
        return dict(data, message=f"{data['message'].rstrip()}\n\n{NOT_NORMAL_NOTE}")
    return data


def _named_first(sources: list[RagSource], text: str) -> list[RagSource]:
    """Sources whose section the customer's words name (its title, or the lamp they named) first."""
    named = set(lamps_named(text or ""))

    def key(source: RagSource) -> int:
        title = source.section.split("（")[0]
        return 0 if (named & set(lamps_named(source.section)) or (len(title) >= 3 and title in (text or ""))) else 1

    return sorted(sources, key=key)


def _with_emergency_steps(ctx: DiagnosisContext, session: SessionState, message: str, hits: Sequence[RagHit],
                          sources: list[RagSource]) -> tuple[str, list[RagSource]]:
    """A critical answer (from the model or the offline policy) with the manual's emergency section and
    its steps added when the message does not already cite it; its sources with that section first."""
    answer = emergency_answer(ctx, session.vehicle_id, " ".join(session.collected_symptoms[-2:]),
                              session.urgency_reasons, list(hits))
    if answer.section and f"「{answer.section}」" in message:
        return message, _cited_first(sources, message, hits)
    lead = f"{message.strip()}\n\n{answer.steps}" if answer.steps else message
    if answer.section and answer.sources and not any(h.section == answer.section for h in hits):
        return lead, list(answer.sources)  # a section searched for the emergency (the road-service one): first
    return lead, _cited_first(sources, lead, hits)


def _normal_case_question(data: dict[str, Any], keyword: KeywordUrgency) -> dict[str, Any]:
    """A blocked ``spec_answer``: the confirmed normal case's question, or a plain answer."""
    case = normal_cases().get(keyword.normal_case or "") if keyword.normal_confirmed else None
    if case is not None and case.ask:
        return dict(data, action="ask_question", message=f"{data['message'].strip()}\n\n{case.question}",
                    choices=list(case.normal_choices) + list(case.abnormal_choices), question_topic=case.topic,
                    urgency_flag=keyword.level if keyword.level != "none" else data.get("urgency_flag", "none"))
    level = keyword.level if keyword.level not in ("none",) else "low"
    return dict(data, action="provide_answer", urgency_flag=level)


def _back_to_rule_level(session: SessionState, ctx: DiagnosisContext) -> None:
    """Forget what the semantic layer added: the rules' own level (never lowered) stays."""
    session.urgency_level = session.can_drive = session.visit_urgency = None
    rules = ctx.rules.check_many(session.collected_symptoms)
    session.urgency_reasons = list(rules.reasons)
    apply_keyword_urgency(session, rules)


def _provide_answer(session: SessionState, data: dict[str, Any], flag: str, sources: list[RagSource],
                    ctx: DiagnosisContext, judgment: ChoiceJudgmentInfo | None) -> ChatResponse:
    message = data["message"].strip()
    if session.manual_coverage == "not_covered":
        message += "\n\n" + NOT_COVERED_NOTE
    elif session.manual_coverage == "partially_covered":
        message += "\n\n" + PARTIAL_NOTE
    cited = _cited_first(sources, message)
    if flag in ("high", "critical"):
        can_drive = data.get("can_drive")
        if can_drive is None:
            can_drive = session.can_drive
        if can_drive is False:
            session.can_drive = False
            return reservation.enter(session, ctx, lead=message, note=NO_DRIVE_NOTE, rag_sources=cited, judgment=judgment)
        return reservation.enter(session, ctx, lead=message, note=INSPECT_SOON_NOTE, rag_sources=cited, judgment=judgment)
    prompt = PromptInfo(type="single_choice", message=f"{message}\n\n{RESOLUTION_QUESTION}",
                        choices=[c.model_copy() for c in RESOLUTION_CHOICES], action=RESOLVED)
    return respond(session, prompt, pending_kind="resolution", rag_sources=cited, judgment=judgment)
