"""parse_structured_output: direct → code block → brace extraction, objects only."""
import pytest

from core.parsing import STAGE_BRACES, STAGE_CODE_BLOCK, STAGE_DIRECT, parse_structured_output, parse_with_stage

CASES = [
    ('{"a": 1}', {"a": 1}, STAGE_DIRECT),
    ('  \n{"a": 1}\n  ', {"a": 1}, STAGE_DIRECT),
    ('```json\n{"a": 1}\n```', {"a": 1}, STAGE_CODE_BLOCK),
    ('```JSON\n{"a": 1}\n```', {"a": 1}, STAGE_CODE_BLOCK),
    ('こちらです:\n```\n{"b": 2}\n```\n以上です。', {"b": 2}, STAGE_CODE_BLOCK),
    ('```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```', {"a": 1}, STAGE_CODE_BLOCK),
    ('```python\nx = {"no": 1}\n```\n```\n{"b": 2}\n```', {"b": 2}, STAGE_CODE_BLOCK),
    ('```json\n{broken\n```\n```\n{"b": 2}\n```', {"b": 2}, STAGE_CODE_BLOCK),
    ('```\n{"bare": true}\n```\n```json\n{"json": true}\n```', {"json": True}, STAGE_CODE_BLOCK),
    ('The answer is {"a": {"b": 1}} thanks', {"a": {"b": 1}}, STAGE_BRACES),
    ('日本語の前置き{"メッセージ": "こんにちは"}後置き', {"メッセージ": "こんにちは"}, STAGE_BRACES),
    ('\ufeff{"bom": 1}', {"bom": 1}, STAGE_BRACES),
]


@pytest.mark.parametrize("text,expected,stage", CASES)
def test_extracts_objects_and_records_stage(text, expected, stage):
    outcome = parse_with_stage(text)
    assert outcome.data == expected
    assert outcome.stage == stage
    assert parse_structured_output(text) == expected


@pytest.mark.parametrize("text", [
    "", "   ", None, 123, "[1, 2]", '"just a string"', "null", '{"a": 1', "no json here",
    'prefix {"a": 1} middle {"b": 2}',  # first { to last } is not one object
    "```json\n[1, 2]\n```", "{'single': 'quotes'}", '{"trailing": 1,}',
])
def test_returns_none_for_anything_but_an_object(text):
    assert parse_structured_output(text) is None
    assert parse_with_stage(text).stage is None
