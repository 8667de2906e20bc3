"""Outside text on the page: model output, uploads, user text, stored titles and names, error text from a
server. All of it goes through :mod:`core.text.markup`, so the browser never fetches or links anything
from it; these helpers are the one way pages put such text inside their own markdown."""
from __future__ import annotations

from core.text.markup import safe_markdown, safe_text

__all__ = ["plain", "safe_markdown", "safe_text"]


def plain(text: str | None) -> str:
    """Stored or user-supplied text (a title, a name) inside our own markdown: one line, literal text,
    never markup or a link."""
    return safe_text(text or "", single_line=True)
