"""The three ways to get structure out of a provider (seed 004), as request builders.

- ``structured_output``: native ``response_format`` json_schema with ``strict: true``;
- ``tool_call``: one forced function tool whose parameters are the schema;
- ``prompt_extract``: the schema and a JSON-only instruction appended to the last user message,
  the reply parsed with ``parse_structured_output``.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from core.llm.base import LLMRequest, LLMResponse
from core.prompts import render

STRUCTURED_OUTPUT = "structured_output"
TOOL_CALL = "tool_call"
PROMPT_EXTRACT = "prompt_extract"
ALL_STRATEGIES = (STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT)
DEFAULT_CHAIN = ALL_STRATEGIES

# First line of the instruction appended by prompt_extract; offline policies strip from here.
SCHEMA_INSTRUCTION_MARKER = "---\n【出力形式の指示】"


def schema_instruction(schema: dict[str, Any]) -> str:
    return render("json_only_instruction", schema=json.dumps(schema, ensure_ascii=False, indent=2))


def build_request(strategy: str, base: LLMRequest, *, name: str, wire_schema: dict[str, Any],
                  full_schema: dict[str, Any]) -> LLMRequest:
    """The request ``base`` dressed for ``strategy``."""
    if strategy == STRUCTURED_OUTPUT:
        fmt = {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": wire_schema}}
        return replace(base, response_format=fmt, tools=None, tool_choice=None)
    if strategy == TOOL_CALL:
        tool = {"type": "function", "function": {
            "name": name, "description": f"Return the {name} object.",
            "parameters": wire_schema, "strict": True}}
        return replace(base, response_format=None, tools=[tool],
                       tool_choice={"type": "function", "function": {"name": name}})
    if strategy == PROMPT_EXTRACT:
        messages = [dict(m) for m in base.messages]
        instruction = schema_instruction(full_schema)
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
        if last_user is None:
            messages.append({"role": "user", "content": instruction})
        else:
            messages[last_user]["content"] = f"{messages[last_user].get('content', '')}\n\n{instruction}"
        return replace(base, messages=messages, response_format=None, tools=None, tool_choice=None)
    raise ValueError(f"unknown strategy: {strategy}")


def raw_output(strategy: str, response: LLMResponse) -> str | None:
    """The text to validate: tool arguments for tool_call (None when the model answered a forced tool call
    in plain text: the server ignores tools, so the method is unsupported), content otherwise."""
    if strategy == TOOL_CALL:
        return response.tool_arguments
    return response.content
