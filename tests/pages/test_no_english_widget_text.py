"""No English text of Streamlit's own on a page (issue #24): every multiselect leaves out the 「Select all」
option (``select_all=False``), and the uploader's texts are Japanese (``ui.uploader_text``)."""
from __future__ import annotations

import ast
from pathlib import Path

from ui.uploader_text import BUTTON_TEXT, uploader_css

ROOT = Path(__file__).resolve().parents[2]


def _calls(name: str):
    for path in [*(ROOT / "pages").glob("*.py"), *(ROOT / "ui").rglob("*.py"), ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == name:
                yield path.relative_to(ROOT), node


def test_every_multiselect_leaves_out_select_all():
    calls = list(_calls("multiselect"))
    assert calls
    missing = [f"{p}:{n.lineno}" for p, n in calls
               if not any(k.arg == "select_all" and getattr(k.value, "value", None) is False for k in n.keywords)]
    assert missing == []


def test_every_file_uploader_page_shows_the_japanese_texts():
    for path, _ in _calls("file_uploader"):
        assert "japanese_uploader(" in (ROOT / path).read_text(encoding="utf-8"), path
    css = uploader_css(25, "PDF")
    assert BUTTON_TEXT in css and "1 ファイル 25MB まで・PDF" in css and "per file" not in css
