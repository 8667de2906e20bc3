"""一括再実行: one change (system prompt, text replacement, temperature, model, strategies) replayed over
many recorded calls of one task, with counts of what it fixed and broke."""
from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from core import workbench as wb
from core.llm.strategies import ALL_STRATEGIES
from core.store.debug_records import DebugQuery
from ui import cache, safe
from ui.kept import keep, kept
from ui.session import store
from ui.sidebar import STRATEGY_LABELS
from ui.workbench.labels import method_label

BATCH_LABELS = {"record_id": "記録", "task": "タスク", "valid_before": "合格（前）", "valid_after": "合格（後）",
                "method_before": "方式（前）", "method_after": "方式（後）", "attempts": "試行", "repairs": "修復",
                "changed_fields": "変わった項目", "errors_after": "エラー（後）"}


def _summary(batch: pd.DataFrame) -> None:
    summary = wb.batch_summary(batch)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("合格（変更前）", f"{summary['valid_before']} / {summary['total']}")
    c2.metric("合格（変更後）", f"{summary['valid_after']} / {summary['total']}",
              delta=summary["valid_after"] - summary["valid_before"])
    c3.metric("修復の合計", summary["repairs"])
    c4.metric("改善 / 悪化", f"{summary['fixed']} / {summary['broken']}")
    st.caption("方式の内訳（変更後）: " + " · ".join(f"{method_label(k)} {v}" for k, v in summary["methods"].items()))
    safe.table(batch.rename(columns=BATCH_LABELS), hide_index=True, width="stretch")


BATCH_KEYS = ("wb_batch_task", "wb_batch_n", "wb_batch_strategies")


def follow_filter(query: DebugQuery) -> None:
    """When the filters change, the batch's task, count and strategies start again from them (a widget
    keeps its own value otherwise, and would replay a task the filter no longer shows)."""
    state = st.session_state
    mark = (query.tasks, query.methods, query.flows, query.conversation, query.outcomes, query.steps)
    if state.get("wb_batch_filter") != mark:
        state.wb_batch_filter = mark
        for key in BATCH_KEYS:
            state.pop(key, None)


def batch_tab(query: DebugQuery, task_options: list[str]) -> None:
    """A change replayed over the newest records of one task among those the filters match (read from the
    store only when the batch runs)."""
    state = st.session_state
    if not task_options:
        st.info("絞り込みに一致する記録がありません。")
        return
    follow_filter(query)
    options = [t for t in query.tasks if t in task_options] or task_options  # the filter's tasks, when it names some
    task = st.selectbox("タスク", options, key="wb_batch_task")
    same = replace(query, tasks=(task,))
    found = cache.debug_count(same) if not query.tasks or task in query.tasks else 0
    n = st.number_input("件数（新しい順）", 1, min(wb.MAX_BATCH, max(1, found)), min(10, max(1, found)),
                        key="wb_batch_n")
    st.caption(f"絞り込み中の {task} の記録: {found} 件")
    newest = cache.debug_page(same, 0, 1)[0]
    first = wb.base_messages(newest[0]) if newest else []
    batch_system = keep("wb_batch_system", st.text_area(  # typed text survives another tab (ui.kept)
        "システムプロンプト（空欄なら各記録のまま）", value=kept("wb_batch_system", ""), height=160,
        key="wb_batch_system", placeholder=wb.system_prompt_of(first)[:300]))
    c1, c2 = st.columns(2)
    old_text = keep("wb_batch_old", c1.text_input("置換前の文字列（全メッセージ）", value=kept("wb_batch_old", ""),
                                                  key="wb_batch_old", max_chars=2000))
    new_text = keep("wb_batch_new", c2.text_input("置換後の文字列", value=kept("wb_batch_new", ""), key="wb_batch_new",
                                                  max_chars=2000))
    c1, c2, c3 = st.columns(3)
    temperature = c1.number_input("温度（空欄なら記録のまま）", 0.0, 2.0, value=None, step=0.1, key="wb_batch_temperature")
    model = keep("wb_batch_model", c2.text_input("モデル（空欄ならプロバイダーの既定）", value=kept("wb_batch_model", ""),
                                                 key="wb_batch_model", max_chars=200))
    chain = c3.multiselect("方式", list(ALL_STRATEGIES), format_func=lambda s: STRATEGY_LABELS[s],
                           default=[m for m in query.methods if m in ALL_STRATEGIES],
                           placeholder="記録のまま", key="wb_batch_strategies", select_all=False)
    if st.button("▶️ 一括再実行", key="wb_batch_run", type="primary", disabled=not found):
        change = {"system_prompt": batch_system or None, "temperature": temperature, "model": model or None,
                  "strategies": chain, "replace_text": [(old_text, new_text)] if old_text else []}
        records = list(reversed(store().debug_page(same, limit=int(n))))  # newest first
        bar = st.progress(0.0, text="再実行しています…")
        state.wb_batch = wb.batch_replay(records, change, state.llm_client,
                                         progress=lambda i, total: bar.progress(i / total, text=f"{i} / {total}"))
        bar.empty()
    if state.get("wb_batch") is not None:
        _summary(state.wb_batch)
