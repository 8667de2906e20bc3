"""One knowledge-interview turn: the seed 001 message stack and ``call_llm``.

Stack: system prompt, the few-shot examples, the history (user / assistant), then the user payload
``ユーザー指示:`` + ``添付テキスト:``. Each attachment text goes inside its own ``core.text.untrusted``
data block, which the system prompt says is data only.

Seed 001's few-shot turn is an assistant message right after the system prompt. Many chat templates
(Gemma's, and others served by vLLM or llama.cpp) refuse an assistant turn there: turns must go user,
assistant, user, …. So each example is a pair, a short user turn (``prompts/knowledge_few_shot_user.md``)
followed by the schema-valid assistant turn (``prompts/knowledge_few_shot_turn.json``), and
:func:`few_shot_examples` is the one place that lists them. The history is built in whole exchanges
(``core.knowledge.session.history_for_model``) and the engine merges any two same-role messages that
still meet, so a stack never holds two user or two assistant messages in a row.
"""
from __future__ import annotations

import json
from typing import Any, MutableSequence, Sequence

from core.debuglog import CallTags
from core.engine import RetryPolicy, structured_call
from core.prompts import load_prompt
from core.results import TurnResult
from core.schemas import embed_entry_schema, load_schema, to_strict_schema
from core.text.untrusted import data_block
from core.validation import parse_and_validate_turn

TURN_SCHEMA_NAME = "knowledge_llm_turn"
ENTRY_SCHEMA_NAME = "knowledge_llm_entry"
TURN_FIELDS = "control, state, assistant_message, knowledge_json の 4 つ"
STREAM_FIELD = "assistant_message"  # what the page shows while the model writes


def turn_schema() -> dict[str, Any]:
    return load_schema(TURN_SCHEMA_NAME)


def entry_schema() -> dict[str, Any]:
    return load_schema(ENTRY_SCHEMA_NAME)


def system_prompt() -> str:
    return load_prompt("knowledge_system")


def build_user_payload(user_text: str, file_texts: Sequence[str] | None) -> str:
    parts = []
    if user_text:
        parts.append(f"ユーザー指示:\n{user_text}")
    if file_texts:
        parts.append("添付テキスト:\n" + "\n\n".join(data_block(text) for text in file_texts))
    return "\n\n".join(parts)


def _message_first(turn_json: str) -> str:
    """An example turn with ``assistant_message`` first: models copy the example's key order, and the
    page streams that field while the rest is written (the engine puts it first in the schema too)."""
    turn = json.loads(turn_json)
    ordered = {STREAM_FIELD: turn[STREAM_FIELD], **{k: v for k, v in turn.items() if k != STREAM_FIELD}}
    return json.dumps(ordered, ensure_ascii=False, indent=2)


def few_shot_examples() -> list[tuple[str, str]]:
    """The few-shot examples as (user turn, schema-valid assistant turn JSON) pairs, in order. Read on every
    call, so a prompt version saved on any replica is used by the next turn (``core.prompts``)."""
    return [(load_prompt("knowledge_few_shot_user"), _message_first(load_prompt("knowledge_few_shot_turn.json")))]


def build_messages(user_text: str, file_texts: Sequence[str] | None, system_prompt: str,
                   history: Sequence[dict[str, Any]] | None) -> list[dict[str, str]]:
    """System prompt, each few-shot pair, the history's user / assistant messages, the user payload."""
    messages = [{"role": "system", "content": system_prompt}]
    for example_user, example_turn in few_shot_examples():
        messages += [{"role": "user", "content": example_user}, {"role": "assistant", "content": example_turn}]
    for item in history or []:
        if item.get("role") in ("user", "assistant"):
            messages.append({"role": item["role"], "content": item["content"]})
    messages.append({"role": "user", "content": build_user_payload(user_text, file_texts)})
    return messages


def call_llm(user_text: str, file_texts: Sequence[str] | None, system_prompt: str,
             history: Sequence[dict[str, Any]] | None, client: Any, turn_schema: dict[str, Any],
             entry_schema: dict[str, Any], max_repairs: int = 2, *, strategies: Sequence[str] | None = None,
             log: MutableSequence[dict[str, Any]] | None = None, tags: CallTags | None = None,
             retry: RetryPolicy | None = None, keep_tail: int = 1) -> TurnResult:
    """Run one schema-checked knowledge turn. Never raises for bad output or provider errors.
    ``keep_tail``: trailing messages fitting the context never drops (3 for a regeneration: the turn
    being answered again with its files, the rejected output, the instruction)."""
    messages = build_messages(user_text, file_texts, system_prompt, history)
    wire = to_strict_schema(embed_entry_schema(turn_schema, entry_schema))
    result = structured_call(
        client, messages, schema=turn_schema, name=TURN_SCHEMA_NAME, wire_schema=wire,
        validate=lambda raw: parse_and_validate_turn(raw, turn_schema, entry_schema),
        strategies=strategies, max_repairs=max_repairs, repair_fields=TURN_FIELDS,
        log=log, tags=tags or CallTags(flow="knowledge", step="turn", prompt="knowledge_system"),
        retry=retry, result_cls=TurnResult, stream_field=STREAM_FIELD,
        keep_head=1 + 2 * len(few_shot_examples()),  # fitting the context never drops the examples
        keep_tail=keep_tail)
    assert isinstance(result, TurnResult)
    return result
