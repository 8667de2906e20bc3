"""Session-state setup and the sidebar shared by every page (provider, model, strategy, debug)."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import streamlit as st

from core.config import load_settings
from core.store import Store, get_store
from core.store.debug_sink import StoredDebugLog
from core.llm.registry import PROVIDER_LABELS, ProviderRegistry, describe
from core.llm.strategies import ALL_STRATEGIES

logger = logging.getLogger(__name__)
JST = timezone(timedelta(hours=9))
STATUS_LABELS = {"active": "進行中", "done": "完了", "expired": "期限切れ"}
UNKNOWN_CONVERSATION = "指定された会話（{id}）は見つからないか、有効期限が切れています。新しい会話を始めました。"

STRATEGY_LABELS = {"structured_output": "ネイティブ JSON Schema", "tool_call": "ツール呼び出し",
                   "prompt_extract": "プロンプト指示 + 抽出"}


def _secrets() -> dict[str, Any]:
    try:
        return dict(st.secrets)
    except Exception:  # no secrets.toml: environment variables only
        return {}


def init_session() -> None:
    """Seed 001 keys: chat, knowledge_outputs, llm_client, debug_logs (plus the registry)."""
    state = st.session_state
    if "provider_registry" not in state:
        settings = load_settings(secrets=_secrets())
        state.provider_registry = ProviderRegistry(settings)
        state.debug_enabled = settings.debug  # plain state; the sidebar toggle updates it
    state.setdefault("session_id", "")  # the knowledge conversation's id, set by the knowledge page
    state.setdefault("chat", [])
    state.setdefault("knowledge_outputs", [])
    if not isinstance(state.get("debug_logs"), StoredDebugLog):
        state.debug_logs = StoredDebugLog(store())
    state.debug_logs.owner = identity()
    if "llm_client" not in state:
        state.llm_client = state.provider_registry.get_active()


def leave_pages_directory_mode() -> None:
    """Called first by every page. Because this folder is named ``pages/``, a fresh server's very first
    visit straight to a page URL (a bookmark, a reload after a restart) runs that page alone, in
    Streamlit's old pages-directory mode, without ``app.py``. Switch the process to ``app.py``'s
    ``st.navigation`` once and rerun: the same URL then runs ``app.py`` first, as every later visit does."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory and "provider_registry" not in st.session_state:  # app.py never ran
        PagesManager.uses_pages_directory = False
        st.rerun()


def store() -> Store:
    """The shared store (SQLite file by default, ``KAIWA_DB_URL`` for PostgreSQL); a page stops with a
    Japanese message when the database cannot be opened."""
    try:
        return get_store()
    except Exception:  # noqa: BLE001 - show the operator what to fix, never a traceback
        logger.exception("could not open the store")
        st.error("データベースに接続できません。KAIWA_DB_URL の設定とデータベースの状態を確認してください。")
        st.stop()
        raise


def identity():
    """Who is using this tab (OIDC, trusted proxy header, or the typed name)."""
    from pages.identity import current_identity

    return current_identity()


def jst(iso: str | None) -> str:
    """A stored UTC timestamp as Japan time for the UI."""
    if not iso:
        return "—"
    try:
        return datetime.fromisoformat(iso).astimezone(JST).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso[:40]


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
            state[f"{flow}_notice"] = UNKNOWN_CONVERSATION.format(id=requested[:40])
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


def plain(text: str | None) -> str:
    """Stored or user-supplied text (a title, a name) inside our own markdown: one line, literal text,
    never markup or a link."""
    from core.markup import safe_text

    return safe_text(text or "", single_line=True)


def debug_sink() -> list[dict[str, Any]] | None:
    """The list to append debug records to, or None when debug mode is off."""
    return st.session_state.debug_logs if st.session_state.get("debug_enabled") else None


def provider_caption() -> None:
    st.caption(f"🔌 {describe(st.session_state.llm_client)}")


def render_sidebar() -> None:
    state = st.session_state
    registry: ProviderRegistry = state.provider_registry
    with st.sidebar:
        st.subheader("プロバイダー")
        names = registry.available()
        current = getattr(state.llm_client, "name", registry.active_name)
        choice = st.selectbox("使用するモデル", names, index=names.index(current) if current in names else 0,
                              format_func=lambda n: PROVIDER_LABELS.get(n, n), key="provider_choice")
        model = registry.settings.openai_model
        strategies = tuple(getattr(state.llm_client, "strategies", registry.settings.strategies))
        if choice == "openai":
            if not registry.settings.online_configured:
                st.warning("OPENAI_API_KEY / OPENAI_BASE_URL が未設定です。環境変数または .streamlit/secrets.toml に設定してください。")
            model = st.text_input("モデル名 / デプロイ名", value=model, key="model_name")
            picked = st.multiselect("構造化出力の方式（この順にフォールバック）", list(ALL_STRATEGIES),
                                    default=list(strategies), format_func=lambda s: STRATEGY_LABELS[s],
                                    placeholder="選択してください", key="strategy_chain")
            strategies = tuple(picked) or strategies
        changed = (choice != current or (choice == "openai" and (model != getattr(state.llm_client, "model", model)
                   or strategies != tuple(getattr(state.llm_client, "strategies", ())))))
        if changed and getattr(state.llm_client, "name", "") != "scripted":
            state.llm_client = registry.set_active(choice, model=model, strategies=strategies)
        active = state.llm_client
        if getattr(active, "name", "") != "openai":
            icon, reason = "🟡", "（オンラインのモデルは使っていません）"
        elif registry.settings.online_configured:
            icon, reason = "🟢", ""
        else:
            icon, reason = "🔴", "（API キーも接続先 URL も未設定のため呼び出せません）"
        st.markdown(f"{icon} **有効:** {describe(active)}{reason}")
        st.caption("方式: " + " → ".join(STRATEGY_LABELS.get(s, s) for s in getattr(active, "strategies", ())))


def render_debug_controls() -> None:
    """Drawn after the page so the record count includes the calls this run made."""
    state = st.session_state
    with st.sidebar:
        st.divider()
        st.toggle("デバッグログを記録", value=state.debug_enabled, key="debug_toggle",
                  on_change=lambda: state.update(debug_enabled=state.debug_toggle))
        st.caption(f"このタブの記録: {len(state.debug_logs)} 件（全体はデバッグログのページ）")
