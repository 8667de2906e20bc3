"""Prompt files under ``prompts/``: loading and ``{{name}}`` placeholder rendering.

``{{name}}`` (not ``str.format``) so that JSON examples with braces stay as they are.
``prompt_version(name)`` is the short sha256 of the text in use, so a debug record names the exact
template it was made with. Texts are cached by the file's modification time, so a version saved by
the workbench in any process on this host takes effect everywhere on the next call.
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from core.paths import PROMPTS_DIR

_PLACEHOLDER = re.compile(r"\{\{([A-Za-z0-9_]{1,60})\}\}")  # templates are ours; values are never re-scanned


def _path(name: str):
    return PROMPTS_DIR / (name if "." in name else f"{name}.md")


@lru_cache(maxsize=256)
def _read(name: str, mtime_ns: int) -> str:
    return _path(name).read_text(encoding="utf-8").strip()


def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.md`` (or the exact file name when it has an extension)."""
    return _read(name, _path(name).stat().st_mtime_ns)


def render(name: str, **values: object) -> str:
    """The template with its ``{{key}}`` placeholders filled in one pass: a value that itself contains
    ``{{other}}`` (user or document text) is inserted as it is, never filled again."""
    text = load_prompt(name)
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), text)


@lru_cache(maxsize=256)
def _version_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def prompt_version(name: str) -> str:
    """The first 12 hex digits of the sha256 of ``load_prompt(name)`` ("" when there is no such file)."""
    try:
        return _version_of(load_prompt(name))
    except (OSError, ValueError):
        return ""


def prompt_names() -> list[str]:
    """Every prompt file's name (``.md`` without the suffix, other files with theirs), sorted."""
    return sorted(p.stem if p.suffix == ".md" else p.name for p in PROMPTS_DIR.iterdir()
                  if p.is_file() and not p.name.startswith("."))


def prompt_versions() -> dict[str, str]:
    """``{name: prompt_version(name)}`` of every prompt file."""
    return {name: prompt_version(name) for name in prompt_names()}


def reload_prompts() -> None:
    """Forget the cached texts and versions: the files are read again on next use."""
    _read.cache_clear()
    _version_of.cache_clear()
