"""Outside text on the page: model output, uploads, user text, stored titles and names, error text from a
server, URL parameters. All of it goes through :mod:`core.text.markup`, so the browser never fetches or
links anything from it; these helpers are the one way pages put such text on the page:

- :func:`plain` — one line of outside text inside our own markdown (a title, a name, a file name, an id);
- :func:`lines` — several lines of outside text, shown literally with their line breaks (error texts);
- :func:`safe_markdown` — outside markdown (chat messages): formatting kept, no image, link or HTML;
- :func:`table` — ``st.dataframe`` of a table whose cells are outside text: every cell also made safe
  for a spreadsheet (:mod:`core.text.spreadsheet`), because the table's own download button writes
  the cells as they are.
"""
from __future__ import annotations

from typing import Any

import streamlit as st

from core.text.markup import safe_markdown, safe_text
from core.text.spreadsheet import safe_frame

__all__ = ["lines", "plain", "safe_markdown", "safe_text", "table"]


def plain(text: Any) -> str:
    """Stored or user-supplied text (a title, a name) inside our own markdown: one line, literal text,
    never markup or a link."""
    return safe_text("" if text is None else str(text), single_line=True)


def lines(text: Any) -> str:
    """Outside text of several lines (a server's error message, validation errors): literal, line
    breaks kept, never markup or a link."""
    return safe_text("" if text is None else str(text))


def table(data: Any, **kwargs: Any) -> Any:
    """``st.dataframe`` of ``data`` with every cell safe for a spreadsheet (its download button)."""
    return st.dataframe(safe_frame(data), **kwargs)
