"""JSON Schema files: loading, Draft 2020-12 validators, and the OpenAI strict-mode wire copy.

Our own validation always uses the full schema from ``schemas/``; ``to_strict_schema`` only builds
the copy sent to a provider whose strict mode rejects some keywords.
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

from core.paths import SCHEMAS_DIR

# Keywords OpenAI strict mode rejects (seed 000 §12: uniqueItems, pattern, minItems/maxItems), plus
# the other validation-only keywords it does not accept. They stay in our own validation.
STRICT_UNSUPPORTED_KEYWORDS = frozenset({
    "$schema", "$id", "title", "default", "examples",
    "minLength", "maxLength", "pattern", "format",
    "uniqueItems", "minItems", "maxItems", "contains", "minContains", "maxContains",
    "minProperties", "maxProperties", "patternProperties", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems",
})


@lru_cache(maxsize=64)  # the files in schemas/ (a dozen): bounded all the same
def _load_text(name: str) -> str:
    path = SCHEMAS_DIR / (name if name.endswith(".json") else f"{name}.schema.json")
    return path.read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    """Load ``schemas/<name>.schema.json`` (a fresh copy each call, safe to mutate)."""
    return json.loads(_load_text(name))


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A Draft 2020-12 validator for ``schema``.

    Built per call on purpose: construction is cheaper than hashing the schema for a cache
    (``python -m bench.engine`` measures both); schema files are checked once by the tests.
    """
    return Draft202012Validator(schema)


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """Every validation error as ``$.json.path: message``, in document order."""
    errors = sorted(validator(schema).iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{e.json_path}: {e.message}" for e in errors]


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    types = node.get("type")
    if isinstance(types, str):
        if types != "null":
            node["type"] = [types, "null"]
        return node
    if isinstance(types, list):
        if "null" not in types:
            node["type"] = [*types, "null"]
        return node
    if "enum" in node:
        if None not in node["enum"]:
            node["enum"] = [*node["enum"], None]
        return node
    return {"anyOf": [node, {"type": "null"}]}


def _strict_node(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict_node(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict_node(v) for k, v in node.items() if k not in STRICT_UNSUPPORTED_KEYWORDS}
    if "const" in out:  # strict mode is safest with enum
        out["enum"] = [out.pop("const")]
    types = out.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types) or "properties" in out
    if is_object:
        props = out.get("properties", {})
        required = set(node.get("required", []))
        out["properties"] = {
            key: (value if key in required else _nullable(value)) for key, value in props.items()
        }
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


def to_strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Wire copy for OpenAI strict mode: every property required (optional ones made nullable),
    ``additionalProperties: false`` on every object, unsupported keywords removed, const → enum. A new
    object throughout (every dict and list is built anew; ``schema`` is not changed), without a deep copy
    of ``schema`` first (it was one on every structured call)."""
    return _strict_node(schema)


def embed_entry_schema(turn_schema: dict[str, Any], entry_schema: dict[str, Any]) -> dict[str, Any]:
    """Turn schema whose ``knowledge_json`` is the entry schema or null.

    Strict mode cannot express a free-form object, so the wire copy of the knowledge turn spells
    out the entry's fields; our own validation checks the two schemas separately.
    """
    combined = copy.deepcopy(turn_schema)
    entry = {k: v for k, v in copy.deepcopy(entry_schema).items() if k not in {"$schema", "title"}}
    description = combined["properties"]["knowledge_json"].get("description")
    combined["properties"]["knowledge_json"] = {"anyOf": [entry, {"type": "null"}]}
    if description:
        combined["properties"]["knowledge_json"]["description"] = description
    return combined
