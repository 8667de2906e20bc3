"""The レビュー page's widgets: the queue's filters and pager, one item (claim, the conversation up to the
answer with its sources and debug records, the verdict form), the regression set, the export and the score
configuration editor (admins).

Personal data is masked in everything a reviewer reads, unless the answer's knowledge entry was kept with its
contract text and the reviewer may see it (``review.unmasked``: admins); showing it is audited. Every text
from outside goes through ``ui.safe``.
"""
from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import pandas as pd
import streamlit as st

from core.identity import Identity
from core.review.answers import FLOW_JA, transcript_until
from core.review.export import export_csv, export_jsonl
from core.review.regression import ASK_OUTCOMES, FAQ_OUTCOMES, URGENCIES, NotReplayable, make_regression_case
from core.store.review import (
    REASON_JA,
    REASONS,
    REVIEW_FLOWS,
    STATUS_JA,
    VERDICT_JA,
    VERDICTS,
    ReviewConflict,
    ReviewInputError,
    ReviewQuery,
)
from core.text.jst import JST, jst
from core.text.pii import clean_text, mask_pii
from core.validation import ENTRY_FIELDS
from ui import pager, safe
from ui.safe import plain
from ui.session import store

PREFIX = "rv"
TABLE_KEY = "rv_table"
FIELD_JA = {"knowledge_title": "タイトル", "contract_type": "契約類型", "target_clause": "対象条項",
            "review_points": "審査ポイント", "action_plan": "対応方針", "clause_sample": "条文例"}
ASK_OUTCOME_JA = {"answered": "ナレッジから回答する", "not_found": "該当なし（答えない）"}
URGENCY_JA = {"critical": "critical（緊急）", "high": "high", "medium": "medium", "low": "low"}


def _utc(day: date, end: bool = False) -> str:
    """The UTC ISO bound of a JST day (its start; with ``end`` the next day's start)."""
    moment = datetime.combine(day + timedelta(days=1) if end else day, time(0), tzinfo=JST)
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def filters() -> ReviewQuery:
    """The queue's filters (flow, status, reason, label, prompt version, reviewer, date)."""
    s = store()
    c1, c2, c3, c4 = st.columns(4)
    flows = c1.multiselect("フロー", list(REVIEW_FLOWS), format_func=lambda f: FLOW_JA.get(f, f), key="rv_flows",
                           placeholder="すべて", select_all=False)
    status = c2.selectbox("状態", ["pending", "claimed", "done", "skipped", ""], key="rv_status",
                          format_func=lambda x: STATUS_JA.get(x, "すべて"))
    reasons = c3.multiselect("理由", list(REASONS), format_func=lambda r: REASON_JA[r], key="rv_reasons",
                             placeholder="すべて", select_all=False)
    labels = c4.multiselect("ラベル", [x["name"] for x in s.review_labels(include_inactive=True)], key="rv_labels",
                            placeholder="すべて", select_all=False)
    c1, c2, c3 = st.columns(3)
    versions = c1.multiselect("プロンプト版", s.review_values("prompt_version"), key="rv_versions", placeholder="すべて", select_all=False)
    names = s.reviewer_names()
    reviewers = c2.multiselect("レビュアー", list(names), format_func=lambda r: names.get(r, r), key="rv_reviewers",
                               placeholder="すべて", select_all=False)
    period = c3.date_input("登録日（JST）", value=(), key="rv_period", format="YYYY-MM-DD")
    since = until = None
    if isinstance(period, (tuple, list)) and len(period) == 2:
        since, until = _utc(period[0]), _utc(period[1], end=True)
    return ReviewQuery(flows=tuple(flows), statuses=(status,) if status else (), reasons=tuple(reasons),
                       labels=tuple(labels), prompt_versions=tuple(versions), reviewers=tuple(reviewers),
                       since=since, until=until)


