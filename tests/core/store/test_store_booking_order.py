"""予約管理's triage order (issue #24): ``list_bookings(order="urgency")`` puts 🚨 緊急 above 高 above 中 …,
newest first within a level; the default stays newest first. Runs on SQLite and PostgreSQL."""
from __future__ import annotations

import pytest


def test_bookings_can_be_listed_most_urgent_first(store):
    made = {}
    for urgency in ("low", "critical", "high", None, "critical", "medium"):
        number = store.create_booking(None, booking_type="visit", contact={"name": "客"}, urgency=urgency)
        made.setdefault(urgency, []).append(number)
    ordered = [b["urgency"] for b in store.list_bookings(order="urgency")]
    assert ordered == ["critical", "critical", "high", "medium", "low", None]
    critical = [b["number"] for b in store.list_bookings(order="urgency", limit=2)]
    assert critical == made["critical"][::-1]  # newest first within a level
    newest = [b["number"] for b in store.list_bookings()]
    assert newest[0] == made["medium"][0] and newest[-1] == made["low"][0]
    assert [b["urgency"] for b in store.list_bookings(order="urgency", limit=2, offset=2)] == ["high", "medium"]
    with pytest.raises(ValueError):
        store.list_bookings(order="priority")
