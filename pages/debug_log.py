"""デバッグログ: every model call of every operator (from the shared store) as a filterable table, each
expandable to the rendered messages, the schema or tool sent, and the raw output."""
from __future__ import annotations

import json

import streamlit as st

from core.debuglog import records_table, to_jsonl
from pages.common import identity, jst, provider_caption, store

st.title("🪵 デバッグログ")
provider_caption()
state = st.session_state
if not state.get("debug_enabled"):
    st.info("このタブでのデバッグログの記録はオフです（サイドバーで切り替えられます）。他の操作者の記録は表示されます。")

conversation = st.text_input("会話 ID で絞り込む", value=st.query_params.get("conversation", ""), key="f_conversation",
                             max_chars=80).strip()
records = store().list_debug_records(conversation_id=conversation or None, limit=1000)
if not records:
    st.caption("まだ記録がありません。会話フローを実行すると、モデル呼び出しごとに 1 件記録されます。")
    st.stop()

table = records_table(records)
table["time"] = [jst(t) for t in table["time"]]
col1, col2, col3, col4 = st.columns(4)
flows = col1.multiselect("フロー", sorted(table["flow"].dropna().unique()), key="f_flow")
outcomes = col2.multiselect("結果", sorted(table["outcome"].dropna().unique()), key="f_outcome")
strategies = col3.multiselect("方式", sorted(table["strategy"].dropna().unique()), key="f_strategy")
text = col4.text_input("出力・エラーを検索", key="f_text", max_chars=200)
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
st.caption(f"{len(shown)} / {len(records)} 件（全操作者の最新 1,000 件まで・時刻は日本時間）")
st.dataframe(shown, width="stretch", hide_index=False)
st.download_button("JSONL をダウンロード", to_jsonl([records[i] for i in shown.index]), file_name="debug_logs.jsonl",
                   mime="application/jsonl", key="dl_debug")

who = identity()
if not state.get("confirm_clear_debug"):
    st.button("ログを消去", key="clear_debug", disabled=not who.can("debug.clear"),
              help=None if who.can("debug.clear") else "ログの消去は管理者のみ行えます。",
              on_click=lambda: state.update(confirm_clear_debug=True))
else:
    scope = f"会話 {conversation} の" if conversation else "全操作者の"
    st.warning(f"{scope}デバッグログをすべて消去します。元に戻せません。よろしいですか？")
    yes, no = st.columns(2)
    if yes.button("はい、消去する", key="clear_debug_yes", type="primary"):
        try:
            deleted = store().clear_debug_records(identity(), conversation_id=conversation or None)
            state.debug_logs.clear()
            st.toast(f"{deleted} 件を消去しました。", icon="🧹")
        except PermissionError as exc:
            st.error(str(exc))
        state.confirm_clear_debug = False
        st.rerun()
    no.button("キャンセル", key="clear_debug_no", on_click=lambda: state.update(confirm_clear_debug=False))

for i in reversed(list(shown.index)[-50:]):
    r = records[i]
    title = (f"#{r['id']} {jst(r.get('time'))} · {r.get('flow')}/{r.get('step')} · {r.get('strategy')} · "
             f"試行 {r.get('attempt')} · {r.get('outcome')} · {r.get('latency_ms')} ms")
    with st.expander(title):
        st.text(f"プロバイダー: {r.get('provider')} / {r.get('model')} · 種別: {r.get('kind')} · "
                f"パース段階: {r.get('parse_stage') or '—'} · トークン: {r.get('usage') or '—'} · "
                f"会話: {r.get('session_id') or '—'} · 操作者: {r.get('owner') or '—'}")
        if r.get("errors"):
            st.error("\n".join(r["errors"]))
        st.markdown("**送信したメッセージ**")
        for m in r.get("messages") or []:
            st.text(f"[{m.get('role')}]\n{m.get('content')}")
        if r.get("response_format"):
            st.markdown("**response_format**")
            st.code(json.dumps(r["response_format"], ensure_ascii=False, indent=2), language="json")
        if r.get("tools"):
            st.markdown("**tools**")
            st.code(json.dumps(r["tools"], ensure_ascii=False, indent=2), language="json")
        st.markdown("**生出力**")
        st.code(r.get("raw_output") or "（なし）", language="json")
