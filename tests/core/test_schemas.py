"""Schema files load, are valid Draft 2020-12, and adapt to OpenAI strict mode."""
import json

import pytest
from jsonschema import Draft202012Validator

from core.paths import SCHEMAS_DIR
from core.schemas import embed_entry_schema, load_schema, to_strict_schema


@pytest.mark.parametrize("path", sorted(SCHEMAS_DIR.glob("*.schema.json")), ids=lambda p: p.name)
def test_every_schema_file_is_valid_draft_2020_12(path):
    Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


def test_turn_schema_matches_seed_003():
    schema = load_schema("knowledge_llm_turn")
    assert schema["required"] == ["control", "state", "assistant_message", "knowledge_json"]
    assert schema["properties"]["control"]["properties"]["schema_version"]["const"] == "1.0"
    assert schema["properties"]["state"]["properties"]["phase"]["enum"] == [
        "collect_case", "organize_risks", "draft_knowledge", "review_knowledge"]
    assert schema["properties"]["assistant_message"]["minLength"] == 1
    assert schema["properties"]["knowledge_json"]["type"] == ["object", "null"]
    assert schema["additionalProperties"] is False


def test_strict_copy_requires_everything_and_makes_optional_nullable():
    schema = {"$schema": "x", "type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "minLength": 1, "pattern": "^x"},
        "b": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 1},
        "c": {"enum": ["x", "y"]},
        "d": {"type": "object", "properties": {"e": {"type": "integer"}}},
    }}
    strict = to_strict_schema(schema)
    assert strict["required"] == ["a", "b", "c", "d"] and strict["additionalProperties"] is False
    assert strict["properties"]["a"] == {"type": "string"}
    assert strict["properties"]["b"] == {"type": ["array", "null"], "items": {"type": "string"}}
    assert strict["properties"]["c"] == {"enum": ["x", "y", None]}
    assert strict["properties"]["d"]["additionalProperties"] is False
    assert strict["properties"]["d"]["required"] == ["e"]
    assert "$schema" not in strict
    assert schema["properties"]["a"]["minLength"] == 1  # the original is untouched


def test_embedded_entry_schema_is_still_a_valid_turn_schema():
    combined = embed_entry_schema(load_schema("knowledge_llm_turn"), load_schema("knowledge_llm_entry"))
    Draft202012Validator.check_schema(combined)
    validator = Draft202012Validator(combined)
    turn = {"control": {"schema_version": "1.0", "mode": "finalize"},
            "state": {"phase": "draft_knowledge", "missing_info": []}, "assistant_message": "x",
            "knowledge_json": {"contract_type": "a", "knowledge_title": "b", "target_clause": "c",
                               "review_points": "d", "action_plan": "e", "clause_sample": "f"}}
    assert validator.is_valid(turn)
    turn["knowledge_json"] = {"title": "wrong shape"}
    assert not validator.is_valid(turn)


@pytest.mark.parametrize("path", sorted(SCHEMAS_DIR.glob("*.json")), ids=lambda p: p.name)
def test_the_strict_copy_is_built_without_a_deep_copy_and_leaves_the_schema_as_it_was(path, monkeypatch):
    """Issue #25: every dict and list of the strict copy is built anew, so the deep copy made first on every
    structured call is gone; the copy is what it was, and the schema is unchanged. Counted."""
    import copy

    from core import schemas

    schema = json.loads(path.read_text(encoding="utf-8"))
    before = json.dumps(schema)
    expected = schemas._strict_node(copy.deepcopy(schema))
    copies: list[int] = []
    monkeypatch.setattr(schemas.copy, "deepcopy", lambda *a, **k: copies.append(1) or copy.deepcopy(*a, **k))
    strict = to_strict_schema(schema)
    assert strict == expected and json.dumps(schema) == before and copies == []
    strict.setdefault("properties", {})["x"] = {"type": "string"}  # the copy shares nothing with the schema
    assert json.dumps(schema) == before
