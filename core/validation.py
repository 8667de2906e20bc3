"""Parse and validate model output against JSON Schemas (seed 001/003 ``parse_and_validate_turn``)."""
from __future__ import annotations

import json
from typing import Any

from core.results import ENTRY_SCHEMA_ERROR, PARSE_ERROR, SCHEMA_ERROR, StructuredResult, TurnResult
from core.schemas import schema_errors

# A knowledge entry's fields (schemas/knowledge_entry.json), title first: the order of the library, its exports
# and the store.
ENTRY_FIELDS = ("knowledge_title", "contract_type", "target_clause", "review_points", "action_plan", "clause_sample")


def _parse(raw: Any) -> tuple[Any, list[str]]:
    if not isinstance(raw, str):
        return None, [f"$: 文字列ではない出力です ({type(raw).__name__})"]
    if not raw.strip():
        return None, ["$: 出力が空です"]
    try:
        return json.loads(raw), []
    except json.JSONDecodeError as exc:
        return None, [f"$: JSON 構文エラー: {exc.msg} (行 {exc.lineno}, 列 {exc.colno})"]
    except RecursionError:
        return None, ["$: JSON の入れ子が深すぎます"]


def validate_json(raw: Any, schema: dict[str, Any]) -> StructuredResult:
    """Strict ``json.loads`` of the whole text, then Draft 2020-12 validation against ``schema``."""
    parsed, errors = _parse(raw)
    raw_text = raw if isinstance(raw, str) else repr(raw)
    if errors:
        return StructuredResult(ok=False, raw=raw_text, error_type=PARSE_ERROR, errors=errors)
    if not isinstance(parsed, dict):
        return StructuredResult(ok=False, raw=raw_text, error_type=SCHEMA_ERROR,
                                errors=[f"$: JSON オブジェクトではありません ({type(parsed).__name__})"])
    errors = schema_errors(schema, parsed)
    if errors:
        return StructuredResult(ok=False, raw=raw_text, data=parsed, error_type=SCHEMA_ERROR, errors=errors)
    return StructuredResult(ok=True, raw=raw_text, data=parsed)


def normalize_entries(knowledge_json: Any) -> list[dict[str, str]]:
    """The knowledge as a list of entries with exactly the six string fields (empty → "")."""
    if knowledge_json is None:
        return []
    items = knowledge_json if isinstance(knowledge_json, list) else [knowledge_json]
    return [{k: str(item.get(k, "") or "") for k in ENTRY_FIELDS} for item in items if isinstance(item, dict)]


def parse_and_validate_turn(raw: Any, turn_schema: dict[str, Any], entry_schema: dict[str, Any]) -> TurnResult:
    """JSON parse → turn-schema validation → ``knowledge_json`` against the entry schema.

    Never raises. ``error_type`` is parse_error / schema_error / entry_schema_error.
    """
    base = validate_json(raw, turn_schema)
    if not base.ok:
        return TurnResult(ok=False, raw=base.raw, data=base.data, error_type=base.error_type, errors=base.errors)
    data = base.data or {}
    knowledge_json = data.get("knowledge_json")
    if knowledge_json is not None:
        entry_errors = [f"$.knowledge_json{e[1:]}" for e in schema_errors(entry_schema, knowledge_json)]
        if entry_errors:
            return TurnResult(ok=False, raw=base.raw, data=data, error_type=ENTRY_SCHEMA_ERROR, errors=entry_errors)
    message = data.get("assistant_message", "")
    if not message.strip():
        return TurnResult(ok=False, raw=base.raw, data=data, error_type=SCHEMA_ERROR,
                          errors=["$.assistant_message: 空白だけのメッセージです"])
    return TurnResult(ok=True, raw=base.raw, data=data, assistant_message=message,
                      knowledge=normalize_entries(knowledge_json))
