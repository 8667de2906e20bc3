"""Schema versions of stored knowledge turns (seed 003 §8): one validator and adapter per version.

Every knowledge turn JSON carries ``control.schema_version``; the store keeps the JSON as the model
sent it (``turns.turn_json`` and the chat entry's ``turn`` / ``raw``), so after a schema change the
stored turns of an older version must still load, display and replay. Each version is registered
with :func:`register`: a validator for its own shape and an adapter that lifts a turn of that
version to the next one. :func:`upgrade` chains the adapters up to :data:`CURRENT_VERSION` and
checks the result against the current schemas (``schemas/knowledge_llm_turn`` + ``_entry``);
:func:`upgrade_entry` does the same for a stored chat entry (its ``raw`` becomes the upgraded JSON,
so a replayed history shows the model only the current shape) and records the version the turn
was stored with in ``stored_schema_version``, which :func:`describe` turns into a caption.

Registered versions:

- ``"1.0"`` — the current shape (seed 001 / 003 §3.3): ``knowledge_json`` with the six entry fields.
- ``"0.9"`` — the draft shape of seed 003 §3.4 example 2: ``knowledge_json`` with ``title``,
  ``contract_types`` (list), ``problem_pattern``, ``risk``, ``recommended_clause``, ``note``, and
  ``state.missing_info`` optional. Its adapter maps title → knowledge_title, contract_types →
  contract_type (「、」-joined), problem_pattern + risk → review_points, note → action_plan,
  recommended_clause → clause_sample, target_clause → "" (0.9 had no such field).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from core.schemas import load_schema, schema_errors

CURRENT_VERSION = "1.0"
Validator = Callable[[Any], list[str]]
Adapter = Callable[[dict[str, Any]], dict[str, Any]]


class SchemaVersionError(ValueError):
    """A stored turn whose version is unknown, or that does not match its version's schema."""


@dataclass(frozen=True)
class SchemaVersion:
    version: str
    validate: Validator
    adapter: Adapter | None = None  # this version → ``upgrades_to``
    upgrades_to: str | None = None
    description: str = ""


_REGISTRY: dict[str, SchemaVersion] = {}


def register(version: str, validator: Validator, adapter: Adapter | None = None, *, upgrades_to: str | None = None,
             description: str = "") -> SchemaVersion:
    """Register ``version``: ``validator(turn) -> errors`` for its own shape and, for an older
    version, ``adapter(turn) -> turn of upgrades_to``."""
    if (adapter is None) != (upgrades_to is None):
        raise ValueError("an adapter needs upgrades_to, and upgrades_to needs an adapter")
    if version == CURRENT_VERSION and adapter is not None:
        raise ValueError("the current version has no adapter")
    entry = SchemaVersion(str(version), validator, adapter, upgrades_to, description)
    _REGISTRY[entry.version] = entry
    return entry


def current_version() -> str:
    return CURRENT_VERSION


def registered_versions() -> list[str]:
    return sorted(_REGISTRY)


def version_of(turn: Any) -> str | None:
    """``control.schema_version`` of a turn JSON as a string (``1`` or ``1.0`` as numbers → ``"1.0"``)."""
    control = turn.get("control") if isinstance(turn, Mapping) else None
    version = control.get("schema_version") if isinstance(control, Mapping) else None
    if isinstance(version, bool) or version is None:
        return None
    if isinstance(version, (int, float)):
        return f"{float(version):.1f}"
    return str(version)[:20]


def _lookup(turn: Any) -> SchemaVersion:
    version = version_of(turn)
    if version is None:
        raise SchemaVersionError("schema_version がありません（control.schema_version）")
    if version not in _REGISTRY:
        raise SchemaVersionError(f"未対応の schema_version です: {version}（対応: {', '.join(registered_versions())}）")
    return _REGISTRY[version]


def validate_stored(turn: Any) -> list[str]:
    """Errors of a stored turn against the schema of the version it names (empty when valid)."""
    try:
        return _lookup(turn).validate(turn)
    except SchemaVersionError as exc:
        return [f"$.control.schema_version: {exc}"]


def upgrade(turn: Any) -> dict[str, Any]:
    """The turn in the current shape. Raises :class:`SchemaVersionError` when its version is unknown,
    it does not match its own version's schema, or the upgraded turn fails the current schemas."""
    if isinstance(turn, str):
        try:
            turn = json.loads(turn)
        except ValueError as exc:
            raise SchemaVersionError(f"JSON として読めません: {exc}") from exc
    if not isinstance(turn, dict):
        raise SchemaVersionError("ターン JSON がオブジェクトではありません")
    current = copy.deepcopy(turn)
    seen: set[str] = set()
    while True:
        spec = _lookup(current)
        errors = spec.validate(current)
        if errors:
            raise SchemaVersionError(f"schema_version {spec.version} のスキーマに合いません: " + "; ".join(errors[:5]))
        if spec.version == CURRENT_VERSION:
            return current
        if spec.adapter is None or spec.version in seen:
            raise SchemaVersionError(f"schema_version {spec.version} から {CURRENT_VERSION} への変換がありません")
        seen.add(spec.version)
        current = spec.adapter(current)


