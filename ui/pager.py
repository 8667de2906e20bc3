"""A list read from the store one page at a time: the page number (reset when the filters change), the
pager under the table, and a row selection that follows an *item* (an entry id, a booking number), not a
row position.

The table's selection is kept as the id of the selected item (``<prefix>_selected``). A click is read as
"the row the user saw": the ids shown by the previous run (``<prefix>_shown``) map the selected row back
to an item. Each run then selects, in the table, the row where that item now stands (or none when it is
not on this page), so a list that re-sorts after a save or turns a page never shows the detail of another
item. :func:`follow` makes the list turn to the page that holds an item (after saving it).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Hashable, Sequence

import streamlit as st

PAGE_SIZE = 50


def current_offset(prefix: str, signature: Hashable, page_size: int = PAGE_SIZE) -> int:
    """The offset of the page to read: the pager's page, back to 1 when ``signature`` (the filters) changed
    since the last run. Call before the filters' results are read, and :func:`pager` after."""
    state = st.session_state
    key = f"{prefix}_page"
    if state.get(f"{prefix}_signature") != signature:
        state[f"{prefix}_signature"] = signature
        state[key] = 1
        state.pop(f"{prefix}_selected", None)  # new filters: nothing stays open from the old list
    follow_to = state.pop(f"{prefix}_follow_page", None)
    if follow_to is not None:
        state[key] = follow_to
    return (max(1, int(state.get(key) or 1)) - 1) * page_size


def clamp(prefix: str, total: int, page_size: int = PAGE_SIZE) -> int | None:
    """When the page asked for lies past the end (the list shrank), the last page's offset; else None."""
    state = st.session_state
    pages = max(1, math.ceil(total / page_size))
    if int(state.get(f"{prefix}_page") or 1) > pages:
        state[f"{prefix}_page"] = pages
        return (pages - 1) * page_size
    return None


def pager(prefix: str, total: int, shown: int, page_size: int = PAGE_SIZE) -> None:
    """「1–50 / 1,234 件」 and, when there is more than one page, the page number."""
    state = st.session_state
    pages = max(1, math.ceil(total / page_size))
    first = (int(state.get(f"{prefix}_page") or 1) - 1) * page_size
    left, right = st.columns([3, 1], vertical_alignment="center")
    left.caption(f"{first + 1:,}–{first + shown:,} / {total:,} 件。行を選ぶと詳細を表示します。" if shown else f"0 / {total:,} 件")
    if pages > 1:
        right.number_input(f"ページ（全 {pages:,} ページ）", min_value=1, max_value=pages, step=1,
                           key=f"{prefix}_page")


def selection(prefix: str, table_key: str, ids: Sequence[Any]) -> Any:
    """The selected item's id after this run's click (if any), with the table's selection set to the row
    where it now stands among ``ids`` (the items this run shows). Call before drawing the table."""
    state = st.session_state
    widget = state.get(table_key) or {}
    rows = list(((widget.get("selection") or {}).get("rows")) or [])
    if rows != state.get(f"{prefix}_rows", []):  # the user clicked a row of what the last run showed
        shown = state.get(f"{prefix}_shown", [])
        state[f"{prefix}_selected"] = shown[rows[0]] if rows and rows[0] < len(shown) else None
    selected = state.get(f"{prefix}_selected")
    wanted = [list(ids).index(selected)] if selected in ids else []
    if wanted != rows:
        state[table_key] = {"selection": {"rows": wanted, "columns": []}}
    state[f"{prefix}_rows"] = wanted
    state[f"{prefix}_shown"] = list(ids)
    return selected


def follow(prefix: str, item: Any, position: Callable[[], int | None], page_size: int = PAGE_SIZE) -> None:
    """Keep ``item`` selected and turn, on the next run, to the page where it now stands (``position``: its
    0-based place in the filtered list, None when the filters leave it out)."""
    state = st.session_state
    state[f"{prefix}_selected"] = item
    where = position()
    if where is not None:
        state[f"{prefix}_follow_page"] = where // page_size + 1
