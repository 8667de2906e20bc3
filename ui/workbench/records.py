"""記録: the filters over every recorded model call, one page of the list (read from the store by an indexed
query, cached until a record is added), its JSONL download (built on click), clearing the log (admins),
and each record of the page in full."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Callable

import streamlit as st

from core import workbench as wb
from core.debuglog import to_jsonl
from core.prompts import prompt_versions
from core.store.debug_records import TEXT_SEARCH_WINDOW, DebugQuery
from core.text.jst import JST, jst
from ui import cache, pager
from ui.safe import lines, plain
from ui.safe import table as table_widget
from ui.session import identity, store
from ui.workbench.labels import COLUMN_LABELS, METHOD_LABELS, OUTCOME_LABELS, method_label, owner_label, record_label

JSONL_LIMIT = 1000  # records in one JSONL download (the newest that match)


@dataclass
class Filtered:
    conversation: str  # the conversation id typed into the filter ("" for all)
    query: DebugQuery  # every filter, as the store reads it
    records: list[dict[str, Any]]  # the records of this page, oldest first
    matched: int  # how many records the filters match
    total: int  # how many records there are


def _bound(day: date | None, *, end: bool = False) -> str | None:
    """A Japan-time date as a UTC bound of ``created_at`` (the end inclusive: the next JST midnight)."""
    if day is None:
        return None
    moment = datetime.combine(day + timedelta(days=1) if end else day, time(), JST)
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def filters() -> DebugQuery:
    """The 🔎 絞り込み expander (its options are every value stored); returns the query it makes."""
    values = cache.debug_options()  # every filter's options: one cached read
    with st.expander("🔎 絞り込み", expanded=True):
        c1, c2, c3, c4 = st.columns(4)
        conversation = c1.text_input("会話 ID", value=st.query_params.get("conversation", ""), key="f_conversation",
                                     max_chars=80).strip()
        flows = c2.multiselect("フロー", values["flow"], placeholder="すべて", key="f_flow", select_all=False)
        steps = c3.multiselect("ステップ / フェーズ", values["step"], placeholder="すべて", key="f_step", select_all=False)
        tasks = c4.multiselect("タスク", values["task"], placeholder="すべて", key="f_task", select_all=False)
        c1, c2, c3, c4 = st.columns(4)
        providers = c1.multiselect("プロバイダー", values["provider"], placeholder="すべて", key="f_provider", select_all=False)
        models = c2.multiselect("モデル", values["model"], placeholder="すべて", key="f_model", select_all=False)
        methods = c3.multiselect("方式", sorted(set(wb.METHODS) | set(values["method"])),
                                 placeholder="すべて", key="f_strategy", format_func=method_label, select_all=False)
        outcomes = c4.multiselect("結果", values["outcome"], placeholder="すべて", key="f_outcome",
                                  format_func=lambda o: OUTCOME_LABELS.get(o, o), select_all=False)
        c1, c2, c3, c4 = st.columns(4)
        error_types = c1.multiselect("エラー種別", values["error_type"], placeholder="すべて",
                                     key="f_error_type", select_all=False)
        date_from = c2.date_input("開始日（日本時間）", value=None, key="f_date_from")
        date_to = c3.date_input("終了日（日本時間）", value=None, key="f_date_to")
        failed_only = c4.toggle("失敗のみ", key="f_failed")
        text = st.text_input("出力・エラーを検索", key="f_text", max_chars=200)
        if text:
            st.caption(f"出力・エラーの検索は、ほかの条件に合う新しい {TEXT_SEARCH_WINDOW:,} 件が対象です。")
    return DebugQuery(conversation=conversation, flows=tuple(flows), steps=tuple(steps), tasks=tuple(tasks),
                      providers=tuple(providers), models=tuple(models), methods=tuple(methods),
                      outcomes=tuple(outcomes), error_types=tuple(error_types), since=_bound(date_from),
                      until=_bound(date_to, end=True), failed_only=failed_only, text=text)


def page(query: DebugQuery) -> Filtered:
    """The page of records the pager points at, with the counts."""
    offset = pager.current_offset("wb", query)
    records, matched, total = cache.debug_page(query, offset, pager.PAGE_SIZE)
    if (last := pager.clamp("wb", matched)) is not None:
        records, matched, total = cache.debug_page(query, last, pager.PAGE_SIZE)
    return Filtered(query.conversation, query, records, matched, total)


def _clear_log(conversation: str) -> None:
    state = st.session_state
    who = identity()
    if not state.get("confirm_clear_debug"):
        st.button("ログを消去", key="clear_debug", disabled=not who.can("debug.clear"),
                  help=None if who.can("debug.clear") else "ログの消去は管理者のみ行えます。",
                  on_click=lambda: state.update(confirm_clear_debug=True))
        return
    scope = f"会話 {conversation} の" if conversation else "全操作者の"
    st.warning(f"{scope}デバッグログをすべて消去します。元に戻せません。よろしいですか？")
    yes, no = st.columns(2)
    if yes.button("はい、消去する", key="clear_debug_yes", type="primary"):
        try:
            deleted = store().clear_debug_records(identity(), conversation_id=conversation or None)
            state.debug_logs.clear()
            st.toast(f"{deleted} 件を消去しました。", icon="🧹")
        except PermissionError as exc:
            st.error(lines(str(exc)))
        state.confirm_clear_debug = False
        st.rerun()
    no.button("キャンセル", key="clear_debug_no", on_click=lambda: state.update(confirm_clear_debug=False))


DETAIL_PREFIX = "wb_detail_"  # a record's expander: opened (True) or closed, per record id


def record_detail(r: dict[str, Any], on_open_replay: Callable[[int], None]) -> None:
    """One record in full: provider, method, tokens, prompt version, errors, messages, schema, raw output.
    The expander is lazy: its body (a record's messages, schema and raw output: most of the page) is drawn
    only while it is open, so a rerun of the list draws 50 labels, not 50 records."""
    expander = st.expander(plain(record_label(r) + f" · 試行 {r.get('attempt')} · {r.get('latency_ms')} ms"),
                           key=f"{DETAIL_PREFIX}{r['id']}", on_change="rerun")
    if not expander.open:
        return
    with expander:
        usage = r.get("usage") or {}
        tokens = (f"入力 {usage.get('prompt_tokens', '—')} / 出力 {usage.get('completion_tokens', '—')} / "
                  f"合計 {usage.get('total_tokens', '—')}") if usage else "—（プロバイダーが報告していません）"
        st.text(f"プロバイダー: {r.get('provider')} / {r.get('model')} · 方式: "
                f"{method_label(wb.record_method(r))} · 種別: {r.get('kind')} · "
                f"試行: {r.get('attempt')} · レイテンシ: {r.get('latency_ms')} ms · パース段階: "
                f"{r.get('parse_stage') or '—'}\nトークン: {tokens}\n"
                f"プロンプト: {r.get('prompt') or '—'}（版 {r.get('prompt_version') or '記録なし'}） · "
                f"出力のスキーマ版: {wb.output_schema_version(r) or '—'} · 選択肢の判定: "
                f"{METHOD_LABELS.get(r.get('judgment_method') or '', r.get('judgment_method') or '—')}\n"
                f"会話: {r.get('session_id') or '—'} · 操作者: {owner_label(r.get('owner'))}")
        if r.get("errors"):
            st.error(lines("\n".join(r["errors"])))
        st.button("✏️ この呼び出しを再実行タブで開く", key=f"open_replay_{r['id']}", on_click=on_open_replay,
                  args=(r["id"],))
        st.markdown("**送信したメッセージ**")
        for m in r.get("messages") or []:
            st.text(f"[{m.get('role')}]\n{m.get('content')}")
        if r.get("response_format"):
            with st.expander("response_format（送信したスキーマ）"):
                st.code(json.dumps(r["response_format"], ensure_ascii=False, indent=2), language="json")
        if r.get("tools"):
            with st.expander("tools（送信したツール）"):
                st.code(json.dumps(r["tools"], ensure_ascii=False, indent=2), language="json")
        st.markdown("**生出力**")
        st.code(r.get("raw_output") or "（なし）", language="json")
        if r.get("prompt_versions"):
            with st.expander("この呼び出し時のプロンプトファイルのバージョン"):
                st.json(r["prompt_versions"])


def _jsonl(query: DebugQuery) -> Callable[[], str]:
    """The newest ``JSONL_LIMIT`` records the filters match, oldest first: made when the button is clicked."""
    shared = store()
    return lambda: to_jsonl(shared.debug_page(query, limit=JSONL_LIMIT))


@st.cache_data(ttl=cache.TTL_SECONDS, max_entries=32, show_spinner=False)
def _records_table(url: str, names: tuple[tuple[int, str], ...], _records: list[dict[str, Any]]) -> None:
    """The list's table of these records (a record never changes once written, so the store and each
    record's id and time name it: an id used again after the log was cleared has another time), drawn once
    and then replayed by Streamlit: a rerun neither shapes the frame nor converts it to Arrow again."""
    frame = wb.records_frame(_records)
    table = frame.assign(time=[jst(t) for t in frame["time"]], owner=[owner_label(o) for o in frame["owner"]])
    table = table[[c for c in COLUMN_LABELS if c in table.columns]].rename(columns=COLUMN_LABELS)
    table_widget(table, width="stretch", hide_index=True)


def records_tab(filtered: Filtered, on_open_replay: Callable[[int], None]) -> None:
    _records_table(store().url, tuple((r["id"], str(r.get("time"))) for r in filtered.records), filtered.records)
    pager.pager("wb", filtered.matched, len(filtered.records))
    st.caption(f"全操作者の記録 {filtered.total:,} 件・時刻は日本時間")
    st.download_button("JSONL をダウンロード", _jsonl(filtered.query), file_name="debug_logs.jsonl",
                       mime="application/jsonl", key="dl_debug", help=f"絞り込みに合う新しい {JSONL_LIMIT:,} 件まで")
    with st.expander("📄 プロンプトファイルの現在のバージョン"):
        st.dataframe([{"プロンプト": name, "バージョン": version} for name, version in prompt_versions().items()],
                     hide_index=True, width="stretch")
    _clear_log(filtered.conversation)
    for r in reversed(filtered.records):
        record_detail(r, on_open_replay)