def _row(item: dict[str, Any]) -> dict[str, Any]:
    return {"No.": item["id"], "フロー": FLOW_JA.get(item["flow"], item["flow"]), "理由": REASON_JA.get(item["reason"], item["reason"]),
            "状態": STATUS_JA.get(item["status"], item["status"]) + ("（2 人）" if item.get("reviews_wanted") == 2 else ""),
            "判定": VERDICT_JA.get(item.get("verdict") or "", "—"), "ラベル": "、".join(item.get("labels") or []),
            "プロンプト版": item.get("prompt_version") or "", "モデル": item.get("model") or "",
            "登録": jst(item["created_at"]), "担当・レビュアー": item.get("reviewed_by_label") or item.get("claimed_by_label") or ""}


def queue(query: ReviewQuery, who: Identity) -> int | None:
    """One page of the queue with its pager; returns the selected item's id."""
    s = store()
    offset = pager.current_offset(PREFIX, query)
    total = s.count_review_items(query)
    clamped = pager.clamp(PREFIX, total)
    if clamped is not None:
        offset = clamped
    items = s.review_page(query, limit=pager.PAGE_SIZE, offset=offset)
    ids = [i["id"] for i in items]
    selected = pager.selection(PREFIX, TABLE_KEY, ids)
    left, right = st.columns([3, 1], vertical_alignment="center")
    left.caption(f"{total:,} 件")
    if right.button("次の項目を担当する", key="rv_claim_next", type="primary"):
        try:
            item = s.claim_next_review_item(who, query)
        except PermissionError as exc:
            st.error(str(exc))
            item = None
        if item is None:
            st.info("担当できる項目はありません（ほかのレビュアーが作業中か、すべてレビュー済みです）。")
        else:
            pager.follow(PREFIX, item["id"], lambda: s.review_position(item["id"], query))
            st.rerun()
    if items:
        safe.table(pd.DataFrame([_row(i) for i in items]), hide_index=True, width="stretch", key=TABLE_KEY,
                   on_select="rerun", selection_mode="single-row")
    pager.pager(PREFIX, total, len(items))
    return selected


# ---- one item ---------------------------------------------------------------------------------------
def _may_unmask(item: dict[str, Any], who: Identity) -> bool:
    """Personal data may be shown: the answer's knowledge entry was kept with its contract text (it holds
    personal data the store did not mask) and the reviewer's role allows it."""
    if item["flow"] != "knowledge" or not who.can("review.unmasked"):
        return False
    entries = store().list_entries(conversation_id=item["conversation_id"])
    return any(mask_pii(str(e.get(f) or "")) != str(e.get(f) or "") for e in entries for f in ENTRY_FIELDS)


def _text(value: Any, unmasked: bool) -> str:
    return str(value or "") if unmasked else clean_text(value)


def _conversation(item: dict[str, Any], unmasked: bool) -> None:
    snapshot = item.get("snapshot") or {}
    st.markdown("**会話（この回答まで）**")
    shown = transcript_until(store(), item["conversation_id"], int(item["turn"])) if item["flow"] != "ask" else [
        {"role": "user", "text": snapshot.get("question") or "", "turn": 0},
        {"role": "assistant", "text": snapshot.get("answer") or "", "turn": item["turn"]}]
    with st.container(height=420):
        for line in shown:
            with st.chat_message(line["role"]):
                st.markdown(safe.safe_markdown(_text(line["text"], unmasked)) or "（空）")
                if line["role"] == "assistant" and line["turn"] == item["turn"]:
                    st.caption("⬆️ レビュー対象の回答")
    facts = [f"緊急度: {snapshot['urgency']}" if snapshot.get("urgency") else "",
             f"走行可否: {'可' if snapshot['can_drive'] else '不可'}" if isinstance(snapshot.get("can_drive"), bool) else "",
             f"結果: {snapshot['outcome']}" if snapshot.get("outcome") else "",
             "モデル呼び出し失敗" if snapshot.get("failed") else "", "修復あり" if snapshot.get("repaired") else ""]
    st.caption(" · ".join(x for x in facts if x) or "—")
    sources = snapshot.get("sources") or []
    with st.expander(f"📖 参照した根拠（{len(sources)} 件）"):
        for source in sources:
            st.markdown(f"- `{plain(source.get('id'))}` {plain(source.get('title'))}")
        if not sources:
            st.caption("根拠はありません。")
    if snapshot.get("fields"):
        with st.expander("📝 下書きの項目"):
            for field, value in snapshot["fields"].items():
                st.markdown(f"**{FIELD_JA.get(field, field)}**")
                st.text(_text(value, unmasked))
    debug_ids = snapshot.get("debug_ids") or []
    with st.expander(f"🪵 デバッグ記録（{len(debug_ids)} 件）"):
        records = store().get_debug_records(debug_ids) if debug_ids else {}
        for record_id in debug_ids:
            record = records.get(record_id)
            if record is None:
                continue
            st.caption(f"#{record_id} · {plain(record.get('task'))} · {plain(record.get('strategy'))} · "
                       f"試行 {record.get('attempt')} · {plain(record.get('outcome'))} · {record.get('latency_ms')} ms")
            st.code(clean_text(record.get("raw_output") or "")[:4000] or "（出力なし）", language="json")
        if not debug_ids:
            st.caption("この回答のデバッグ記録はありません（デバッグログがオフだった可能性があります）。")


