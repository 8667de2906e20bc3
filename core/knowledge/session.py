"""The interview as the console runs it: chat history, knowledge outputs, resend after failure.

Seed 001 UI flow: the user's input goes into the history at once; on success the assistant
message is appended and the knowledge outputs replaced; on failure the raw output and error type
are appended, and the user's payload stays available for a resend. Nothing here imports Streamlit:
the page passes in the session-state lists.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Mapping, MutableSequence, Sequence

from core.answer_guard import REGENERATION_TAIL, offline_client
from core.debuglog import CallTags
from core.documents import ExtractedDocument
from core.engine import RetryPolicy
from core.ids import new_id
from core.knowledge.guards import TurnContext, guarded_turn
from core.knowledge.house_style import with_house_style
from core.knowledge.turn import (build_user_payload, call_llm, entry_schema, few_shot_examples, system_prompt,
                                 turn_schema)
from core.results import INPUT_TOO_LONG, TurnResult
from core.text.input_gate import check_length


@dataclass
class TurnOutcome:
    result: TurnResult
    user_entry: dict[str, Any]
    assistant_entry: dict[str, Any]


def history_for_model(chat: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """Successful exchanges only, each as a whole pair: the user payload (with attachment text) and the
    assistant's full turn JSON, so the model sees its own earlier state (seed 003 §2.2). A failed or
    gated turn, a user entry left without its reply (a turn still running elsewhere, a lost reply) and
    an assistant entry without its user entry are left out, so the history alternates user / assistant
    also after a failed turn and a resend."""
    history: list[dict[str, str]] = []
    pending: dict[str, str] | None = None
    for entry in chat:
        if entry.get("failed") or entry.get("gated"):
            pending = None
            continue
        if entry["role"] == "user":
            pending = {"role": "user", "content": entry.get("payload") or entry["content"]}
        elif entry["role"] == "assistant" and pending is not None:
            history += [pending, {"role": "assistant", "content": entry.get("raw") or entry["content"]}]
            pending = None
    return history


def submit_turn(chat: MutableSequence[dict[str, Any]], knowledge_outputs: list[dict[str, str]], user_text: str,
                documents: Sequence[ExtractedDocument], client: Any, *, log: MutableSequence[dict[str, Any]] | None = None,
                session_id: str = "", retry: RetryPolicy | None = None,
                examples: Sequence[Mapping[str, Any]] = ()) -> TurnOutcome:
    """Append the user's turn, call the model, append the reply (or the failure). Never raises.
    ``examples`` (the most similar confirmed entries) go with the system prompt as the house style
    (``core.knowledge.house_style``); the reply passes ``core.knowledge.guards`` (one regeneration of a
    very short or looping message, a tidied entry).
    Text over ``core.text.pii.MAX_MESSAGE_CHARS`` (``core.text.input_gate``) is not sent: the turn fails at
    once with the Japanese "too long" message (``error_type`` ``input_too_long``); both entries are
    marked ``gated`` (shown, never sent to the model, nothing to resend)."""
    gate = check_length(user_text)
    if gate is not None:
        user_entry = {"id": new_id(8), "role": "user", "content": user_text[:200] + "…",
                      "user_text": user_text, "attachments": [], "gated": True}  # the whole text, to copy back
        assistant_entry = {"role": "assistant", "content": gate.message, "gated": True, "error_type": INPUT_TOO_LONG}
        chat.extend([user_entry, assistant_entry])
        result = TurnResult(ok=False, error_type=INPUT_TOO_LONG, errors=[gate.message], assistant_message=gate.message)
        return TurnOutcome(result, user_entry, assistant_entry)
    usable = [d for d in documents if d.ok and d.paragraphs]
    file_texts = [d.for_prompt() for d in usable]
    history = history_for_model(chat)
    user_entry: dict[str, Any] = {
        "id": new_id(8), "role": "user", "content": user_text,
        "attachments": [{**d.metadata(), "summary": d.summary()} for d in usable],  # never the text
        "payload": build_user_payload(user_text, file_texts), "user_text": user_text, "file_texts": file_texts,
    }
    chat.append(user_entry)
    started = time.perf_counter()
    system = with_house_style(system_prompt(), examples)
    result = call_llm(user_text, file_texts, system, history, client, turn_schema(), entry_schema(),
                      log=log, tags=CallTags(session_id=session_id, flow="knowledge", step="turn",
                                             prompt="knowledge_system"), retry=retry)

    def regenerate(instruction: str) -> TurnResult:
        again = [*history, {"role": "user", "content": user_entry["payload"]},
                 {"role": "assistant", "content": result.raw}]
        return call_llm(instruction, None, system, again, client, turn_schema(), entry_schema(), log=log,
                        tags=CallTags(session_id=session_id, flow="knowledge", step="regenerate",
                                      prompt="knowledge_regenerate"), retry=retry, keep_tail=REGENERATION_TAIL)

    def offline() -> TurnResult:  # the built-in interviewer's turn: the fallback of a non-answer (issue #26)
        return call_llm(user_text, file_texts, system, history, offline_client(), turn_schema(), entry_schema(),
                        log=log, tags=CallTags(session_id=session_id, flow="knowledge", step="offline",
                                               prompt="knowledge_system"))

    result = guarded_turn(result, _guard_context(chat, user_text, knowledge_outputs), regenerate, offline, log=log)
    latency_ms = round((time.perf_counter() - started) * 1000, 1)
    if result.ok:
        data = result.data or {}
        assistant_entry = {"role": "assistant", "content": result.assistant_message, "raw": result.raw,
                           "turn": data, "method": result.method, "attempts": result.attempts,
                           "latency_ms": latency_ms}
        if result.knowledge:  # a clarify turn with knowledge_json=null keeps the last draft
            knowledge_outputs[:] = result.knowledge
    else:
        user_entry["failed"] = True
        assistant_entry = {"role": "assistant", "failed": True, "content": result.error_label,
                           "error_type": result.error_type, "errors": result.errors, "raw": result.raw,
                           "retry_of": user_entry["id"], "attempts": result.attempts, "latency_ms": latency_ms}
    chat.append(assistant_entry)
    return TurnOutcome(result, user_entry, assistant_entry)


def _guard_context(chat: Sequence[dict[str, Any]], user_text: str, outputs: Sequence[Any]) -> TurnContext:
    """The guards' view of the conversation before this turn's reply (``chat`` ends with the user entry)."""
    previous = next((e for e in reversed(chat[:-1]) if e["role"] == "assistant" and e.get("turn")), None)
    texts = [t for e in chat if e["role"] == "user" for t in e.get("file_texts") or []]
    return TurnContext(user_text=user_text, attachment_texts=texts,
                       previous_message=(previous or {}).get("content") or "", has_draft=bool(outputs),
                       examples=[(asked, _example_message(turn)) for asked, turn in few_shot_examples()])


def _example_message(turn_json: str) -> str:
    try:
        return str(json.loads(turn_json).get("assistant_message") or "")
    except (ValueError, AttributeError):
        return ""


def resend(chat: MutableSequence[dict[str, Any]], knowledge_outputs: list[dict[str, str]], user_id: str,
           client: Any, **kwargs: Any) -> TurnOutcome | None:
    """Send a failed user turn again with exactly the same text and attachment text."""
    index = next((i for i, e in enumerate(chat) if e.get("id") == user_id and e.get("failed")), None)
    if index is None:
        return None
    failed = chat[index]
    del chat[index:index + 2]  # the failed user entry and its error reply
    docs = [_PromptOnlyDocument(t) for t in failed.get("file_texts", [])]
    outcome = submit_turn(chat, knowledge_outputs, failed.get("user_text", ""), docs, client, **kwargs)
    outcome.user_entry["attachments"] = failed.get("attachments", [])
    return outcome


class _PromptOnlyDocument(ExtractedDocument):
    """An already-extracted attachment text, replayed on resend."""

    def __init__(self, prompt_text: str):
        super().__init__(name="", kind="text", paragraphs=[prompt_text])

    def for_prompt(self) -> str:
        return self.paragraphs[0]


def current_state(chat: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The last successful turn JSON (phase, mode, missing_info), if any."""
    for entry in reversed(chat):
        if entry["role"] == "assistant" and entry.get("turn"):
            return entry["turn"]
    return None


def turns_jsonl(chat: Sequence[dict[str, Any]]) -> str:
    """Every accepted turn JSON (seed 003 §7.2: store each turn whole)."""
    return "".join(json.dumps(e["turn"], ensure_ascii=False) + "\n" for e in chat if e.get("turn"))
