"""Getting a JSON object out of model text (seed 004 ``parseStructuredOutput``).

Stages, in order: the whole text, each fenced block (```json first, then bare ```), then the span
from the first ``{`` to the last ``}``. The stage that succeeded is recorded on the outcome.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

STAGE_DIRECT = "direct"
STAGE_CODE_BLOCK = "code_block"
STAGE_BRACES = "brace_extraction"

_JSON_FENCE = re.compile(r"```[ \t]*json[ \t]*\r?\n?(.*?)```", re.DOTALL | re.IGNORECASE)
_ANY_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ParseOutcome:
    data: dict[str, Any] | None
    stage: str | None


def _object_or_none(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text.strip())
    except (json.JSONDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def parse_with_stage(text: Any) -> ParseOutcome:
    """Like :func:`parse_structured_output`, also telling which stage succeeded."""
    if not isinstance(text, str) or not text.strip():
        return ParseOutcome(None, None)
    direct = _object_or_none(text)
    if direct is not None:
        return ParseOutcome(direct, STAGE_DIRECT)
    blocks = [m.group(1) for m in _JSON_FENCE.finditer(text)]
    blocks += [m.group(2) for m in _ANY_FENCE.finditer(text) if not m.group(1)]
    for block in blocks:
        found = _object_or_none(block)
        if found is not None:
            return ParseOutcome(found, STAGE_CODE_BLOCK)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        found = _object_or_none(text[start:end + 1])
        if found is not None:
            return ParseOutcome(found, STAGE_BRACES)
    return ParseOutcome(None, None)


def parse_structured_output(text: Any) -> dict[str, Any] | None:
    """A dict when the text holds a JSON object by any of the three stages, else None."""
    return parse_with_stage(text).data
