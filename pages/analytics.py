"""分析: the store's analytics (issue #9) for a date range in Japan time and a provider filter — the interview
funnel, model quality, diagnosis outcomes and FAQ rates; every table downloadable as CSV (UTF-8 with BOM).
The figures come from ``core.analytics`` (aggregated by the database, cached per period by ``ui.cache`` until
the store changes); this page only labels and draws them."""
from __future__ import annotations

from datetime import datetime, time, timedelta

import pandas as pd
import pyarrow as pa
import streamlit as st

from core import analytics
from core.diagnosis.view import LEVEL_LABELS, STEP_LABELS
from core.faq.report import OUTCOME_BADGES
from core.llm.registry import PROVIDER_LABELS
from core.results import PROVIDER_KIND_JA
from core.text.jst import JST, jst
from core.text.spreadsheet import csv_bytes
from ui import cache, review_quality, tables
from ui.session import leave_pages_directory_mode
from ui.workbench.labels import METHOD_LABELS, OUTCOME_LABELS

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

COLUMNS = {
    "stage": "段階", "conversations": "会話数", "share": "割合", "target": "到達目標", "mean": "平均", "median": "中央値",
    "min": "最小", "max": "最大", "phase": "フェーズ", "reached": "到達", "ended_here": "ここで終了", "dropoff_rate": "離脱率",
    "metric": "指標", "value": "値", "task": "タスク", "provider": "プロバイダー", "prompt_version": "プロンプト版",
    "tasks": "タスク数", "calls": "呼び出し数", "first_try_valid": "初回で有効", "valid": "最終的に有効",
    "repairs_per_task": "修復回数/タスク", "error_calls": "失敗した呼び出し", "latency_p50_ms": "応答時間 p50 (ms)",
    "latency_p95_ms": "応答時間 p95 (ms)", "error_type": "エラー種別", "share_of_calls": "呼び出しに占める割合",
    "urgency": "緊急度", "done": "完了", "booked": "予約あり", "booking_rate": "予約率", "step": "ステップ",
    "outcome": "結果", "exchanges": "やり取り数", "rate": "率", "question": "質問（マスク済み）", "count": "件数",
    "last_asked": "最終質問日時",
}
VALUES = {
    "stage": {"started": "開始", "finalize": "草案の提示（確定前）", "confirmed": "ナレッジ確定"},
    "phase": {analytics.NO_PHASE: "（応答なし）"},
    "target": {"draft_knowledge": "草案作成", "finalize": "草案の提示（確定前）"},
    "metric": {"entries": "ナレッジ数", "status_draft": "下書き", "status_confirmed": "確定済み",
               "status_archived": "アーカイブ", "ever_confirmed": "一度でも確定された", "conversations_with_confirmed":
               "確定ナレッジのある会話", "booked_conversations": "予約のある会話", "booking_rate": "予約率",
               "answers": "回答数", "citations_per_answer": "回答あたりの引用数", "answers_with_citations": "引用のある回答の割合"},
    "urgency": {**LEVEL_LABELS, analytics.UNKNOWN: "不明"},
    "step": {**STEP_LABELS, analytics.UNKNOWN: "不明"},
    "outcome": {k: label for k, (label, _) in OUTCOME_BADGES.items()},
    "provider": {**PROVIDER_LABELS, analytics.UNKNOWN: "不明"},
}
FLOW_LABELS = {"knowledge": "契約ナレッジ", "diagnosis": "車両問診", "faq": "FAQ"}
TASK_STEP_LABELS = {"turn": "ターン", "IR": "意図の判定", "GE": "検索の計画", "NLG": "回答の作成", **STEP_LABELS}
METHODS = {**METHOD_LABELS, "offline": "オフライン"}
ERRORS = {**OUTCOME_LABELS, "provider_error": "モデル呼び出しの失敗", "input_too_long": "入力が長すぎる",
          **{f"provider_error:{k}": f"モデル呼び出しの失敗（{v}）" for k, v in PROVIDER_KIND_JA.items()},
          analytics.UNKNOWN: "不明"}
PHASE_LABELS = {"collect_case": "事例ヒアリング", "organize_risks": "リスク整理", "draft_knowledge": "ナレッジ草案作成",
                "review_knowledge": "レビュー・確定"}
VALUES["stage"].update(PHASE_LABELS)
VALUES["phase"].update(PHASE_LABELS)
VALUES["metric"]["conversations"] = "会話数"
VALUES["error_type"] = ERRORS


def series_label(series: str) -> str:
    """``knowledge/turn · openai · v1`` (a line of the quality chart) in words."""
    task, _, rest = str(series).partition(" · ")
    provider, _, version = rest.partition(" · ")
    return " · ".join(p for p in (task_label(task), VALUES["provider"].get(provider, provider), version) if p)


def task_label(task: str) -> str:
    """``knowledge/turn`` → 「契約ナレッジ・ターン」: a model task in words."""
    flow, _, step = str(task).partition("/")
    return f"{FLOW_LABELS.get(flow, flow)}・{TASK_STEP_LABELS.get(step, step or '—')}"


def labelled(table: pd.DataFrame) -> pa.Table:
    """``table`` with Japanese values and column names, as shown and downloaded, safe for a spreadsheet: an
    Arrow table (``ui.tables``: drawn as it is), made from its columns' values (again after every write that
    changes it)."""
    headers, columns = {**COLUMNS, **METHODS}, {}
    for column, values in table.items():  # each column once (``iloc`` per column: 4× the cost)
        if column in VALUES or column == "task" or values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
            label = VALUES.get(column, {})
            values = [task_label(v) if column == "task" else label.get(v, v) for v in values.tolist()]
        columns[headers.get(column, column)] = values
    return tables.shown(columns)