def _claim_bar(item: dict[str, Any], who: Identity) -> None:
    s = store()
    mine = item["status"] == "claimed" and item.get("claimed_by") == who.user_id
    c1, c2, c3 = st.columns(3)
    if item["status"] == "claimed" and not mine:
        st.warning(f"{plain(item.get('claimed_by_label'))} さんが作業中です（{jst(item.get('claim_until'))} まで）。")
    if item["status"] in ("pending", "claimed") and not mine:
        if c1.button("担当する", key=f"rv_claim_{item['id']}", type="primary",
                     disabled=item["status"] == "claimed"):
            _try(lambda: s.claim_review_item(item["id"], who))
    if mine:
        c1.caption(f"あなたが担当中です（{jst(item.get('claim_until'))} まで）。")
        if c2.button("担当を外す", key=f"rv_release_{item['id']}"):
            _try(lambda: s.release_review_item(item["id"], who))
    if item["status"] in ("pending", "claimed") and (mine or item["status"] == "pending"):
        if c3.button("スキップ", key=f"rv_skip_{item['id']}"):
            _try(lambda: s.skip_review_item(item["id"], who))


def _try(action) -> None:
    try:
        action()
    except (ReviewConflict, ReviewInputError, PermissionError, LookupError) as exc:
        st.session_state["rv_notice"] = ("error", str(exc))
    st.rerun()


