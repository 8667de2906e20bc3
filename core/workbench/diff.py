"""Readable differences between two outputs: a JSON path diff, or a line diff of plain text."""
from __future__ import annotations

import difflib
import json
import re
from typing import Any

from core.parsing import parse_with_stage

DIFF_VALUE_CHARS = 120  # a value in a diff line is cut to this many characters
MAX_DIFF_LINES = 300
MAX_TEXT_DIFF_CHARS = 20_000  # a non-JSON output is compared on its head only


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= DIFF_VALUE_CHARS else text[: DIFF_VALUE_CHARS - 1] + "…"


def _key_path(path: str, key: Any) -> str:
    key = str(key)
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def json_diff(old: Any, new: Any, *, limit: int = MAX_DIFF_LINES) -> list[str]:
    """Readable differences ``path: old → new`` (``（なし）`` for a side without the path), in
    document order; at most ``limit`` lines (then one line saying how many were left out)."""
    lines: list[str] = []
    missing = "（なし）"

    def walk(path: str, a: Any, b: Any, depth: int) -> None:
        if isinstance(a, dict) and isinstance(b, dict) and depth < 50:
            for key in list(a) + [k for k in b if k not in a]:
                if key not in b:
                    lines.append(f"{_key_path(path, key)}: {_show(a[key])} → {missing}")
                elif key not in a:
                    lines.append(f"{_key_path(path, key)}: {missing} → {_show(b[key])}")
                else:
                    walk(_key_path(path, key), a[key], b[key], depth + 1)
        elif isinstance(a, list) and isinstance(b, list) and depth < 50:
            for i in range(max(len(a), len(b))):
                here = f"{path}[{i}]"
                if i >= len(b):
                    lines.append(f"{here}: {_show(a[i])} → {missing}")
                elif i >= len(a):
                    lines.append(f"{here}: {missing} → {_show(b[i])}")
                else:
                    walk(here, a[i], b[i], depth + 1)
        elif a != b or type(a) is not type(b):
            lines.append(f"{path}: {_show(a)} → {_show(b)}")

    walk("$", old, new, 0)
    if len(lines) > limit:
        return lines[:limit] + [f"…（ほか {len(lines) - limit} 件の差分）"]
    return lines


def changed_fields(old: Any, new: Any) -> list[str]:
    """The top-level fields whose value differs (all of them when one side is not an object)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if old == new else ["$"]
    return [k for k in list(old) + [k for k in new if k not in old] if old.get(k, ...) != new.get(k, ...)]


def text_diff(old: str, new: str, *, limit: int = MAX_DIFF_LINES) -> list[str]:
    lines = list(difflib.unified_diff((old or "")[:MAX_TEXT_DIFF_CHARS].splitlines(),
                                      (new or "")[:MAX_TEXT_DIFF_CHARS].splitlines(),
                                      "旧出力", "新出力", lineterm="", n=1))
    return lines[:limit] + ([f"…（ほか {len(lines) - limit} 行）"] if len(lines) > limit else [])


def output_diff(old_raw: str, old_data: Any, new_raw: str, new_data: Any) -> list[str]:
    """The JSON diff when both outputs are JSON objects, else a line diff of the texts."""
    if old_data is None:
        old_data = parse_with_stage(old_raw or "").data
    if new_data is None:
        new_data = parse_with_stage(new_raw or "").data
    if isinstance(old_data, dict) and isinstance(new_data, dict):
        return json_diff(old_data, new_data)
    return text_diff(old_raw, new_raw)
