"""Bookings for people: the Japanese labels of a booking's status, type, urgency and history, and the
bookings CSV the desk works from.

The CSV carries what the desk needs to act on a booking — the customer's name, phone, address or
requested date and time, the full symptom, the vehicle, urgency and whether it may be driven — with
statuses in Japanese, times in Japan time with the offset and people by their names, never an internal
id; every cell is safe for a spreadsheet (:mod:`core.text.spreadsheet`).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from core.diagnosis.steps.reservation import BOOKING_FIELDS, BOOKING_TYPE_LABELS
from core.diagnosis.view import LEVEL_LABELS, drive_label
from core.text.jst import jst_stamp
from core.text.spreadsheet import csv_bytes

STATUS_LABELS = {"requested": "受付", "confirmed": "確定", "cancelled": "キャンセル"}
# The audit log's actions on a booking, as the history shows them.
ACTION_LABELS = {"booking.create": "受付", "booking.requested": "受付に戻す", "booking.confirmed": "確定",
                 "booking.cancelled": "キャンセル"}
CONTACT_LABELS = {field.name: field.label for fields in BOOKING_FIELDS.values() for field in fields}
CONTACT_LABELS.setdefault("note", "備考")


def status_label(status: str | None) -> str:
    return STATUS_LABELS.get(status or "", status or "—")


def type_label(booking_type: str | None) -> str:
    return BOOKING_TYPE_LABELS.get(booking_type or "", booking_type or "—")


def urgency_label(urgency: str | None) -> str:
    return LEVEL_LABELS.get(urgency or "none", urgency or "—")


def action_label(action: str | None) -> str:
    return ACTION_LABELS.get(action or "", "操作")


def contact_label(field: str) -> str:
    return CONTACT_LABELS.get(field, field)


def desk_row(booking: Mapping[str, Any]) -> dict[str, Any]:
    """One booking as the desk reads it (Japanese column names)."""
    contact = booking.get("contact") or {}
    row: dict[str, Any] = {
        "予約番号": booking.get("number", ""), "状態": status_label(booking.get("status")),
        "種別": type_label(booking.get("booking_type")), "緊急度": urgency_label(booking.get("urgency")),
        "自走": drive_label(booking.get("can_drive")), "車両": booking.get("vehicle_label") or "",
    }
    for field in ("name", "phone", "address", "preferred_datetime"):
        row[CONTACT_LABELS[field]] = str(contact.get(field) or "")
    extra = [f"{contact_label(k)}: {v}" for k, v in contact.items()
             if k not in ("name", "phone", "address", "preferred_datetime") and v]
    row["その他の入力"] = " / ".join(extra)
    row["症状"] = booking.get("symptom") or ""
    row["受付日時（日本時間）"] = jst_stamp(booking.get("created_at"))
    row["受付者"] = booking.get("created_by_label") or ""
    row["最終更新（日本時間）"] = jst_stamp(booking.get("updated_at"))
    row["最終更新者"] = booking.get("updated_by_label") or ""
    return row


def bookings_csv(bookings: Iterable[Mapping[str, Any]]) -> bytes:
    """The bookings CSV for the desk (UTF-8 with BOM, Japanese headers, one row per booking)."""
    import pandas as pd  # lazy: pandas is heavy and only the export needs it

    rows = [desk_row(b) for b in bookings]
    return csv_bytes(pd.DataFrame(rows, columns=list(desk_row({}).keys())))
