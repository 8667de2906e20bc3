"""予約管理: bookings made in the diagnosis chat (console or API) — list, filter by status / urgency /
date, open the conversation, confirm or cancel (cancelling asks first)."""
from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
import streamlit as st

from core.diagnosis.bookings import STATUS_LABELS, action_label, bookings_csv, contact_label, type_label, urgency_label
from core.diagnosis.view import LEVEL_LABELS
from core.text.jst import jst
from ui import outage, safe
from ui.display_name import recorded_as
from ui.session import identity, leave_pages_directory_mode, provider_caption, store

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

ICONS = {"requested": "🟡", "confirmed": "🟢", "cancelled": "⚪"}
STATUS = {k: f"{ICONS[k]} {v}" for k, v in STATUS_LABELS.items()}
URGENCY = {**LEVEL_LABELS, "critical": f"🚨 {LEVEL_LABELS['critical']}"}

st.title("📅 予約管理")
provider_caption()
state = st.session_state
who = identity()

status_col, urgency_col, date_col = st.columns(3)
statuses = status_col.multiselect("状態", list(STATUS), default=["requested", "confirmed"], format_func=STATUS.get,
                                  placeholder="すべて", key="bk_status")
urgencies = urgency_col.multiselect("緊急度", list(URGENCY), format_func=URGENCY.get, placeholder="すべて", key="bk_urgency")
today = date.today()
period = date_col.date_input("受付日", value=(today - timedelta(days=30), today), key="bk_dates")
start, end = (period if isinstance(period, (list, tuple)) and len(period) == 2 else (None, None))
bookings = store().list_bookings(status=statuses or None, urgency=urgencies or None,
                                 date_from=start.isoformat() if start else None, date_to=end.isoformat() if end else None)
if not bookings:
    st.info("条件に合う予約はありません。")
    st.stop()

table = pd.DataFrame([{"予約番号": b["number"], "状態": STATUS.get(b["status"], b["status"]),
                       "緊急度": URGENCY.get(b["urgency"] or "none", urgency_label(b["urgency"])),
                       "種別": type_label(b["booking_type"]), "車両": b["vehicle_label"],
                       "お名前": b["contact"].get("name", ""), "症状": b["symptom"][:40],
                       "受付日時": jst(b["created_at"])} for b in bookings])
picked = safe.table(table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                    key="bk_table")
st.caption(f"{len(bookings)} 件。行を選ぶと詳細と操作を表示します。")
st.download_button("CSV（Excel 用）", bookings_csv(bookings), file_name="bookings.csv",
                   mime="text/csv", key="bk_csv", help="電話番号・住所・希望日時・症状の全文を含みます（日時は日本時間）。")
rows = picked.selection.rows if picked and picked.selection else []
if not rows:
    st.stop()
booking = bookings[rows[0]]
number = booking["number"]


@outage.protect
def _set(status: str) -> None:
    try:
        store().set_booking_status(number, status, identity())
        st.toast(f"{number} を「{STATUS[status]}」にしました。", icon="✅")
    except (PermissionError, ValueError) as exc:
        st.toast(str(exc), icon="⚠️")
    state.bk_cancel_confirm = None


st.divider()
st.subheader(f"予約 {number}")
st.markdown("\n".join(f"- **{safe.plain(contact_label(k))}:** {safe.plain(v) or '—'}"
                      for k, v in booking["contact"].items()))
st.caption(f"{type_label(booking['booking_type'])} · 緊急度 {urgency_label(booking['urgency'])} · "
           f"受付 {jst(booking['created_at'])}（{safe.plain(booking['created_by_label']) or '—'}）")
if booking["symptom"]:
    st.markdown(f"**症状:** {safe.plain(booking['symptom'])}")
if booking.get("conversation_id"):
    st.page_link("pages/diagnosis.py", label="問診の会話を開く", icon="🚗",
                 query_params={"session": booking["conversation_id"]})
if booking["status"] != "cancelled":
    recorded_as(who)
    c1, c2 = st.columns(2)
    if booking["status"] == "requested":
        c1.button("確定にする", key="bk_confirm", on_click=_set, args=("confirmed",), type="primary",
                  disabled=not who.can("booking.update"))
    if state.get("bk_cancel_confirm") != number:
        c2.button("キャンセルする", key="bk_cancel", on_click=lambda: state.update(bk_cancel_confirm=number),
                  disabled=not who.can("booking.update"))
    else:
        st.warning(f"予約 {number} をキャンセルします。キャンセルした予約は元に戻せません。よろしいですか？")
        y, n = st.columns(2)
        y.button("はい、キャンセルする", key="bk_cancel_yes", on_click=_set, args=("cancelled",), type="primary")
        n.button("いいえ", key="bk_cancel_no", on_click=lambda: state.update(bk_cancel_confirm=None))
with st.expander("🕘 操作履歴"):
    for a in store().list_audit("booking", number):
        st.caption(f"{jst(a['at'])} · {safe.plain(a['actor_label'])} · {action_label(a['action'])}")
