"""デバッグログ / プロンプト調整ワークベンチ (issue #9): every model call of every operator (from the
shared store), filterable; each record in full with its prompt version; replay of a call with an
edited prompt (old and new output side by side with our validator's verdict and a JSON diff); batch
replay of a change over many calls of one task; a recorded conversation turned into a ``core.eval``
scenario. The logic is in ``core.workbench``, the tabs in ``ui.workbench``; this page lays them out."""
from __future__ import annotations

import streamlit as st

from core import workbench as wb
from ui.session import leave_pages_directory_mode, provider_caption, store
from ui.workbench import batch, promote, records, replay

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

st.title("🪵 デバッグログ・プロンプト調整")
provider_caption()
state = st.session_state
if not state.get("debug_enabled"):
    st.info("このタブでのデバッグログの記録はオフです（サイドバーで切り替えられます）。他の操作者の記録は表示されます。")

stamp = store().debug_records_stamp()  # reruns reuse the parsed records until one is added or deleted
if state.get("wb_records_cache", (None,))[0] != stamp:
    loaded = store().list_debug_records(limit=1000)
    state.wb_records_cache = (stamp, loaded, wb.records_frame(loaded))
_, all_records, frame = state.wb_records_cache
if not all_records:
    st.caption("まだ記録がありません。会話フローを実行すると、モデル呼び出しごとに 1 件記録されます。")
    st.stop()
by_id = {r["id"]: r for r in all_records}

filtered = records.filters(all_records, frame)
tab_records, tab_replay, tab_batch, tab_promote = st.tabs(["記録", "再実行", "一括再実行", "シナリオ化"])
with tab_records:
    records.records_tab(filtered, len(all_records), replay.open_replay)
with tab_replay:
    replay.replay_tab(filtered.records, by_id)
with tab_batch:
    batch.batch_tab(filtered.records, records.options(frame, "task"))
with tab_promote:
    promote.promote_tab(filtered.conversation, by_id.get(state.get("wb_record")) or {})
