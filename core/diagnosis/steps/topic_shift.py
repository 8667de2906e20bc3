"""A new symptom or topic raised mid-conversation is recognised and re-routed, never swallowed.

While a question, the resolution buttons, the spec-check buttons or the reservation choices are on
screen, typed text is normally an answer to them. :func:`is_new_topic` says when it is not: it
matches none of the choices on screen, and it either announces another matter (「それとは別に」「話は
変わるけど」「あと」「ついでに」「もう一つ」 …, or 「エアコンも効かない」: a part *also* failing) and
reports a symptom or asks a question, or it reports a symptom of another kind than the one being
interviewed (a noise while a warning lamp is discussed). :func:`intercept` then starts a new thread
for it — the symptom, its question plan and the spec-check state begin again, the urgency reached so
far is kept (it only rises) — and routes it like a first description (FREE_TEXT), with a line saying
so and naming the earlier matter. A booking form or its confirmation is never interrupted this way.
"""
from __future__ import annotations

import re
import unicodedata

from core.diagnosis.context import DiagnosisContext
from core.diagnosis.denials import strip_denials
from core.diagnosis.guards import normalise
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, PromptInfo, SessionState
from core.diagnosis.offline_policy import _category
from core.diagnosis.steps.free_text import route_symptom
from core.diagnosis.urgency_rules import SYMPTOM_WORD, is_how_to, variants

LEAD = "新しいご相談として確認します（先のご相談「{previous}」の判断はそのまま残ります）。"
# 「それとは別に」「話は変わるけど」「あと、」「ついでに」「もう一つ」「ほかにも」 at the start of a clause
_MARKER = re.compile(
    r"(^|[。、！!？?\s])(それとは別に|それとは べつに|別件|べっけん|話は変わ|はなしはかわ|話変わ|ところで|ついでに|"
    r"もう一つ|もうひとつ|ほかにも|他にも|それ以外にも|それから|それと|あと(、|,|\s|は|もう|ひとつ|一つ)|あと(?=[ァ-ヶー一-龥]))")
# 「エアコンも効かない」「ライトもつかない」: another part also failing
_ALSO = re.compile(r"[ァ-ヶー一-龥]{2,}も.{0,6}(効か|きか|利か|つい|点い|付い|鳴|出て|でて|漏|もれ|かから|おかし|変|へん|動か|冷え|ひえ)")
_STEPS = {ChatStep.DIAGNOSING: ("question", "resolution"), ChatStep.SPEC_CHECK: ("spec",),
          ChatStep.RESERVATION: ("reservation",), ChatStep.URGENCY_CHECK: ()}


def _is_choice(session: SessionState, text: str) -> bool:
    key = normalise(text)
    for choice in (session.last_prompt.choices if session.last_prompt else []):
        label = normalise(choice.label)
        if key and (key == label or (len(key) >= 4 and (key in label or label in key))):
            return True
    return False


def _reports_something(text: str) -> bool:
    """A symptom word, or a question (how-to)."""
    kept = strip_denials(text).kept
    return bool(kept) and (is_how_to(kept) or any(SYMPTOM_WORD.search(f) for f in variants(kept)))


def is_new_topic(session: SessionState, text: str) -> bool:
    """Typed ``text`` raises another matter than the one on screen (see module docstring)."""
    text = unicodedata.normalize("NFKC", text or "").strip()
    if len(text) < 4 or not session.symptom_text or _is_choice(session, text):
        return False
    if (_MARKER.search(text) or _ALSO.search(text)) and _reports_something(text):
        return True
    current, new = _category(session.symptom_text), _category(text)
    return (session.pending_kind == "question" and new not in ("general", "howto") and current not in ("general", new)
            and _reports_something(text) and len(text) >= 8)


def intercept(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse | None:
    """The re-routed response for a new matter typed where an answer was expected, else None."""
    text = (request.message or "").strip()
    if not text or request.action or request.rewind_to_turn is not None:
        return None
    if session.pending_kind not in _STEPS.get(session.current_step, ()) or not is_new_topic(session, text):
        return None
    previous = session.symptom_text
    summary = f"{session.conversation_summary} 先のご相談: {previous}".strip()
    session.conversation_summary = summary[-600:]
    session.collected_symptoms = []
    session.asked_topics = []
    session.rewritten_query = ""
    session.spec_hint = session.spec_rejected = session.spec_check_shown = session.candidates_shown = False
    session.solutions_tried = 0
    session.last_confidence = 0.0
    session.booking_type = None
    session.current_step = ChatStep.FREE_TEXT
    response = route_symptom(session, text, ctx)
    lead = LEAD.format(previous=previous[:40])
    prompt = response.prompt.model_copy(update={"message": f"{lead}\n\n{response.prompt.message}"})
    if session.conversation_history and session.conversation_history[-1].get("role") == "assistant":
        session.conversation_history[-1] = {"role": "assistant", "content": prompt.message}
    session.last_prompt = prompt
    return response.model_copy(update={"prompt": PromptInfo.model_validate(prompt.model_dump())})
