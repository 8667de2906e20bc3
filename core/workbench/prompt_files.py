"""Save an edited prompt as a new version of its file (admins only, recorded with who and when)."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from core.paths import PROMPTS_DIR
from core.prompts import prompt_names, reload_prompts
from core.store.prompt_versions import add_prompt_version, get_prompt_version

PROMPT_NAME = re.compile(r"^[a-z0-9_]{1,80}(\.json)?$")


def content_version(content: str) -> str:
    """The version ``core.prompts.prompt_version`` gives a file with this content."""
    return hashlib.sha256(content.strip().encode("utf-8")).hexdigest()[:12]


def prompt_path(name: str, prompts_dir: Path = PROMPTS_DIR) -> Path:
    if not PROMPT_NAME.fullmatch(name or ""):
        raise ValueError(f"プロンプト名が不正です: {name!r}")
    return prompts_dir / (name if "." in name else f"{name}.md")


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_prompt_version(name: str, content: str, identity: Any, store: Any, *, note: str = "",
                        prompts_dir: Path | None = None) -> dict[str, Any]:
    """Write ``content`` as the new ``prompts/<name>.md`` and record the version with who / when (and
    an audit row). Only an explicit call does this; PermissionError without ``prompt.write``,
    ValueError for an unknown prompt name or empty content. The previous content is kept as a version
    too (the first time a file is saved), so every saved state can be looked up by its hash."""
    can = getattr(identity, "can", None)
    if not callable(can) or not can("prompt.write"):
        raise PermissionError("プロンプトの保存（prompt.write）は管理者のみ行えます。")
    directory = prompts_dir or PROMPTS_DIR
    path = prompt_path(name, directory)
    if prompts_dir is None and name not in prompt_names():
        raise ValueError(f"プロンプト {name} は存在しません。")
    if not content.strip():
        raise ValueError("空のプロンプトは保存できません。")
    previous_text = path.read_text(encoding="utf-8") if path.exists() else None
    previous = content_version(previous_text) if previous_text is not None else None
    version = content_version(content)
    if previous_text is not None and get_prompt_version(store, name, previous) is None:
        add_prompt_version(store, name, previous_text, previous, identity, note="（保存前の内容）")
    text = content if content.endswith("\n") else content + "\n"
    saved = add_prompt_version(store, name, content, version, identity, previous_version=previous, note=note,
                               write=lambda: atomic_write(path, text))
    reload_prompts()
    return saved
