"""Output limits fitted to each schema, and the partial-JSON reader behind streaming replies."""
from __future__ import annotations

import json

import pytest

from core.llm.limits import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    MIN_OUTPUT_TOKENS,
    TEXT_OUTPUT_TOKENS,
    output_limit,
    schema_output_tokens,
)
from core.llm.stream import FieldReader, RecordingSink, partial_field
from core.schemas import embed_entry_schema, load_schema, to_strict_schema


def test_every_schema_gets_a_limit_within_floor_and_cap():
    for name in ("faq_plan", "faq_answer", "diagnostic_response", "rag_answer", "urgency_assessment"):
        schema = load_schema(name)
        assert MIN_OUTPUT_TOKENS <= output_limit(schema, to_strict_schema(schema)) <= DEFAULT_MAX_OUTPUT_TOKENS
    assert output_limit() == TEXT_OUTPUT_TOKENS and output_limit(cap=100) == 100  # a plain-text call
    assert output_limit(load_schema("diagnostic_response"), cap=150) == 150


def test_limits_follow_the_schema_size():
    small, large = load_schema("faq_plan"), load_schema("diagnostic_response")
    assert schema_output_tokens(small) < schema_output_tokens(large)
    turn = load_schema("knowledge_llm_turn")
    embedded = to_strict_schema(embed_entry_schema(turn, load_schema("knowledge_llm_entry")))
    assert schema_output_tokens(embedded) > schema_output_tokens(turn)  # the draft's six fields count
    bounded = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 10}}}
    free = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert schema_output_tokens(bounded) < schema_output_tokens(free)
    many = {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 40}
    assert schema_output_tokens(many) > schema_output_tokens({**many, "maxItems": 2})


@pytest.mark.parametrize("raw,text,complete", [
    ('', None, False), ('{"control": {"mode": "int', None, False),
    ('{"assistant_message": "契約', "契約", False), ('{"assistant_message": "a\\nb", "control"', "a\nb", False), ('{"assistant_message": "ab", "control": {', "ab", True),
    ('```json\n{"assistant_message": "前置き付き', "前置き付き", False), ('{"assistant_message": 3', None, False),
    ('not json at all', None, False), ('{"assistant_message": "x\\u30', "x", False),
])
def test_partial_field_reads_the_string_as_far_as_it_goes(raw, text, complete):
    assert partial_field(raw, "assistant_message") == (text, complete)


def test_the_reader_sends_only_changes_and_stops_once_the_field_is_complete():
    sink = RecordingSink()
    reader = FieldReader(sink, "knowledge_llm_turn", "assistant_message")
    answer = json.dumps({"assistant_message": "どの契約書ですか？", "control": {"mode": "interview"}}, ensure_ascii=False)
    for end in range(1, len(answer) + 1):
        reader(answer[:end])
    shown = sink.updates("knowledge_llm_turn")
    assert shown[-1] == "どの契約書ですか？" and len(shown) == len(set(shown)) >= 5
    assert all(b.startswith(a) for a, b in zip(shown, shown[1:]))  # it only grows
    assert reader.complete
    reader.reset()
    assert not reader.complete and reader.shown == ""
