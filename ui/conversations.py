"""The conversation a flow page shows, kept in the URL (``?session=``), and the recent ones to reopen."""
from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from core.text.jst import jst
from ui.safe import plain
from ui.session import store

STATUS_LABELS = {"active": "進行中", "done": "完了", "expired": "期限切れ"}
UNKNOWN_CONVERSATION = "指定された会話（{id}）は見つからないか、有効期限が切れています。新しい会話を始めました。"


def bind_conversation(flow: str, *, load: Callable[[dict[str, Any]], bool | None], new: Callable[[], str]) -> str:
    """The conversation this page shows, kept in the URL (``?session=``): the one named there (loaded
    with ``load``, which may return False when it cannot), else the one this tab had, else a ``new()``
    one. An unknown or expired id gets a
    Japanese notice and a new conversation. A ``session`` of another flow (left in the URL by a page
    switch) is ignored."""
    state = st.session_state
    key = f"{flow}_conversation_id"
    requested = st.query_params.get("session")
    if requested and requested != state.get(key):
        conversation = store().get_conversation(requested)
        if (conversation is not None and conversation["flow"] == flow and conversation["status"] != "expired"
                and load(conversation) is not False):
            state[key] = requested
        elif conversation is None or conversation["flow"] == flow or not state.get(key):
            state[f"{flow}_notice"] = UNKNOWN_CONVERSATION.format(id=plain(requested[:40]))
            state[key] = None
    if not state.get(key):
        state[key] = new()
    if st.query_params.get("session") != state[key]:
        st.query_params["session"] = state[key]
    notice = state.pop(f"{flow}_notice", None)
    if notice:
        st.info(notice, icon="ℹ️")
    return state[key]


def open_conversation(conversation_id: str) -> None:
    """Button callback: show another conversation (the page loads it on this rerun)."""
    st.query_params["session"] = conversation_id


def recent_conversations(flow: str, current_id: str | None) -> None:
    """An expander listing the latest conversations of ``flow`` (title, time, status) to reopen."""
    rows = store().list_conversations(flow, limit=10)
    with st.expander(f"🕘 最近の会話（{len(rows)} 件）"):
        if not rows:
            st.caption("まだ保存された会話はありません。")
        for row in rows:
            title_col, button_col = st.columns([5, 1], vertical_alignment="center")
            marker = "▶ " if row["id"] == current_id else ""
            title_col.markdown(f"{marker}**{plain(row['title']) or '（無題）'}**  \n"
                               f"{jst(row['updated_at'])} · {STATUS_LABELS.get(row['status'], row['status'])} · "
                               f"{row['turn_count']} 件 · {plain(row['owner_label']) or '—'}")
            button_col.button("開く", key=f"open_{flow}_{row['id']}", on_click=open_conversation, args=(row["id"],),
                              disabled=row["id"] == current_id)
