"""Output limits: how many tokens one request may generate, fitted to the schema it must fill.

Every request the engine sends carries a limit (``max_completion_tokens``, or ``max_tokens`` on
servers that want the older name): without one, llama.cpp generates until the context is full, and a
small model that loops inside a JSON array runs for minutes. :func:`schema_output_tokens` estimates
the largest answer a schema asks for (strings by ``maxLength`` or a default, arrays by ``maxItems`` or
a default, enums by their longest value, keys and punctuation included) with room for the whitespace
small models put between tokens; :func:`output_limit` clamps that between a floor and the configured
cap (``KAIWA_MAX_OUTPUT_TOKENS``). Plain-text calls get ``TEXT_OUTPUT_TOKENS``.
"""
from __future__ import annotations

from typing import Any

from core.llm.messages import text_tokens

DEFAULT_MAX_OUTPUT_TOKENS = 2048  # KAIWA_MAX_OUTPUT_TOKENS: the cap on every request
MIN_OUTPUT_TOKENS = 64  # never ask for less (a repair after a cut answer doubles the limit, up to the cap)
TEXT_OUTPUT_TOKENS = 256  # a plain-text call (a tag, a short label)
STRING_TOKENS = 250  # a free string (a message to the user) without maxLength
ITEM_STRING_TOKENS = 60  # a free string inside an array (a list entry)
DEFAULT_ITEMS = 5  # an array without maxItems
FREE_OBJECT_TOKENS = 300  # an object without declared properties
WHITESPACE_FACTOR = 1.3  # grammar-constrained small models pretty-print with arbitrary whitespace
OVERHEAD_TOKENS = 16
MAX_DEPTH = 8


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part) if isinstance(target, dict) else None
    return target if isinstance(target, dict) else {}


def _tokens(node: Any, root: dict[str, Any], depth: int, in_array: bool) -> float:
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return 4.0
    node = _resolve(node, root)
    alternatives = [n for key in ("anyOf", "oneOf") for n in node.get(key) or [] if isinstance(n, dict)]
    if alternatives:
        return max(_tokens(n, root, depth + 1, in_array) for n in alternatives)
    if "const" in node:
        return text_tokens(str(node["const"])) + 2
    if isinstance(node.get("enum"), list) and node["enum"]:
        return max(text_tokens(str(v)) for v in node["enum"]) + 2
    types = node.get("type")
    types = types if isinstance(types, list) else [types]
    return max(_typed(t, node, root, depth, in_array) for t in types)


def _typed(kind: Any, node: dict[str, Any], root: dict[str, Any], depth: int, in_array: bool) -> float:
    if kind == "string":
        limit = node.get("maxLength")
        if isinstance(limit, int) and limit > 0:
            return min(limit, 20_000) * 1.2 + 2
        return (ITEM_STRING_TOKENS if in_array else STRING_TOKENS) + 2
    if kind in ("number", "integer"):
        return 6
    if kind in ("boolean", "null"):
        return 2
    if kind == "array":
        items = node.get("maxItems")
        count = items if isinstance(items, int) and items >= 0 else DEFAULT_ITEMS
        return min(count, 200) * (_tokens(node.get("items") or {}, root, depth + 1, True) + 1) + 2
    if kind == "object" or kind is None and isinstance(node.get("properties"), dict):
        props = node.get("properties")
        if not isinstance(props, dict) or not props:
            return FREE_OBJECT_TOKENS
        return sum(text_tokens(str(k)) + 3 + _tokens(v, root, depth + 1, in_array) for k, v in props.items()) + 2
    return 8


def schema_output_tokens(schema: dict[str, Any]) -> int:
    """The tokens of the largest answer ``schema`` asks for, with whitespace room (no floor or cap)."""
    return int(_tokens(schema, schema, 0, False) * WHITESPACE_FACTOR) + OVERHEAD_TOKENS


def output_limit(*schemas: dict[str, Any] | None, cap: int | None = None) -> int:
    """The output limit of a request that must fill every one of ``schemas`` (the full schema and its wire
    copy: the larger estimate counts; none: a plain-text call), within [floor, cap]."""
    cap = int(cap or DEFAULT_MAX_OUTPUT_TOKENS)
    given = [s for s in schemas if isinstance(s, dict)]
    wanted = max((schema_output_tokens(s) for s in given), default=TEXT_OUTPUT_TOKENS)
    return max(min(MIN_OUTPUT_TOKENS, cap), min(cap, wanted))
