"""Japan time for people: stored timestamps are UTC ISO strings; the UI, exports and filters show JST."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

JST = timezone(timedelta(hours=9))


def jst_date(iso: str | None) -> date | None:
    """The JST calendar date of a stored timestamp (None when it cannot be read)."""
    try:
        return datetime.fromisoformat(str(iso)).astimezone(JST).date()
    except (TypeError, ValueError):
        return None


def jst(iso: str | None) -> str:
    """A stored UTC timestamp as Japan time for the UI (``2026-11-23 17:05``; ``—`` when unset)."""
    if not iso:
        return "—"
    try:
        return datetime.fromisoformat(iso).astimezone(JST).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso[:40]


def jst_stamp(iso: str | None) -> str:
    """A stored UTC timestamp for an export: Japan time with its offset, ``2026-11-23 17:05:12+09:00``
    (empty when unset), so a spreadsheet reader never mistakes it for UTC or local time."""
    if not iso:
        return ""
    try:
        return datetime.fromisoformat(str(iso)).astimezone(JST).isoformat(sep=" ", timespec="seconds")
    except ValueError:
        return str(iso)[:40]
