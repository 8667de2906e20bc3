"""The prompt-injected schema instruction (seed 004, ``prompt_extract``): the seed's wording, then the
schema inside a ```json fence that the reply parser also understands."""
from __future__ import annotations

import json

from core.llm.base import LLMRequest
from core.llm.strategies import PROMPT_EXTRACT, SCHEMA_INSTRUCTION_MARKER, build_request, schema_instruction
from core.parsing import parse_structured_output

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}}, "required": ["answer"]}
SEED_LINE = ("IMPORTANT: You MUST respond with ONLY a valid JSON object matching this schema. "
             "No other text, no markdown code blocks, no explanation.")


def test_instruction_keeps_seed_wording_and_fences_the_schema():
    text = schema_instruction(SCHEMA)
    lines = text.splitlines()
    assert text.startswith(SCHEMA_INSTRUCTION_MARKER)
    assert SEED_LINE in lines
    fence = lines.index("```json")
    assert fence > lines.index(SEED_LINE)
    closing = len(lines) - 1 - lines[::-1].index("```")
    assert closing > fence
    assert json.loads("\n".join(lines[fence + 1:closing])) == SCHEMA


def test_prompt_extract_appends_the_fenced_schema_to_the_last_user_message():
    base = LLMRequest(messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "質問"}])
    request = build_request(PROMPT_EXTRACT, base, name="t", wire_schema=SCHEMA, full_schema=SCHEMA)
    content = request.messages[-1]["content"]
    assert content.startswith("質問\n\n" + SCHEMA_INSTRUCTION_MARKER)
    assert "```json\n{" in content and content.rstrip().endswith("```")
    # a reply that copies the fence style is still read (seed 004's code-block stage)
    assert parse_structured_output('```json\n{"answer": "はい"}\n```') == {"answer": "はい"}
