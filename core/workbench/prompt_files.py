"""Save an edited prompt as a new version in the store (admins only, recorded with who and when); every
process on the same database then uses it (see ``core.prompts``)."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from core.paths import PROMPTS_DIR
from core.prompts import reload_prompts, text_in_use
from core.store.prompt_versions import add_prompt_version, saved_prompts

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
    """Save ``content`` as the new version of prompt ``name`` in the store, with who / when and an audit
    row. The store is the truth: every console and API process on the same database uses the version
    from then on (``core.store.prompt_versions``); no file is written. Only an explicit call does this;
    PermissionError without ``prompt.write``, ValueError for an unknown prompt name or empty content.
    The text in use before (the file, the first time) is kept as a version too when the store has not
    seen it, so every state can be looked up by its hash and the saved version wins over that file."""
    can = getattr(identity, "can", None)
    if not callable(can) or not can("prompt.write"):
        raise PermissionError("プロンプトの保存（prompt.write）は管理者のみ行えます。")
    path = prompt_path(name, prompts_dir or PROMPTS_DIR)
    if not path.is_file():
        raise ValueError(f"プロンプト {name} は存在しません。")
    if not content.strip():
        raise ValueError("空のプロンプトは保存できません。")
    saved = saved_prompts(store)
    file_text = path.read_text(encoding="utf-8")
    previous_text = text_in_use(name, file_text.strip(), saved)
    previous = content_version(previous_text)
    if previous not in saved.known.get(name, frozenset()):  # the file, never saved: keep it as a version
        add_prompt_version(store, name, file_text, previous, identity, note="（保存前の内容）")
    row = add_prompt_version(store, name, content, content_version(content), identity, previous_version=previous,
                             note=note)
    reload_prompts()  # this process uses it at once; the others within KAIWA_PROMPT_REFRESH seconds
    return row
