"""Guards on a knowledge turn, for a real model and the offline interviewer alike (seed 003 §7.1).

After a turn has passed schema validation, :func:`guarded_turn` checks what a schema cannot:

* a very short ``assistant_message`` (under ``MIN_MESSAGE_CHARS`` characters, e.g. 「了解。」),
* a wrap-up request (「この内容でまとめてください」) answered without a draft (after the first turn: before
  it nothing is known to draft),
* the same message as our previous turn, word for word (a question asked again in a loop).

Before these, the non-answers every flow guards against (``core.answer_guard``, issue #26): an
``assistant_message`` that is the user's message again, or the few-shot example's greeting again on a
turn that did not ask for it, or a draft whose title / review points / action plan is in another
language's script (「货款」). Such a turn is regenerated once; if the second one is still no answer, the
built-in interviewer's turn (``fallback``) is used when it passes, else the turn fails honestly
(``not_answered``: the user's message stays and can be resent) — it is never shown.

Each gets a warning in the server log (lengths and reasons only, never the text) and **one**
regeneration: the conversation again, with the rejected output and the reason
(``prompts/knowledge_regenerate.md``). The better of the two is kept; a failed regeneration keeps
the first turn. Then :func:`tidy_knowledge` cleans the entry the turn carries: a title without a
repeated segment (:func:`core.knowledge.review_language.concise_title`), review points without lines
quoted from the attached contract, and no line that only restates a question the user asked
(a question is never a policy).
"""
from __future__ import annotations

import copy
import logging
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from core.answer_guard import Finding, check_answer, guarded
from core.knowledge.review_language import concise_title, is_question, is_wrap_up
from core.prompts import render
from core.results import ERROR_LABELS_JA, NOT_ANSWERED, TurnResult

logger = logging.getLogger("kaiwa.knowledge")

MIN_MESSAGE_CHARS = 8
QUOTE_MIN_CHARS = 30  # a review-point line this long found word for word in an attachment is contract text
RAW_ECHO_CHARS = 2000

SHORT = "assistant_message が短すぎます（{n} 文字）。"
WRAP_UP_IGNORED = "ユーザーはここまでの内容でのまとめを求めています。分かっている内容で knowledge_json に草案を入れ、足りない項目を state.missing_info に挙げてください。"
REPEATED = "直前と同じメッセージです。同じ質問を繰り返さず、回答がなかった項目は不足として挙げたうえで先に進めてください。"


@dataclass
class TurnContext:
    """What the guards know of the conversation: the user's text, the attachment texts seen so far,
    our previous message and whether a draft exists already."""

    user_text: str = ""
    attachment_texts: Sequence[str] = ()
    previous_message: str = ""
    has_draft: bool = False
    questions: list[str] = field(default_factory=list)
    examples: Sequence[tuple[str, str]] = ()  # the few-shot (user turn, assistant_message) pairs the model saw


DRAFT_TEXT_FIELDS = {"knowledge_title": "knowledge_title（タイトル）", "review_points": "review_points（審査ポイント）",
                     "action_plan": "action_plan（対応方針）"}


def non_answer(result: TurnResult, ctx: TurnContext) -> Finding | None:
    """Why a valid turn is no answer (module docstring), or None."""
    message = result.assistant_message or ""
    examples = [said for asked, said in ctx.examples if not check_answer(ctx.user_text, examples=[asked])]
    finding = check_answer(message, user_text=ctx.user_text, examples=examples, field_name="assistant_message",
                           japanese=True)
    if finding is not None:
        return finding
    for entry in result.knowledge or []:
        for key, label in DRAFT_TEXT_FIELDS.items():
            finding = check_answer(str(entry.get(key) or ""), field_name=label, japanese=True)
            if finding is not None:
                return finding
    return None


def _flat(text: Any) -> str:
    return "".join(unicodedata.normalize("NFKC", str(text or "")).split())


def regeneration_reason(result: TurnResult, ctx: TurnContext) -> str:
    """Why this valid turn should be made again ("" when it is fine)."""
    message = (result.assistant_message or "").strip()
    if len(message) < MIN_MESSAGE_CHARS:
        return SHORT.format(n=len(message))
    if is_wrap_up(ctx.user_text) and not result.knowledge and not ctx.has_draft and ctx.previous_message:
        return WRAP_UP_IGNORED
    if ctx.previous_message and _flat(message) == _flat(ctx.previous_message):
        return REPEATED
    return ""