def labelled_one(name: str, table: pd.DataFrame) -> pa.Table:
    """One table labelled and safe for a spreadsheet; the not-found questions' times in JST."""
    if name == "faq_top_not_found":
        table = table.assign(last_asked=table["last_asked"].map(jst))
    return labelled(table)


def labelled_all(figures: dict, digests: dict) -> dict[str, pa.Table]:
    """Every table shown labelled, each again only when its content changed (kept per content: ``ui.cache``'s
    ``analytics_kept``, nothing pickled). A table that is only charted (``CHARTED``) is not labelled."""
    kept = cache.analytics_kept()
    shown = {name: kept.get("labelled", (name, digests[name]), lambda name=name, table=table: labelled_one(name, table))
             for name, table in figures.items() if name not in CHARTED}
    shown["faq_not_found"] = shown["faq_top_not_found"]
    return shown


SOURCES = {"faq_not_found": "faq_top_not_found"}  # a shown table → the figure it is made from
CHARTED = {"quality_over_time"}  # drawn as a chart from the figure itself, not shown as a table


def show(name: str) -> pa.Table:
    shown = shown_tables[name]
    cache.replay(kind="dataframe", key=(name, digests[SOURCES.get(name, name)]), _data=shown, hide_index=True,
                 width="stretch")
    st.download_button("CSV をダウンロード", lambda: csv_bytes(shown.to_pandas()),  # made on click
                       file_name=f"{name}_{start:%Y%m%d}-{end:%Y%m%d}.csv", mime="text/csv", key=f"an_csv_{name}")
    return shown


def chart(kind: str, name: str, data: pa.Table | pd.DataFrame, **kwargs) -> None:
    cache.analytics_chart(kind=kind, name=name, content=digests[name], data=data, **kwargs)


def figure(table: pd.DataFrame, name: str):
    return table.set_index("metric")["value"].get(name, 0)


st.title("📊 分析")
st.caption("会話・ナレッジ・予約・モデル呼び出しの記録を集計します（期間は会話の開始日時、日本時間）。")
today = datetime.now(JST).date()
date_col, provider_col = st.columns([1, 2])
period = date_col.date_input("期間（日本時間）", value=(today - timedelta(days=29), today), max_value=today,
                             key="an_dates")
picked = list(period) if isinstance(period, (list, tuple)) else [period]
start, end = (picked[0], picked[-1]) if picked else (today, today)
since, until = datetime.combine(start, time(), JST), datetime.combine(end + timedelta(days=1), time(), JST)
versions = cache.analytics_versions()  # what was written since the last look, counted once per run
providers = provider_col.multiselect("プロバイダー", cache.provider_options(since, until, versions), placeholder="すべて",
                                     format_func=lambda p: VALUES["provider"].get(p, p), key="an_providers", select_all=False)
_, figures, digests = cache.analytics_figures(since, until, providers, versions)  # from the rollups, kept until they change
shown_tables = labelled_all(figures, digests)

interview, quality, diagnosis, faq = st.tabs(["📝 インタビュー", "🤖 モデル品質", "🚗 車両問診", "❓ FAQ"])

with interview:
    st.subheader("インタビューのファネル")
    chart("bar", "interview_funnel", show("interview_funnel"), x="段階", y="会話数", sort=False)
    st.subheader("到達までのユーザーターン数")
    show("turns_to_phase")
    st.subheader("フェーズ別の離脱")
    chart("bar", "phase_dropoff", show("phase_dropoff"), x="フェーズ", y="ここで終了", sort=False)
    st.subheader("ナレッジの確定")
    show("entries_confirmed")

with quality:
    st.subheader("タスク・プロバイダー・プロンプト版ごとの品質")
    if figures["model_quality"].empty:
        st.info("この期間のモデル呼び出しの記録はありません（デバッグログがオンのときに記録されます）。")
    show("model_quality")
    over_time = figures["quality_over_time"]
    if not over_time.empty:
        st.caption("初回で有効な割合の推移（日別）: プロンプトを変えると段差として現れます。")
        chart("line", "quality_over_time", over_time.rename(columns=series_label).rename_axis("日付"))
    st.subheader("構造化出力の方式")
    mix = show("method_mix")
    if mix.num_rows:
        chart("bar", "method_mix", mix, x=COLUMNS["task"], horizontal=True)
    st.subheader("エラー種別")
    show("error_types")

with diagnosis:
    summary = figures["diagnosis_summary"]
    c1, c2, c3 = st.columns(3)
    c1.metric("問診の会話", int(figure(summary, "conversations")))
    c2.metric("予約率", f"{figure(summary, 'booking_rate'):.1%}")
    c3.metric("回答あたりの引用数", f"{figure(summary, 'citations_per_answer'):.2f}")
    st.subheader("緊急度別の結果")
    outcomes = show("diagnosis_outcomes")
    if outcomes.num_rows:
        chart("bar", "diagnosis_outcomes", outcomes, x="緊急度", y=["完了", "予約あり"], sort=False, stack=False)
    st.subheader("会話が止まったステップ")
    steps = show("diagnosis_end_steps")
    if steps.num_rows:
        chart("bar", "diagnosis_end_steps", steps, x="ステップ", y="会話数", sort=False)
    st.subheader("指標")
    show("diagnosis_summary")

with faq:
    st.subheader("結果の内訳")
    chart("bar", "faq_rates", show("faq_rates"), x="結果", y="率", sort=False)
    st.subheader("該当記事がなかった質問（多い順）")
    st.caption("個人情報はマスクしています。ナレッジベースに追加すべき記事の候補です。")
    show("faq_not_found")

st.divider()
review_quality.section(since, until)  # 👍 rate, verdicts, labels, reviewer agreement (core.review.quality)
