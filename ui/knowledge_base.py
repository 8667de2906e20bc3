"""The knowledge base at work, as widgets: similar confirmed entries beside the interview, the answer of
「ナレッジに質問」 with its citations, and links into the library (``pages/library.py?entry=<No.>``).

Every stored or model-written text goes through ``ui.safe`` (never markup that links or fetches)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import streamlit as st

from core.knowledge.confirmation import incomplete_label
from ui.safe import plain, safe_markdown

LIBRARY_PAGE = "pages/library.py"


def entry_link(entry_id: int, label: str = "ライブラリで開く") -> None:
    st.page_link(LIBRARY_PAGE, label=label, icon="📚", query_params={"entry": str(entry_id)}, help=f"No.{entry_id}")


def linked_entry(store: Any) -> dict[str, Any] | None:
    """The library entry named by ``?entry=<No.>`` in the URL (None when absent, malformed or unknown)."""
    raw = str(st.query_params.get("entry") or "").strip()
    if not raw.isdigit() or len(raw) > 12:
        return None
    return store.get_entry(int(raw))


def _hit_caption(hit: Any) -> str:
    entry = hit.entry
    parts = [plain(entry.get("contract_type")), plain(entry.get("target_clause")), f"類似度 {hit.score:.2f}",
             f"⚠️ {incomplete_label(entry).strip('（）')}" if incomplete_label(entry) else ""]
    return " · ".join(p for p in parts if p)


def similar_panel(find: Callable[[], Sequence[Any]], cache_key: Any) -> None:
    """似ている確定済みナレッジ: ``find()`` (the conversation's similar entries) shown with a link each.
    The result is kept in the session for ``cache_key`` (the conversation, its length and its drafts), so
    a rerun without a new turn does not search again."""
    cache = st.session_state.setdefault("_similar_cache", {})
    if cache.get("key") != cache_key:
        cache.clear()
        cache.update(key=cache_key, hits=list(find()))
    hits = cache["hits"]
    if not hits:
        return
    st.subheader("似ている確定済みナレッジ")
    st.caption("同じ論点のナレッジが既にあれば、新しく作る代わりにライブラリで追記・編集できます。")
    for hit in hits:
        with st.container(border=True):
            st.markdown(f"**No.{hit.entry_id} {plain(hit.title) or '（タイトル未設定）'}**")
            st.caption(_hit_caption(hit))
            entry_link(hit.entry_id)


def answer_view(last: Mapping[str, Any] | None) -> None:
    """The last answer of 「ナレッジに質問」: the text, then each cited entry (No., title, what was used)."""
    if not last:
        return
    if not last.get("ok"):
        st.error(last["answer"])
        st.caption("質問は入力欄に残っています。もう一度「質問する」を押してください。")
        return
    with st.chat_message("assistant"):
        st.markdown(safe_markdown(last["answer"]))
    sources = last.get("sources") or []
    if not sources:
        st.info("確定済みのナレッジに該当するものがありませんでした。言い方を変えるか、ナレッジライブラリで検索してください。"
                "新しい事例は「契約ナレッジ作成」で登録できます。")
        return
    st.markdown("**根拠にしたナレッジ**")
    for source in sources:
        with st.container(border=True):
            st.markdown(f"**No.{source['entry_id']} {plain(source['title']) or '（タイトル未設定）'}**")
            st.caption(" · ".join(x for x in (plain(source.get("contract_type")), f"類似度 {source['score']:.2f}") if x))
            if source.get("quote"):
                st.text(source["quote"])
            entry_link(source["entry_id"])
