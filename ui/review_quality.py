"""分析's 「レビューと評価」 section: the 👍 rate and the reviewers' verdicts over time by flow, prompt version and
model, label counts, and two reviewers' agreement (percent and Cohen's kappa). Figures from
``core.review.quality``; each table downloads as CSV (spreadsheet-safe)."""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import streamlit as st

from core.review import quality
from core.review.answers import FLOW_JA
from core.text.spreadsheet import csv_bytes
from ui import safe
from ui.session import store


def _table(name: str, frame: pd.DataFrame, empty: str) -> None:
    if frame.empty:
        st.caption(empty)
        return
    shown = frame.assign(**{"フロー": frame["フロー"].map(lambda f: FLOW_JA.get(f, f))}) if "フロー" in frame else frame
    safe.table(shown, hide_index=True, width="stretch", key=f"rq_{name}")
    st.download_button("CSV をダウンロード", lambda: csv_bytes(shown), file_name=f"{name}.csv", mime="text/csv",
                       key=f"rq_csv_{name}")


def section(since: datetime, until: datetime) -> None:
    """The section for the period ``[since, until)``."""
    start = since.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    end = until.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    st.header("🧐 レビューと評価")
    # read only when asked for: 分析 reruns on every filter change and these figures are not cached
    if not st.toggle("レビューと評価の集計を表示", key="rq_show"):
        return
    freq = st.radio("集計の単位", ["D", "W"], format_func={"D": "日", "W": "週"}.get, horizontal=True, key="rq_freq")
    s = store()
    st.subheader("👍 の割合（フロー・プロンプト版・モデル別）")
    _table("feedback_rates", quality.feedback_rates(s, since=start, until=end, freq=freq),
           "この期間の 👍 / 👎 はありません。")
    st.subheader("レビューの判定（フロー・プロンプト版・モデル別）")
    _table("verdict_rates", quality.verdict_rates(s, since=start, until=end, freq=freq),
           "この期間のレビューはありません。")
    st.subheader("ラベルの件数")
    _table("label_counts", quality.label_counts(s, since=start, until=end), "この期間にラベルの付いた判定はありません。")
    st.subheader("2 人のレビュアーの一致")
    agreement = quality.agreement(s, since=start, until=end)
    safe.table(pd.DataFrame([
        {"指標": "2 人がレビューした回答", "値": str(agreement.items)},
        {"指標": "一致率", "値": "—" if agreement.percent is None else f"{agreement.percent:.1%}"},
        {"指標": "Cohen の κ", "値": "—" if agreement.kappa is None else f"{agreement.kappa:.2f}"}]),
        hide_index=True, key="rq_agreement")
    st.caption("無作為抽出の一部（KAIWA_REVIEW_DOUBLE）を 2 人がレビューします。κ は偶然の一致を除いた一致の度合いです"
               "（判定が 1 種類しかないときは定義できないため「—」）。")
