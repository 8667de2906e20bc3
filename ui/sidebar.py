"""The sidebar's provider block (provider, model, strategy chain, which one is active) and debug toggle."""
from __future__ import annotations

import streamlit as st

from core.llm.registry import PROVIDER_LABELS, ProviderRegistry, describe
from core.llm.strategies import ALL_STRATEGIES

STRATEGY_LABELS = {"structured_output": "ネイティブ JSON Schema", "tool_call": "ツール呼び出し",
                   "prompt_extract": "プロンプト指示 + 抽出"}


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
