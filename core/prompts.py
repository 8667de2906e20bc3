"""Prompt files under ``prompts/``: loading and ``{{name}}`` placeholder rendering.

``{{name}}`` (not ``str.format``) so that JSON examples with braces stay as they are.
"""
from __future__ import annotations

from functools import lru_cache

from core.paths import PROMPTS_DIR


@lru_cache(maxsize=None)
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.md`` (or the exact file name when it has an extension)."""
    path = PROMPTS_DIR / (name if "." in name else f"{name}.md")
    return path.read_text(encoding="utf-8").strip()


def render(name: str, **values: object) -> str:
    text = load_prompt(name)
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", str(value))
    return text
