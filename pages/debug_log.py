"""デバッグログ / プロンプト調整ワークベンチ (issue #9): every model call of every operator (from the
shared store), filterable; each record in full with its prompt version; replay of a call with an
edited prompt (old and new output side by side with our validator's verdict and a JSON diff); batch
replay of a change over many calls of one task; a recorded conversation turned into a ``core.eval``
scenario. The logic is in ``core.workbench``, the tabs in ``ui.workbench``; this page lays them out.

The list is one page of an indexed query (``core.store.debug_records``), shared by every session through
``ui.cache`` until a record is added; the record opened for replay is read alone by its id."""
from __future__ import annotations

import streamlit as st

from ui import cache
from ui.session import leave_pages_directory_mode, provider_caption, store
from ui.workbench import batch, promote, records, replay, reviewed

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

st.title("🪵 デバッグログ・プロンプト調整")
provider_caption()
state = st.session_state
if not state.get("debug_enabled"):
    st.info("このタブでのデバッグログの記録はオフです（サイドバーで切り替えられます）。他の操作者の記録は表示されます。")

if not store().debug_ids(limit=1):  # the newest record's id: one read of the primary key
    st.caption("まだ記録がありません。会話フローを実行すると、モデル呼び出しごとに 1 件記録されます。")
    st.stop()

filtered = records.page(records.filters())


TABS = ("記録", "再実行", "一括再実行", "シナリオ化", "レビュー済みセット")
TAB_KEY = "wb_tab"


def opened() -> dict | None:
    """The record opened for replay (``wb_record``): from this page of the list, else read alone by its id."""
    record_id = state.get("wb_record")
    if record_id is None:
        return None
    return next((r for r in filtered.records if r["id"] == record_id), None) or \
        store().get_debug_records([record_id]).get(record_id)


def open_in_replay_tab(record_id: int) -> None:
    """A record's 「再実行タブで開く」 button: open it for replay and show the replay tab."""
    replay.open_replay(record_id)
    state[TAB_KEY] = "再実行"


# Lazy tabs: only the open one runs (``.open``); switching tabs reruns the page. A rerun of the list does not
# build the replay editor, the batch form, the scenario (its YAML) or the reviewed set.
tab_records, tab_replay, tab_batch, tab_promote, tab_reviewed = st.tabs(list(TABS), key=TAB_KEY, on_change="rerun")
if tab_records.open:
    with tab_records:
        records.records_tab(filtered, open_in_replay_tab)
if tab_replay.open:
    with tab_replay:
        replay.replay_tab(filtered.records, opened())
if tab_batch.open:
    with tab_batch:
        batch.batch_tab(filtered.query, cache.debug_values("task"))
if tab_promote.open:
    if state.get("wb_record") is None and filtered.records:  # as the replay tab does: the newest record
        replay.open_replay(filtered.records[-1]["id"])
    with tab_promote:
        promote.promote_tab(filtered.conversation, opened() or {})
if tab_reviewed.open:
    with tab_reviewed:  # the reviewers' regression cases against this tab's provider and model (core.review.replay)
        reviewed.reviewed_tab()