def regenerate_instruction(raw: str | None, reason: str) -> str:
    return render("knowledge_regenerate", raw_output=str(raw or "")[:RAW_ECHO_CHARS], reason=reason)


def guarded_turn(first: TurnResult, ctx: TurnContext, regenerate: Callable[[str], TurnResult],
                 fallback: Callable[[], TurnResult] | None = None, *, log: Any = None) -> TurnResult:
    """``first``, or one regeneration of it when :func:`non_answer` or :func:`regeneration_reason` finds a
    fault (a non-answer that stays one: ``fallback``'s turn, else a failed turn); then tidied."""
    if not first.ok:
        return first
    if non_answer(first, ctx) is not None:
        checked = guarded(first, lambda r: non_answer(r, ctx),
                          lambda finding: regenerate(regenerate_instruction(first.raw, finding.reason)), fallback,
                          log=log, task="knowledge_llm_turn", flow="knowledge")
        if checked.result is None:
            reasons = [f.reason for f in checked.findings]
            return TurnResult(ok=False, raw=first.raw, error_type=NOT_ANSWERED, errors=reasons, attempts=first.attempts,
                              method=first.method, assistant_message=ERROR_LABELS_JA[NOT_ANSWERED])
        assert isinstance(checked.result, TurnResult)
        return tidy_knowledge(checked.result, ctx)
    reason = regeneration_reason(first, ctx)
    result = first
    if reason:
        logger.warning("knowledge turn regenerated once: %s (message %d chars)", reason.split("。")[0][:40],
                       len(first.assistant_message or ""))
        second = regenerate(regenerate_instruction(first.raw, reason))
        if second.ok and not regeneration_reason(second, ctx):
            result = second
        elif second.ok and len((second.assistant_message or "").strip()) > len((first.assistant_message or "").strip()):
            result = second
        else:
            logger.warning("knowledge turn regeneration did not help (%s); keeping the first turn",
                           second.error_type or "same fault")
        result.attempts = (first.attempts or 0) + (second.attempts or 0)
    return tidy_knowledge(result, ctx)


def _quoted_from(line: str, attachments: Sequence[str]) -> bool:
    core = _flat(line).lstrip("・-*").strip("「」")
    return len(core) >= QUOTE_MIN_CHARS and any(core[:QUOTE_MIN_CHARS * 2] in _flat(a) for a in attachments)


def _restates_question(line: str, questions: Sequence[str]) -> bool:
    core = _flat(line).lstrip("・-*").rstrip("。?？")
    return len(core) >= 6 and any(core and core in _flat(q) for q in questions)


def tidy_entry(entry: dict[str, Any], ctx: TurnContext) -> dict[str, Any]:
    out = dict(entry)
    if out.get("knowledge_title"):
        out["knowledge_title"] = concise_title(out["knowledge_title"])
    questions = ctx.questions or ([ctx.user_text] if is_question(ctx.user_text) else [])
    for key in ("review_points", "action_plan"):
        lines = str(out.get(key) or "").split("\n")
        kept = [line for line in lines
                if not (key == "review_points" and _quoted_from(line, ctx.attachment_texts))
                and not _restates_question(line, questions)]
        out[key] = "\n".join(kept).strip("\n")
    return out


def tidy_knowledge(result: TurnResult, ctx: TurnContext) -> TurnResult:
    """The turn with its entries (and the turn JSON's ``knowledge_json``) tidied (module docstring)."""
    if not result.ok or not result.knowledge:
        return result
    entries = [tidy_entry(e, ctx) for e in result.knowledge]
    if entries == result.knowledge:
        return result
    data = copy.deepcopy(result.data) if isinstance(result.data, dict) else result.data
    if isinstance(data, dict) and isinstance(data.get("knowledge_json"), dict):
        data["knowledge_json"] = {**data["knowledge_json"], **entries[0]}
    elif isinstance(data, dict) and isinstance(data.get("knowledge_json"), list):
        data["knowledge_json"] = [{**(orig if isinstance(orig, dict) else {}), **new}
                                  for orig, new in zip(data["knowledge_json"], entries)]
    return replace(result, knowledge=entries, data=data)
