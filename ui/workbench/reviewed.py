"""レビュー済みセット: the regression cases reviewers made (``core.review``) replayed on the provider of this tab,
with the prompt versions in use and, optionally, another model; per case whether the answer now matches what
the reviewer decided."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.review.replay import replay_reviewed
from ui import safe
from ui.session import store


def reviewed_tab(prefix: str = "wb_reviewed") -> None:
    state = st.session_state
    cases = store().list_review_scenarios()
    if not cases:
        st.info("まだ回帰ケースがありません。レビュー ページで判定を記録した項目を「回帰ケースにする」と追加されます。")
        return
    client = state.llm_client
    st.caption(f"回帰ケース {len(cases)} 件を、いま使われているプロンプト版と {getattr(client, 'name', '?')} で再生し、"
               "レビューの判定（修正後の回答の事実）と一致するかを確かめます。新しいプロンプト版は、ワークベンチで保存すると使われます。")
    model = st.text_input("モデル（空欄ならプロバイダーの既定）", key=f"{prefix}_model", max_chars=200)
    if st.button("▶️ レビュー済みセットで再実行", key=f"{prefix}_run", type="primary"):
        with st.spinner("回帰ケースを再生しています…"):
            rows = replay_reviewed(store(), lambda: client, model=model.strip() or None)
        state[f"{prefix}_rows"] = [r.as_row() for r in rows]
    rows = state.get(f"{prefix}_rows")
    if rows:
        matched = sum(r["判定と一致"].startswith("✅") for r in rows)
        st.metric("レビューの判定と一致", f"{matched} / {len(rows)}")
        safe.table(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"{prefix}_table")
