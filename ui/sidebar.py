"""The sidebar's provider block (every configured provider: OpenAI-compatible, Bedrock, Gemini, watsonx; a
provider whose SDK is missing says which extra to install; switching keeps the conversation), with the model,
strategy chain, which one is active, whether the server serves the configured model, the context size it
said; and, after the page, the timeouts with the one that fired last, and the debug toggle."""
from __future__ import annotations

from datetime import datetime

import streamlit as st

from core.llm.base import TIMERS_JA, ProviderError
from core.llm.registry import PROVIDER_LABELS, ProviderRegistry, describe, model_notice
from core.llm.strategies import ALL_STRATEGIES

STRATEGY_LABELS = {"structured_output": "ネイティブ JSON Schema", "tool_call": "ツール呼び出し",
                   "prompt_extract": "プロンプト指示 + 抽出"}
ONLINE = ("openai", "bedrock", "gemini", "watsonx")  # providers with a model name and a strategy chain


def render_sidebar() -> None:
    state = st.session_state
    registry: ProviderRegistry = state.provider_registry
    with st.sidebar:
        st.subheader("プロバイダー")
        names = registry.available()
        current = getattr(state.llm_client, "name", registry.active_name)
        choice = st.selectbox("使用するモデル", names, index=names.index(current) if current in names else 0,
                              format_func=lambda n: PROVIDER_LABELS.get(n, n), key="provider_choice",
                              placeholder="選択してください")
        model = registry.model_of(choice)
        strategies = tuple(getattr(state.llm_client, "strategies", registry.settings.strategies))
        if choice in ONLINE:
            if choice == "openai" and not registry.settings.online_configured:
                st.warning("OPENAI_API_KEY / OPENAI_BASE_URL が未設定です。環境変数または .streamlit/secrets.toml に設定してください。")
            model = st.text_input("モデル名 / デプロイ名", value=model, key="model_name" if choice == "openai" else f"model_name_{choice}")
            picked = st.multiselect("構造化出力の方式（この順にフォールバック）", list(ALL_STRATEGIES),
                                    default=list(strategies), format_func=lambda s: STRATEGY_LABELS[s],
                                    placeholder="選択してください", key="strategy_chain", select_all=False)
            strategies = tuple(picked) or strategies
        changed = (choice != current or (choice in ONLINE and (model != getattr(state.llm_client, "model", model)
                   or strategies != tuple(getattr(state.llm_client, "strategies", ())))))
        if changed and getattr(state.llm_client, "name", "") != "scripted":
            try:  # the conversation (chat, outputs) is kept: only the client changes
                state.llm_client = registry.set_active(choice, model=model, strategies=strategies)
            except ProviderError as err:  # its SDK (an optional extra) is not installed
                st.error(str(err), icon="📦")
        if registry.notice:
            st.warning(registry.notice, icon="📦")
        active = state.llm_client
        if getattr(active, "name", "") not in ONLINE:
            icon, reason = "🟡", "（オンラインのモデルは使っていません）"
        elif getattr(active, "name", "") != "openai" or registry.settings.online_configured:
            icon, reason = "🟢", ""
        else:
            icon, reason = "🔴", "（API キーも接続先 URL も未設定のため呼び出せません）"
        st.markdown(f"{icon} **有効:** {describe(active)}{reason}")
        st.caption("方式: " + " → ".join(STRATEGY_LABELS.get(s, s) for s in getattr(active, "strategies", ())))
        notice = model_notice(active)
        if notice:
            st.warning(notice, icon="⚠️")
        info = getattr(active, "server_info", None)
        if info is not None and getattr(info, "reachable", False):
            served = info.served_model or "?"
            context = f" · コンテキスト {active.context_tokens} トークン" if getattr(active, "context_tokens", None) else ""
            st.caption(f"サーバーの応答モデル: {served}{context}")


def render_timeouts() -> None:
    """The timeouts in force and the one that fired last on this tab's client (drawn after the page)."""
    state = st.session_state
    client = state.llm_client
    if getattr(client, "name", "") not in ONLINE:
        return
    settings = state.provider_registry.settings
    st.caption(f"⏱ タイムアウト: 最初のトークン {settings.first_token_seconds:g} 秒（待ち行列を含む）· "
               f"トークン間 {settings.token_gap_seconds:g} 秒 · ターン全体 {settings.deadline_seconds:g} 秒")
    fired = getattr(client, "last_timeout", None)
    if fired:
        when = datetime.fromtimestamp(fired.get("at") or 0).strftime("%H:%M:%S")
        st.warning(f"直近のタイムアウト（{when}）: {TIMERS_JA.get(fired.get('timer'), fired.get('timer'))}"
                   f"（{fired.get('seconds')} 秒）", icon="⏱")


def render_debug_controls() -> None:
    """Drawn after the page so the record count includes the calls this run made."""
    state = st.session_state
    with st.sidebar:
        render_timeouts()
        st.divider()
        st.toggle("デバッグログを記録", value=state.debug_enabled, key="debug_toggle",
                  on_change=lambda: state.update(debug_enabled=state.debug_toggle))
        st.caption(f"このタブの記録: {len(state.debug_logs)} 件（全体はデバッグログのページ）")
