"""予約管理: bookings made in the diagnosis chat (console or API) — list, filter by status / urgency /
date, open the conversation, confirm or cancel (cancelling asks first). The list is read a page at a time
(filters in the database, cached by ``ui.cache`` until a booking changes); the CSV is built on click."""
from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
import streamlit as st

from core.text.jst import jst
from core.text.markup import safe_text
from ui import cache, pager
from ui.session import identity, leave_pages_directory_mode, provider_caption, store

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

STATUS = {"requested": "🟡 受付", "confirmed": "🟢 確定", "cancelled": "⚪ キャンセル"}
URGENCY = {"critical": "🚨 緊急", "high": "高", "medium": "中", "low": "低", "none": "なし"}
TYPES = {"dispatch": "ロードサービス・出張点検", "visit": "来店予約"}
EXPORT_LIMIT = 10_000  # bookings in one CSV
FIELD_LABELS = {"name": "お名前", "phone": "電話番号", "address": "現在地・住所", "preferred_datetime": "希望日時",
                "note": "備考"}

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
filters = {"status": statuses, "urgency": urgencies, "date_from": start.isoformat() if start else None,
           "date_to": end.isoformat() if end else None}
offset = pager.current_offset("bk", tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in filters.items()))
bookings, total = cache.bookings_page(**filters, offset=offset, limit=pager.PAGE_SIZE)
if (last := pager.clamp("bk", total)) is not None:
    bookings, total = cache.bookings_page(**filters, offset=last, limit=pager.PAGE_SIZE)
if not total:
    st.info("条件に合う予約はありません。")
    st.stop()


def _table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{"予約番号": b["number"], "状態": STATUS.get(b["status"], b["status"]),
                          "緊急度": URGENCY.get(b["urgency"] or "none", b["urgency"]),
                          "種別": TYPES.get(b["booking_type"], b["booking_type"]), "車両": b["vehicle_label"],
                          "お名前": b["contact"].get("name", ""), "症状": b["symptom"][:40],
                          "受付日時": jst(b["created_at"])} for b in rows])


def _csv():
    """Every booking the filters find (up to ``EXPORT_LIMIT``), made when the button is clicked."""
    shared, query = store(), {k: (v or None) for k, v in filters.items()}
    return lambda: _table(shared.list_bookings(**query, limit=EXPORT_LIMIT)).to_csv(index=False).encode("utf-8-sig")


selected = pager.selection("bk", "bk_table", [b["number"] for b in bookings])
st.dataframe(_table(bookings), hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
             key="bk_table")
pager.pager("bk", total, len(bookings))
st.download_button("CSV（Excel 用）", _csv(), file_name="bookings.csv", mime="text/csv", key="bk_csv")
booking = store().get_booking(selected) if selected else None  # the selected booking, read alone and fresh
if booking is None:
    st.stop()
number = booking["number"]


def _set(status: str) -> None:
    try:
        store().set_booking_status(number, status, identity())
        st.toast(f"{number} を「{STATUS[status]}」にしました。", icon="✅")
    except (PermissionError, ValueError) as exc:
        st.toast(str(exc), icon="⚠️")
    state.bk_cancel_confirm = None


st.divider()
st.subheader(f"予約 {number}")
st.markdown("\n".join(f"- **{FIELD_LABELS.get(k, safe_text(k, single_line=True))}:** {safe_text(str(v), single_line=True) or '—'}"
                      for k, v in booking["contact"].items()))
st.caption(f"{TYPES.get(booking['booking_type'], booking['booking_type'])} · 緊急度 "
           f"{URGENCY.get(booking['urgency'] or 'none', booking['urgency'])} · 受付 {jst(booking['created_at'])}"
           f"（{safe_text(booking['created_by_label'], single_line=True) or '—'}）")
if booking["symptom"]:
    st.markdown(f"**症状:** {safe_text(booking['symptom'], single_line=True)}")
if booking.get("conversation_id"):
    st.page_link("pages/diagnosis.py", label="問診の会話を開く", icon="🚗",
                 query_params={"session": booking["conversation_id"]})
if booking["status"] != "cancelled":
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
        st.caption(f"{jst(a['at'])} · {safe_text(a['actor_label'], single_line=True)} · {a['action']}")