def _correction_inputs(item: dict[str, Any]) -> dict[str, Any]:
    """修正後の回答: its text and the facts a regression case can check."""
    snapshot = item.get("snapshot") or {}
    key = f"rv_fix_{item['id']}"
    corrected: dict[str, Any] = {}
    text = st.text_area("修正後の回答", key=f"{key}_text", height=120, max_chars=2000,
                        placeholder="正しい回答を書いてください（人が読むためのもの。回帰ケースは下の事実を確かめます）")
    if text.strip():
        corrected["text"] = text.strip()
    if item["flow"] == "diagnosis":
        c1, c2 = st.columns(2)
        urgency = c1.selectbox("正しい緊急度", ["", *URGENCIES], key=f"{key}_urgency",
                               format_func=lambda u: URGENCY_JA.get(u, "（変更なし）"))
        drive = c2.selectbox("正しい走行可否", ["", "yes", "no"], key=f"{key}_drive",
                             format_func=lambda d: {"yes": "走行可", "no": "走行不可"}.get(d, "（変更なし）"))
        if urgency:
            corrected["urgency"] = urgency
        if drive:
            corrected["can_drive"] = drive == "yes"
    if item["flow"] == "faq":
        outcome = st.selectbox("正しい結果", ["", *FAQ_OUTCOMES], key=f"{key}_outcome",
                               format_func=lambda o: o or "（変更なし）")
        if outcome:
            corrected["outcome"] = outcome
    if item["flow"] == "ask":
        outcome = st.selectbox("正しい結果", ["", *ASK_OUTCOMES], key=f"{key}_outcome",
                               format_func=lambda o: ASK_OUTCOME_JA.get(o, "（変更なし）"))
        if outcome:
            corrected["outcome"] = outcome
    if item["flow"] in ("diagnosis", "faq", "ask"):
        label = ("根拠にすべきナレッジ（No. またはタイトル、カンマ区切り、最初が最重要・挙げたものはすべて引用が必要）"
                 if item["flow"] == "ask" else "根拠にすべき箇所の ID（カンマ区切り、最初が最重要）")
        cited = st.text_input(label, key=f"{key}_citations", max_chars=400,
                              placeholder={"diagnosis": "例: s052, s053", "faq": "例: kb:007"}.get(item["flow"], "例: 12, 7"))
        citations = [c.strip() for c in cited.replace("、", ",").split(",") if c.strip()]
        if citations:
            corrected["citations"] = citations[:20]
    if item["flow"] == "knowledge":
        st.caption("修正後の項目（変えた項目だけ残せば十分です）")
        fields = {}
        for field in ENTRY_FIELDS:
            value = st.text_area(FIELD_JA.get(field, field), value=(snapshot.get("fields") or {}).get(field, ""),
                                 key=f"{key}_{field}", height=68, max_chars=2000)
            if value.strip():
                fields[field] = value.strip()
        if fields:
            corrected["fields"] = fields
    phrases = st.text_input("必ず含める語句（カンマ区切り）", key=f"{key}_must", max_chars=400)
    must = [p.strip() for p in phrases.replace("、", ",").split(",") if p.strip()]
    if must:
        corrected["must_include"] = must[:20]
    return corrected


def verdict_form(item: dict[str, Any], who: Identity) -> None:
    s = store()
    labels = [x["name"] for x in s.review_labels()]
    verdict = st.radio("判定", list(VERDICTS), format_func=VERDICT_JA.get, key=f"rv_verdict_{item['id']}",
                       horizontal=True, index=None)
    chosen = st.multiselect("ラベル", labels, key=f"rv_labels_{item['id']}", placeholder="当てはまるものを選ぶ", select_all=False)
    comment = st.text_area("コメント", key=f"rv_comment_{item['id']}", height=80, max_chars=2000)
    corrected = _correction_inputs(item) if verdict in ("partial", "incorrect") else {}
    st.caption(f"記録される操作者: {plain(who.label)}")
    if st.button("判定を記録する", key=f"rv_record_{item['id']}", type="primary", disabled=verdict is None):
        try:
            s.record_review(item["id"], who, verdict=verdict, labels=chosen, comment=comment,
                            corrected_answer=corrected or None)
            st.session_state["rv_notice"] = ("success", "判定を記録しました。")
        except (ReviewConflict, ReviewInputError, PermissionError, LookupError) as exc:
            st.session_state["rv_notice"] = ("error", str(exc))
        st.rerun()


def _regression_button(item: dict[str, Any], who: Identity) -> None:
    if item.get("scenario_id"):
        st.success(f"回帰ケース No.{item['scenario_id']} になっています。")
    if st.button("🧪 回帰ケースにする" if not item.get("scenario_id") else "回帰ケースを作り直す",
                 key=f"rv_regress_{item['id']}"):
        try:
            scenario_id, scenario = make_regression_case(store(), item["id"], who)
            st.session_state["rv_notice"] = ("success", f"回帰ケース No.{scenario_id} を追加しました（期待: "
                                                        f"{', '.join(scenario['expect'])}）。")
        except (NotReplayable, PermissionError, LookupError) as exc:
            st.session_state["rv_notice"] = ("error", str(exc))
        st.rerun()


