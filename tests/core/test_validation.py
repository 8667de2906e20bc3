"""parse_and_validate_turn over a corpus of malformed and tricky model outputs."""
import copy
import json

import pytest

from core.knowledge.turn import entry_schema, turn_schema
from core.validation import parse_and_validate_turn

ENTRY = {"contract_type": "業務委託契約", "knowledge_title": "損害賠償の上限", "target_clause": "第8条（損害賠償）",
         "review_points": "上限がない", "action_plan": "委託料総額を上限にする", "clause_sample": "甲及び乙は…"}
VALID = {"control": {"schema_version": "1.0", "mode": "interview"},
         "state": {"phase": "collect_case", "missing_info": ["契約書の種類"]},
         "assistant_message": "契約書の種類を教えてください。", "knowledge_json": None}


def variant(**changes):
    data = copy.deepcopy(VALID)
    for path, value in changes.items():
        node = data
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[key]
        if value is KeyError:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return json.dumps(data, ensure_ascii=False)


OK, PARSE, SCHEMA, ENTRY_ERR = None, "parse_error", "schema_error", "entry_schema_error"

CORPUS = [
    ("valid, no knowledge", json.dumps(VALID, ensure_ascii=False), OK),
    ("valid with entry", variant(knowledge_json=ENTRY, control__mode="finalize", state__phase="draft_knowledge"), OK),
    ("valid, emoji and newlines", variant(assistant_message="了解です 👍\n次に進みます"), OK),
    ("valid, unicode escapes", json.dumps(VALID), OK),
    ("valid, entry with empty strings", variant(knowledge_json={k: "" for k in ENTRY}), OK),
    ("truncated", json.dumps(VALID, ensure_ascii=False)[:-15], PARSE),
    ("fenced json", "```json\n" + json.dumps(VALID, ensure_ascii=False) + "\n```", PARSE),
    ("prose before", "以下が回答です。\n" + json.dumps(VALID, ensure_ascii=False), PARSE),
    ("trailing comma", json.dumps(VALID, ensure_ascii=False)[:-1] + ",}", PARSE),
    ("single quotes", str(VALID), PARSE),
    ("empty string", "", PARSE),
    ("whitespace only", "  \n ", PARSE),
    ("BOM prefix", "\ufeff" + json.dumps(VALID), PARSE),
    ("full-width braces", "｛\"control\": 1｝", PARSE),
    ("not a string", None, PARSE),
    ("json array", json.dumps([VALID]), SCHEMA),
    ("json string", json.dumps("hello"), SCHEMA),
    ("schema_version 2.0", variant(control__schema_version="2.0"), SCHEMA),
    ("schema_version as number", variant(control__schema_version=1.0), SCHEMA),
    ("mode not in enum", variant(control__mode="chat"), SCHEMA),
    ("phase not in enum", variant(state__phase="done"), SCHEMA),
    ("missing control", variant(control=KeyError), SCHEMA),
    ("missing knowledge_json key", variant(knowledge_json=KeyError), SCHEMA),
    ("missing missing_info", variant(state__missing_info=KeyError), SCHEMA),
    ("extra top-level field", variant(reasoning="..."), SCHEMA),
    ("extra field in control", variant(control__temperature=0.2), SCHEMA),
    ("missing_info as string", variant(state__missing_info="契約書の種類"), SCHEMA),
    ("missing_info with a number", variant(state__missing_info=["a", 3]), SCHEMA),
    ("empty assistant_message", variant(assistant_message=""), SCHEMA),
    ("blank assistant_message", variant(assistant_message="   "), SCHEMA),
    ("assistant_message null", variant(assistant_message=None), SCHEMA),
    ("knowledge_json as string", variant(knowledge_json="草案"), SCHEMA),
    ("knowledge_json as list", variant(knowledge_json=[ENTRY]), SCHEMA),
    ("entry missing clause_sample", variant(knowledge_json={k: v for k, v in ENTRY.items() if k != "clause_sample"}), ENTRY_ERR),
    ("entry field is a number", variant(knowledge_json={**ENTRY, "contract_type": 1}), ENTRY_ERR),
    ("entry in seed-003 example shape", variant(knowledge_json={"title": "秘密保持", "risk": "…", "note": "…"}), ENTRY_ERR),
    ("entry with extra field", variant(knowledge_json={**ENTRY, "note": "補足"}), ENTRY_ERR),
    ("entry empty object", variant(knowledge_json={}), ENTRY_ERR),
    ("NaN in missing_info", json.dumps(VALID)[:-1].replace('["\\u5951\\u7d04\\u66f8\\u306e\\u7a2e\\u985e"]', "[NaN]") + "}", SCHEMA),
]


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("name,raw,expected", CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus(name, raw, expected):
    result = parse_and_validate_turn(raw, turn_schema(), entry_schema())
    assert result.error_type == expected, result.errors
    assert result.ok is (expected is None)
    if expected:
        assert result.errors and all(e.startswith("$") for e in result.errors)
        assert result.knowledge == []
    assert result.raw == (raw if isinstance(raw, str) else repr(raw))


def test_knowledge_is_normalised_to_six_string_fields():
    raw = variant(knowledge_json=ENTRY)
    result = parse_and_validate_turn(raw, turn_schema(), entry_schema())
    assert result.ok and result.knowledge == [ENTRY]
    assert result.assistant_message == VALID["assistant_message"]
    assert result.data["state"]["phase"] == "collect_case"


def test_errors_name_the_json_path():
    result = parse_and_validate_turn(variant(state__phase="done"), turn_schema(), entry_schema())
    assert any(e.startswith("$.state.phase:") for e in result.errors)
    entry = parse_and_validate_turn(variant(knowledge_json={**ENTRY, "action_plan": 5}), turn_schema(), entry_schema())
    assert any(e.startswith("$.knowledge_json.action_plan:") for e in entry.errors)
