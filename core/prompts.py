"""Prompt files under ``prompts/``: loading and ``{{name}}`` placeholder rendering.

``{{name}}`` (not ``str.format``) so that JSON examples with braces stay as they are.
``prompt_version(name)`` is the short sha256 of the text in use, so a debug record names the exact
template it was made with; :func:`reload_prompts` makes a changed file take effect in this process.
"""
from __future__ import annotations

import hashlib
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


@lru_cache(maxsize=None)
def prompt_version(name: str) -> str:
    """The first 12 hex digits of the sha256 of ``load_prompt(name)`` ("" when there is no such file)."""
    try:
        text = load_prompt(name)
    except (OSError, ValueError):
        return ""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def prompt_names() -> list[str]:
    """Every prompt file's name (``.md`` without the suffix, other files with theirs), sorted."""
    return sorted(p.stem if p.suffix == ".md" else p.name for p in PROMPTS_DIR.iterdir()
                  if p.is_file() and not p.name.startswith("."))


def prompt_versions() -> dict[str, str]:
    """``{name: prompt_version(name)}`` of every prompt file."""
    return {name: prompt_version(name) for name in prompt_names()}


def reload_prompts() -> None:
    """Forget the cached texts and versions: the files are read again on next use."""
    load_prompt.cache_clear()
    prompt_version.cache_clear()