def item_view(item_id: int, who: Identity) -> None:
    """The selected item: claim, the conversation, the verdict form (or the verdicts given), regression."""
    item = store().get_review_item(item_id)
    if item is None:
        st.info("項目が見つかりません。")
        return
    st.subheader(f"No.{item['id']} · {FLOW_JA.get(item['flow'], item['flow'])} · {REASON_JA.get(item['reason'], '')}")
    st.caption(f"会話 {plain(item['conversation_id'])} · 回答 {item['turn']} · {plain(item['prompt_version'])} · "
               f"{plain(item['model'])} · 状態: {STATUS_JA.get(item['status'], item['status'])}")
    unmasked = False
    if _may_unmask(item, who):
        unmasked = st.toggle("個人情報を表示する（契約文を残したナレッジ・記録されます）", key=f"rv_unmask_{item_id}")
        if unmasked and st.session_state.get("rv_unmask_logged") != item_id:
            with store().audited(who, "review.unmasked", "review.unmask", "review_item", item_id):
                st.session_state["rv_unmask_logged"] = item_id
    left, right = st.columns([3, 2], gap="large")
    with left:
        _conversation(item, unmasked)
    with right:
        _claim_bar(item, who)
        for verdict in item.get("verdicts") or []:
            with st.container(border=True):
                st.markdown(f"**{VERDICT_JA.get(verdict['verdict'])}** · {plain(verdict['reviewer_label'])} · "
                            f"{jst(verdict['created_at'])}")
                if verdict.get("labels"):
                    st.caption("ラベル: " + "、".join(plain(x) for x in verdict["labels"]))
                if verdict.get("comment"):
                    st.text(_text(verdict["comment"], unmasked))
                if verdict.get("corrected_answer"):
                    st.caption("修正後の回答")
                    st.json(verdict["corrected_answer"], expanded=False)
        open_to_me = item["status"] in ("pending", "claimed") and (
            item["status"] == "pending" or item.get("claimed_by") == who.user_id) and who.user_id not in {
            v["reviewer"] for v in item.get("verdicts") or []}
        if open_to_me:
            verdict_form(item, who)
        if item.get("verdict"):
            _regression_button(item, who)


def notice() -> None:
    shown = st.session_state.pop("rv_notice", None)
    if shown:
        getattr(st, shown[0])(shown[1])


def export_buttons(query: ReviewQuery) -> None:
    """The reviewed answers of the filters as JSONL / CSV (masked; built when clicked)."""
    c1, c2 = st.columns(2)
    c1.download_button("JSONL をダウンロード", data=lambda: export_jsonl(store().reviewed_items(query)).encode("utf-8"),
                       file_name="review.jsonl", mime="application/x-ndjson", key="rv_export_jsonl")
    c2.download_button("CSV をダウンロード", data=lambda: export_csv(store().reviewed_items(query)),
                       file_name="review.csv", mime="text/csv", key="rv_export_csv")


def score_config_editor(who: Identity) -> None:
    """The score configuration (labels): admins edit it; everyone else reads it."""
    s = store()
    labels = s.review_labels(include_inactive=True)
    frame = pd.DataFrame([{"ラベル": x["name"], "説明": x["description"], "有効": bool(x["active"])} for x in labels],
                         columns=["ラベル", "説明", "有効"])
    if not who.can("review.config"):
        safe.table(frame, hide_index=True, width="stretch")
        st.caption("ラベルの変更は管理者だけが行えます。")
        return
    edited = st.data_editor(frame, num_rows="dynamic", hide_index=True, width="stretch", key="rv_labels_editor",
                            column_config={"ラベル": st.column_config.TextColumn(max_chars=60, required=True),
                                           "説明": st.column_config.TextColumn(max_chars=500)})
    st.caption(f"記録される操作者: {plain(who.label)}。外したラベルは無効になり、過去の判定には残ります。")
    if st.button("スコア設定を保存", key="rv_labels_save", type="primary"):
        rows = [{"name": r["ラベル"], "description": r["説明"] or "", "active": bool(r["有効"])}
                for r in edited.to_dict("records") if str(r.get("ラベル") or "").strip()]
        try:
            s.save_review_labels(rows, who)
            st.session_state["rv_notice"] = ("success", "スコア設定を保存しました。")
        except (ReviewInputError, PermissionError) as exc:
            st.session_state["rv_notice"] = ("error", str(exc))
        st.rerun()
