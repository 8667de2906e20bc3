"""Prompt templates: loading, ``{{name}}`` placeholder rendering, and which version is in use.

``{{name}}`` (not ``str.format``) so that JSON examples with braces stay as they are.

Where a text comes from: the file ``prompts/<name>.md`` (cached by its modification time), unless a
**prompt source** reports a saved version of that prompt. The source is injected from above at start-up
(``core.store.prompt_versions`` registers the store's, so a version an admin saves on one console host is
used by every console and API process sharing the database); this module never imports the store. The
rule (:func:`text_in_use`): the newest saved version is used while the local file holds a version the
source knows (the one it replaced, or any other saved one); a file whose content was never saved is newer
than every saved version (a deploy changed it) and is used instead. Without a source, the file is used.

:func:`draft_prompts` lets a tuner try unsaved texts: inside its ``with`` block, and in this thread only (the
Streamlit session or the run that asked), the given texts are served instead — nothing is saved, no other
session or process sees them.

``prompt_version(name)`` is the short sha256 of the text in use; :func:`served_version` is the version this
thread last rendered, so a debug record names the exact text its call was made with even when another
thread picked up a newer version meanwhile.
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterator, Mapping

from core.paths import PROMPTS_DIR

log = logging.getLogger(__name__)
_PLACEHOLDER = re.compile(r"\{\{([A-Za-z0-9_]{1,60})\}\}")  # templates are ours; values are never re-scanned


@dataclass(frozen=True)
class SavedPrompts:
    """What a prompt source reports: the newest saved content of each prompt, and every version saved."""

    newest: Mapping[str, str] = field(default_factory=dict)  # name -> content as saved, stripped
    known: Mapping[str, frozenset[str]] = field(default_factory=dict)  # name -> every saved version


PromptSource = Callable[[], "SavedPrompts | None"]
_source: PromptSource | None = None
_served = threading.local()  # .versions: {name: (generation, version)} this thread last rendered
_generation = 0  # bumped by set_prompt_source: versions served before it are forgotten


def set_prompt_source(source: PromptSource | None) -> None:
    """Serve saved versions from ``source`` (called on every load; it must answer from memory and
    check for changes only now and then), or only the files with ``None``."""
    global _source, _generation
    _source = source
    _generation += 1  # versions served from another source are forgotten
    reload_prompts()


def prompt_source() -> PromptSource | None:
    return _source


def _path(name: str):
    return PROMPTS_DIR / (name if "." in name else f"{name}.md")


@lru_cache(maxsize=256)
def _read(name: str, mtime_ns: int) -> str:
    return _path(name).read_text(encoding="utf-8").strip()


def _file_text(name: str) -> str | None:
    try:
        return _read(name, _path(name).stat().st_mtime_ns)
    except FileNotFoundError:
        return None


@lru_cache(maxsize=256)
def _version_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def version_of(text: str) -> str:
    """The version of a prompt text: the first 12 hex digits of the sha256 of the stripped text."""
    return _version_of(text.strip())


def text_in_use(name: str, file_text: str | None, saved: SavedPrompts | None) -> str | None:
    """The rule (module docstring): the newest saved content of ``name`` (stripped) unless the file holds
    content the source has never seen; the file otherwise; None when there is neither."""
    newest = saved.newest.get(name) if saved is not None else None
    if newest is None:
        return file_text
    if file_text is None or _version_of(file_text) in saved.known.get(name, frozenset()):
        return newest
    return file_text


def _saved() -> SavedPrompts | None:
    source = _source
    if source is None:
        return None
    try:
        return source()
    except Exception:  # noqa: BLE001 - a failing source must never stop a flow: the files still work
        log.warning("prompt source failed; using the prompt files", exc_info=True)
        return None


_drafts = threading.local()  # .texts: {name: unsaved text} served in this thread inside draft_prompts


@contextmanager
def draft_prompts(texts: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """Serve ``texts`` (``{name: unsaved text}``, stripped; empty texts ignored) instead of the texts in use,
    in this thread, until the block ends; yields ``{name: version}`` of the drafts. Never saved."""
    previous = getattr(_drafts, "texts", None)
    drafts = {name: str(text).strip() for name, text in (texts or {}).items() if str(text or "").strip()}
    _drafts.texts = {**(previous or {}), **drafts}
    try:
        yield {name: _version_of(text) for name, text in drafts.items()}
    finally:
        _drafts.texts = previous


def _current(name: str) -> str:
    draft = (getattr(_drafts, "texts", None) or {}).get(name)
    if draft is not None:
        return draft
    text = text_in_use(name, _file_text(name), _saved())
    if text is None:
        raise FileNotFoundError(f"prompt {name!r} not found in {PROMPTS_DIR}")
    return text


def load_prompt(name: str) -> str:
    """The text in use of ``prompts/<name>.md`` (or the exact file name when it has an extension)."""
    text = _current(name)
    versions = getattr(_served, "versions", None)
    if versions is None:
        versions = _served.versions = {}
    versions[name] = (_generation, _version_of(text))
    return text


def render(name: str, **values: object) -> str:
    """The template with its ``{{key}}`` placeholders filled in one pass: a value that itself contains
    ``{{other}}`` (user or document text) is inserted as it is, never filled again."""
    text = load_prompt(name)
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), text)


def prompt_version(name: str) -> str:
    """The version of the text in use of ``name`` ("" when there is no such prompt)."""
    try:
        return _version_of(_current(name))
    except (OSError, ValueError):
        return ""


def served_version(name: str) -> str:
    """The version of ``name`` this thread last loaded or rendered, else :func:`prompt_version`."""
    generation, version = (getattr(_served, "versions", None) or {}).get(name, (None, ""))
    return version if generation == _generation else prompt_version(name)


_names: dict[tuple[str, int], tuple[str, ...]] = {}  # (folder, its mtime) -> the names it held then


def prompt_names() -> list[str]:
    """Every prompt file's name (``.md`` without the suffix, other files with theirs), sorted. The listing is
    read again only when the folder changed (its mtime: a file added, removed or renamed), not on every
    debug record of every turn."""
    key = (str(PROMPTS_DIR), PROMPTS_DIR.stat().st_mtime_ns)
    names = _names.get(key)
    if names is None:
        names = tuple(sorted(p.stem if p.suffix == ".md" else p.name for p in PROMPTS_DIR.iterdir()
                             if p.is_file() and not p.name.startswith(".")))
        if len(_names) > 16:
            _names.clear()
        _names[key] = names
    return list(names)


def prompt_versions() -> dict[str, str]:
    """``{name: version}`` of every prompt: the one this thread last rendered, else the one in use."""
    return {name: served_version(name) for name in prompt_names()}


def reload_prompts() -> None:
    """Forget the cached texts and versions, and ask the source to look for changes on next use."""
    _read.cache_clear()
    _version_of.cache_clear()
    invalidate = getattr(_source, "invalidate", None)
    if callable(invalidate):
        invalidate()
