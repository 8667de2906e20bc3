"""予約管理: bookings made in the diagnosis chat (console or API) — list (the most urgent first, or the newest
first), filter by status / urgency / date, open the conversation, confirm or cancel (cancelling asks first). The list is read a page at a time
(filters in the database, cached by ``ui.cache`` until a booking changes); the CSV is built on click."""
from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
import streamlit as st

from core.diagnosis.bookings import STATUS_LABELS, action_label, bookings_csv, contact_label, type_label, urgency_label
from core.diagnosis.view import LEVEL_LABELS
from core.text.jst import jst
from ui import cache, outage, pager, safe
from ui.display_name import recorded_as
from ui.session import identity, leave_pages_directory_mode, provider_caption, store

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

ICONS = {"requested": "🟡", "confirmed": "🟢", "cancelled": "⚪"}
STATUS = {k: f"{ICONS[k]} {v}" for k, v in STATUS_LABELS.items()}
URGENCY = {**LEVEL_LABELS, "critical": f"🚨 {LEVEL_LABELS['critical']}"}
EXPORT_LIMIT = 10_000  # bookings in one CSV
# the most urgent first by default (🚨 緊急 above 高, issue #24); newest first on request
ORDERS = {"urgency": "緊急度の高い順", "newest": "受付の新しい順"}

st.title("📅 予約管理")
provider_caption()
state = st.session_state
who = identity()

status_col, urgency_col, date_col = st.columns(3)
statuses = status_col.multiselect("状態", list(STATUS), default=["requested", "confirmed"], format_func=STATUS.get,
                                  placeholder="すべて", key="bk_status", select_all=False)
urgencies = urgency_col.multiselect("緊急度", list(URGENCY), format_func=URGENCY.get, placeholder="すべて", key="bk_urgency", select_all=False)
today = date.today()
period = date_col.date_input("受付日", value=(today - timedelta(days=30), today), key="bk_dates")
start, end = (period if isinstance(period, (list, tuple)) and len(period) == 2 else (None, None))
filters = {"status": statuses, "urgency": urgencies, "date_from": start.isoformat() if start else None,
           "date_to": end.isoformat() if end else None}
order = st.radio("並び順", list(ORDERS), format_func=ORDERS.get, horizontal=True, key="bk_order")
offset = pager.current_offset("bk", tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in filters.items())
                              + (("order", order),))
bookings, total = cache.bookings_page(**filters, offset=offset, limit=pager.PAGE_SIZE, order=order)
if (last := pager.clamp("bk", total)) is not None:
    bookings, total = cache.bookings_page(**filters, offset=last, limit=pager.PAGE_SIZE, order=order)
if not total:
    st.info("条件に合う予約はありません。")
    st.stop()


def _table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{"予約番号": b["number"], "状態": STATUS.get(b["status"], b["status"]),
                          "緊急度": URGENCY.get(b["urgency"] or "none", urgency_label(b["urgency"])),
                          "種別": type_label(b["booking_type"]), "車両": b["vehicle_label"],
                          "お名前": b["contact"].get("name", ""), "症状": b["symptom"][:40],
                          "受付日時": jst(b["created_at"])} for b in rows])


def _csv():
    """Every booking the filters find (up to ``EXPORT_LIMIT``), made when the button is clicked."""
    shared, query = store(), {k: (v or None) for k, v in filters.items()}
    return lambda: bookings_csv(shared.list_bookings(**query, limit=EXPORT_LIMIT))


selected = pager.selection("bk", "bk_table", [b["number"] for b in bookings])
safe.table(_table(bookings), hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
           key="bk_table")
pager.pager("bk", total, len(bookings))
st.download_button("CSV（Excel 用）", _csv(), file_name="bookings.csv", mime="text/csv", key="bk_csv",
                   help="電話番号・住所・希望日時・症状の全文を含みます（日時は日本時間）。")
booking = store().get_booking(selected) if selected else None  # the selected booking, read alone and fresh
if booking is None:
    st.stop()
number = booking["number"]


@outage.protect
def _set(status: str) -> None:
    try:
        store().set_booking_status(number, status, identity())
        st.toast(f"{number} を「{STATUS[status]}」にしました。", icon="✅")
    except (PermissionError, ValueError) as exc:
        st.toast(safe.lines(str(exc)), icon="⚠️")
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
