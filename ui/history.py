"""How much of a long chat a page draws: the newest exchanges, and the earlier ones when asked for.

Every rerun draws a page's elements again, so a page that drew its whole history cost more on every rerun with
every turn (issue #25: from 2 to 20 turns a rerun of the FAQ, knowledge and diagnosis pages took 2.2–2.4 times
as long). The chat pages draw their newest :data:`SHOWN_EXCHANGES` exchanges and, above them, a toggle
「以前のやり取り N 件を表示」 that draws the rest; nothing of the conversation is dropped (the session and the
store keep it whole, and resuming a conversation shows the same)."""
from __future__ import annotations

from typing import Sequence, TypeVar

import streamlit as st

T = TypeVar("T")

SHOWN_EXCHANGES = 5  # a question and its answer each


def shown(items: Sequence[T], key: str, *, per_exchange: int = 1) -> list[tuple[int, T]]:
    """``(index, item)`` of the history items to draw, oldest first: the newest :data:`SHOWN_EXCHANGES`
    exchanges (``per_exchange`` items each: an FAQ turn is one, a chat transcript's question and answer two),
    or all of them when there are no more or the reader turned on the toggle (``key``) drawn here above them."""
    hidden = len(items) - SHOWN_EXCHANGES * per_exchange
    if hidden > 0:
        label = f"以前のやり取り {(hidden + per_exchange - 1) // per_exchange} 件を表示"
        if not st.toggle(label, key=key):
            return list(enumerate(items[hidden:], start=hidden))  # the drawn ones only: not the whole history
    return list(enumerate(items))