def upgrade_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A stored chat entry with its ``turn`` (and ``raw``) in the current shape. The version it was
    stored with goes to ``stored_schema_version``; a turn that cannot be upgraded is dropped from
    ``turn`` (the message still shows) and the reason kept in ``schema_error``."""
    out = dict(entry)
    turn = entry.get("turn")
    if entry.get("role") != "assistant" or not turn:
        return out
    out["stored_schema_version"] = version_of(turn)
    try:
        upgraded = upgrade(turn)
    except SchemaVersionError as exc:
        out.pop("turn", None)
        out["schema_error"] = str(exc)
        return out
    if upgraded != turn:
        out["turn"] = upgraded
        out["raw"] = json.dumps(upgraded, ensure_ascii=False)
    return out


def upgrade_chat(entries: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`upgrade_entry` over a stored chat (``Store.chat_entries``)."""
    return [upgrade_entry(e) for e in entries]


def describe(entry_or_turn: Mapping[str, Any]) -> str:
    """A caption for the version a turn used: 「スキーマ 1.0」 or 「スキーマ 0.9（1.0 に変換して表示）」."""
    version = entry_or_turn.get("stored_schema_version") or version_of(entry_or_turn.get("turn") or entry_or_turn)
    if not version:
        return "スキーマ不明"
    if entry_or_turn.get("schema_error"):
        return f"スキーマ {version}（読み込めません）"
    return f"スキーマ {version}" if version == CURRENT_VERSION else f"スキーマ {version}（{CURRENT_VERSION} に変換して表示）"


# ---- 1.0: the current schemas --------------------------------------------------------------------
def _validate_1_0(turn: Any) -> list[str]:
    errors = schema_errors(load_schema("knowledge_llm_turn"), turn)
    if errors:
        return errors
    knowledge = turn.get("knowledge_json")
    if knowledge is not None:
        errors = [f"$.knowledge_json{e[1:]}" for e in schema_errors(load_schema("knowledge_llm_entry"), knowledge)]
    return errors


# ---- 0.9: seed 003 §3.4 example 2 ----------------------------------------------------------------
_MODES = ["interview", "clarify", "finalize"]
_PHASES = ["collect_case", "organize_risks", "draft_knowledge", "review_knowledge"]
TURN_SCHEMA_0_9: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ContractReviewKnowledgeTurn 0.9",
    "type": "object",
    "required": ["control", "state", "assistant_message", "knowledge_json"],
    "properties": {
        "control": {"type": "object", "required": ["schema_version", "mode"], "additionalProperties": False,
                    "properties": {"schema_version": {"const": "0.9"}, "mode": {"enum": _MODES}}},
        "state": {"type": "object", "required": ["phase"], "additionalProperties": False,
                  "properties": {"phase": {"enum": _PHASES},
                                 "missing_info": {"type": "array", "items": {"type": "string"}}}},
        "assistant_message": {"type": "string", "minLength": 1},
        "knowledge_json": {
            "type": ["object", "null"], "additionalProperties": False,
            "properties": {"title": {"type": "string"},
                           "contract_types": {"type": "array", "items": {"type": "string"}},
                           "problem_pattern": {"type": "string"}, "risk": {"type": "string"},
                           "recommended_clause": {"type": "string"}, "note": {"type": "string"}}},
    },
    "additionalProperties": False,
}


def _validate_0_9(turn: Any) -> list[str]:
    return schema_errors(TURN_SCHEMA_0_9, turn)


def _entry_from_0_9(old: Mapping[str, Any]) -> dict[str, str]:
    review = [f"事例: {old['problem_pattern']}" if old.get("problem_pattern") else "", old.get("risk") or ""]
    return {"contract_type": "、".join(t for t in old.get("contract_types") or [] if t),
            "knowledge_title": old.get("title") or "", "target_clause": "",
            "review_points": "\n".join(r for r in review if r), "action_plan": old.get("note") or "",
            "clause_sample": old.get("recommended_clause") or ""}


def _upgrade_0_9(turn: dict[str, Any]) -> dict[str, Any]:
    state = turn["state"]
    knowledge = turn.get("knowledge_json")
    return {"control": {"schema_version": "1.0", "mode": turn["control"]["mode"]},
            "state": {"phase": state["phase"], "missing_info": list(state.get("missing_info") or [])},
            "assistant_message": turn["assistant_message"],
            "knowledge_json": None if knowledge is None else _entry_from_0_9(knowledge)}


register("1.0", _validate_1_0, description="current: knowledge_json with the six entry fields")
register("0.9", _validate_0_9, _upgrade_0_9, upgrades_to="1.0",
         description="seed 003 §3.4 draft: title / contract_types / problem_pattern / risk / recommended_clause / note")

__all__ = ["CURRENT_VERSION", "SchemaVersion", "SchemaVersionError", "current_version", "describe", "register",
           "registered_versions", "upgrade", "upgrade_chat", "upgrade_entry", "validate_stored", "version_of"]
