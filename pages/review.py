"""レビュー: the reviewers' queue (issue #22). Reviewers (``KAIWA_REVIEWERS``) and admins claim an answer, read
the conversation up to it with its sources and debug records, and record a verdict, labels, a comment and a
corrected answer; a reviewed answer becomes a regression case in one click; the regression set is replayed
against the prompt versions in use; admins edit the score configuration. Widgets: ``ui.review``."""
from __future__ import annotations

import streamlit as st

from ui import review
from ui.identity import admin_gate, auth_settings
from ui.session import identity, leave_pages_directory_mode
from ui.workbench.reviewed import reviewed_tab

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

st.title("🧐 レビュー")
who = identity()
if not who.is_reviewer:
    st.info("回答のレビューは **レビュアー** と管理者だけが行えます。レビュアーは、認証（OIDC または認証プロキシ）で"
            "確認済みのメールアドレスを環境変数 `KAIWA_REVIEWERS` にカンマ区切りで指定します（名前は使えません）。"
            "各ページの 👍 / 👎 は誰でも付けられ、👎 の回答はここに届きます。", icon="🔒")
    admin_gate(who, auth_settings(), "回答のレビュー")
    st.stop()

st.caption("👎 の回答、失敗・修復したモデル呼び出し、FAQ の該当なし、緊急度 critical の回答、無作為抽出がここに届きます。"
           "担当した項目はほかのレビュアーには割り当てられません（一定時間で担当が外れます）。")
review.notice()
tab_queue, tab_regression, tab_config = st.tabs(["キュー", "回帰セット", "スコア設定"])
with tab_queue:
    query = review.filters()
    selected = review.queue(query, who)
    with st.expander("⬇️ レビュー済みの回答をエクスポート（絞り込みのとおり・個人情報はマスク）"):
        review.export_buttons(query)
    if selected is not None:
        st.divider()
        review.item_view(selected, who)
with tab_regression:
    reviewed_tab("rv_replay")
with tab_config:
    review.score_config_editor(who)
