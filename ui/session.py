"""Session state and the shared store for every page: seed 001's keys (``chat``, ``knowledge_outputs``,
``llm_client``, ``debug_logs``), the provider registry, who is using this tab, where debug records go."""
from __future__ import annotations

import logging
from typing import Any

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from core.identity import Identity
from core.llm.registry import ProviderRegistry, describe
from core.llm.settings import load_settings
from core.store import Store, get_store
from core.store.debug_sink import StoredDebugLog
from ui.identity import current_identity

logger = logging.getLogger(__name__)


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


def identity() -> Identity:
    """Who is using this tab (OIDC, trusted proxy header, or the typed name)."""
    return current_identity()


def debug_sink() -> list[dict[str, Any]] | None:
    """The list to append debug records to, or None when debug mode is off."""
    return st.session_state.debug_logs if st.session_state.get("debug_enabled") else None


def provider_caption() -> None:
    st.caption(f"🔌 {describe(st.session_state.llm_client)}")
