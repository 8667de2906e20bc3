"""デバッグログ: every model call as a filterable table, each expandable to messages and raw output."""
from __future__ import annotations

import json

import streamlit as st

from core.debuglog import records_table, to_jsonl
from pages.common import provider_caption

st.title("🪵 デバッグログ")
provider_caption()
records = st.session_state.debug_logs
if not st.session_state.get("debug_enabled"):
    st.info("デバッグログの記録はオフです（サイドバーで切り替えられます）。")
if not records:
    st.caption("まだ記録がありません。会話フローを実行すると、モデル呼び出しごとに 1 件記録されます。")
else:
    table = records_table(records)
    col1, col2, col3, col4 = st.columns(4)
    flows = col1.multiselect("フロー", sorted(table["flow"].unique()), key="f_flow")
    outcomes = col2.multiselect("結果", sorted(table["outcome"].unique()), key="f_outcome")
    strategies = col3.multiselect("方式", sorted(table["strategy"].unique()), key="f_strategy")
    text = col4.text_input("出力・エラーを検索", key="f_text")
    mask = table.index == table.index
    if flows:
        mask &= table["flow"].isin(flows)
    if outcomes:
        mask &= table["outcome"].isin(outcomes)
    if strategies:
        mask &= table["strategy"].isin(strategies)
    if text:
        mask &= [text in (r.get("raw_output") or "") or text in " ".join(r.get("errors") or []) for r in records]
    shown = table[mask]
    st.dataframe(shown, width="stretch", hide_index=False)
    st.download_button("JSONL をダウンロード", to_jsonl([records[i] for i in shown.index]), file_name="debug_logs.jsonl",
                       mime="application/jsonl", key="dl_debug")
    if st.button("ログを消去", key="clear_debug"):
        st.session_state.debug_logs.clear()
        st.rerun()

    for i in reversed(list(shown.index)[-50:]):
        r = records[i]
        title = f"#{i} {r['time']} · {r['flow']}/{r['step']} · {r['strategy']} · 試行 {r['attempt']} · {r['outcome']} · {r['latency_ms']} ms"
        with st.expander(title):
            st.markdown(f"**プロバイダー:** {r['provider']} / {r['model']} · **種別:** {r['kind']} · **パース段階:** {r.get('parse_stage') or '—'} · **トークン:** {r.get('usage') or '—'}")
            if r.get("errors"):
                st.error("\n".join(r["errors"]))
            st.markdown("**送信したメッセージ**")
            for m in r["messages"]:
                st.text(f"[{m['role']}]\n{m['content']}")
            if r.get("response_format"):
                st.markdown("**response_format**")
                st.code(json.dumps(r["response_format"], ensure_ascii=False, indent=2), language="json")
            if r.get("tools"):
                st.markdown("**tools**")
                st.code(json.dumps(r["tools"], ensure_ascii=False, indent=2), language="json")
            st.markdown("**生出力**")
            st.code(r.get("raw_output") or "（なし）", language="json")
