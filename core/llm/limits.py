"""Output limits: how many tokens one request may generate, fitted to the schema it must fill.

Every request the engine sends carries a limit (``max_completion_tokens``, or ``max_tokens`` on
servers that want the older name): without one, llama.cpp generates until the context is full, and a
small model that loops inside a JSON array runs for minutes. :func:`schema_output_tokens` estimates
the largest answer a schema asks for (strings by ``maxLength`` or a default, arrays by ``maxItems`` or
a default, enums by their longest value, keys and punctuation included) with room for the whitespace
small models put between tokens; :func:`output_limit` clamps that between a floor and the configured
cap (``KAIWA_MAX_OUTPUT_TOKENS``). Plain-text calls get ``TEXT_OUTPUT_TOKENS``.

**Sized to the answer** (issue #26): a schema's own bounds are loose (a message without ``maxLength`` may
be 250 tokens, five such fields make 2,048), and a small model that runs away fills whatever it is given
(150–180 s a turn). ``data/output_limits.json`` holds, per task (= schema name), what its text can need,
measured on the scenario set (``python -m bench.output_sizes --write``: the longest schema-valid output of
the offline provider × 1.5); :func:`output_limit` takes the smaller of that and the schema's estimate. A
task the set never produced keeps the estimate. ``KAIWA_OUTPUT_LIMITS=schema`` turns the table off.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any

from core.llm.messages import text_tokens
from core.paths import DATA_DIR

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
OUTPUT_LIMITS_PATH = DATA_DIR / "output_limits.json"
OUTPUT_LIMITS_ENV = "KAIWA_OUTPUT_LIMITS"  # "schema": the schema's estimate only (the measured table off)


@lru_cache(maxsize=1)
def _measured() -> dict[str, int]:
    try:
        table = json.loads(OUTPUT_LIMITS_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): int(v["limit"]) for k, v in table.items()
            if isinstance(v, dict) and isinstance(v.get("limit"), int) and v["limit"] > 0}


def measured_limit(task: str | None) -> int | None:
    """The measured output limit of ``task`` (``data/output_limits.json``), or None."""
    if not task or (os.environ.get(OUTPUT_LIMITS_ENV) or "").strip().lower() == "schema":
        return None
    return _measured().get(task)


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


def output_limit(*schemas: dict[str, Any] | None, cap: int | None = None, task: str | None = None) -> int:
    """The output limit of a request that must fill every one of ``schemas`` (the full schema and its wire
    copy: the larger estimate counts; none: a plain-text call), no more than ``task``'s measured need,
    within [floor, cap]."""
    cap = int(cap or DEFAULT_MAX_OUTPUT_TOKENS)
    given = [s for s in schemas if isinstance(s, dict)]
    wanted = max((schema_output_tokens(s) for s in given), default=TEXT_OUTPUT_TOKENS)
    measured = measured_limit(task)
    if measured is not None:
        wanted = min(wanted, measured)
    return max(min(MIN_OUTPUT_TOKENS, cap), min(cap, wanted))
