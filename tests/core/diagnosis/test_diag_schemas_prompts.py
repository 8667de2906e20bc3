"""Schemas (full + strict wire copy) and prompt files of the diagnosis flow."""
from __future__ import annotations

import pytest

from core.prompts import load_prompt
from core.schemas import load_schema, schema_errors, to_strict_schema, validator

SCHEMAS = ["diagnostic_response", "urgency_assessment", "spec_classification", "choice_judgment", "choice_evaluation"]


@pytest.mark.parametrize("name", SCHEMAS)
def test_schema_is_valid_and_strict_compatible(name):
    schema = load_schema(name)
    validator(schema)  # Draft 2020-12 check_schema
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(schema["properties"])
    wire = to_strict_schema(schema)
    assert wire["required"] == list(schema["properties"])  # nothing became optional/nullable by accident
    for key, prop in schema["properties"].items():
        assert wire["properties"][key].get("type") == prop.get("type"), key
    assert "uniqueItems" not in str(wire) and "minLength" not in str(wire)


def test_diagnostic_schema_fields_of_seed_section_9():
    schema = load_schema("diagnostic_response")
    props = schema["properties"]
    assert set(props) == {"action", "message", "urgency_flag", "reasoning", "choices", "can_drive", "confidence_to_answer",
                          "rewritten_query", "question_topic", "manual_coverage", "visit_urgency", "term_to_clarify"}
    assert props["action"]["enum"] == ["ask_question", "clarify_term", "provide_answer", "escalate", "spec_answer"]
    assert props["urgency_flag"]["enum"] == ["none", "low", "medium", "high", "critical"]
    assert props["choices"]["type"] == ["array", "null"] and props["choices"]["uniqueItems"] is True
    assert props["manual_coverage"]["enum"] == ["covered", "partially_covered", "not_covered"]
    assert props["visit_urgency"]["enum"][:4] == ["immediate", "today", "this_week", "when_convenient"]


def test_duplicate_choices_fail_our_validation_only():
    from diagnosis_fakes import diag

    schema = load_schema("diagnostic_response")
    assert schema_errors(schema, diag()) == []
    errors = schema_errors(schema, diag(choices=["赤", "赤"]))
    assert errors and "non-unique" in errors[0]
    assert schema_errors(to_strict_schema(schema), diag(choices=["赤", "赤"])) == []


def test_urgency_and_spec_schema_fields():
    assert set(load_schema("urgency_assessment")["properties"]) == {"level", "can_drive", "visit_urgency", "reasons",
                                                                    "recommendation"}
    spec = load_schema("spec_classification")["properties"]
    assert spec["confidence"]["enum"] == ["high", "medium", "low"]
    assert {"is_spec", "explanation", "matched_section"} <= set(spec)


def test_diagnostic_prompt_carries_field_criteria():
    text = load_prompt("diagnosis_diagnostic")
    for needle in ("confidence_to_answer の判定基準", "0.0〜0.3", "manual_coverage の判定基準", "not_covered",
                   "urgency_flag の判定基準", "3〜4 個", "重複禁止", "カッコ書き", "質問と無関係な選択肢は絶対に入れない",
                   "{{rag_context}}", "{{recent_turns}}", "{{additional_instructions}}"):
        assert needle in text, needle


@pytest.mark.parametrize("name,needles", [
    ("urgency_assessment", ["level の判定基準", "can_drive", "visit_urgency", "{{warnings}}"]),
    ("spec_classification", ["is_spec", "confidence", "high", "{{rag_context}}"]),
    ("choice_judgment", ["step", "1 始まり", "[CHOICE:"]),
    ("choice_tag", ["[CHOICE:0]", "{{tags}}"]),
    ("choice_evaluation", ["matched_index", "{{conditions}}"]),
    ("diagnosis_summary", ["{{history}}"]),
    ("diagnosis_system", ["日本語"]),
])
def test_other_prompts(name, needles):
    text = load_prompt(name)
    for needle in needles:
        assert needle in text
