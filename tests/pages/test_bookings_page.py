"""予約管理 (AppTest): bookings read one page at a time with a total, the selected booking read alone by its
number (a row of another page is never shown for it), and the CSV built when it is clicked."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.store import get_store
from tests.pages.conftest import APP


def seed(n: int) -> list[str]:
    """``n`` bookings, oldest first; every third one critical."""
    store = get_store()
    return [store.create_booking(None, booking_type="visit", contact={"name": f"客{i}", "phone": "090-0000-0000"},
                                 urgency="critical" if i % 3 == 0 else "low", symptom=f"症状{i}") for i in range(n)]


def bookings() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/bookings.py").run()
    assert not at.exception, at.exception
    return at


def test_bookings_are_read_one_page_at_a_time_and_the_selection_stays_on_its_booking():
    numbers = seed(75)
    at = bookings()
    assert set(at.dataframe[0].value["緊急度"][:25]) == {"🚨 緊急"}  # the most urgent first by default (issue #24)
    at.radio(key="bk_order").set_value("newest").run()
    assert list(at.dataframe[0].value["予約番号"]) == numbers[::-1][:50]
    assert any(c.value.startswith("1–50 / 75 件") for c in at.caption)
    at.session_state["bk_table"] = {"selection": {"rows": [3], "columns": []}}
    at.run()
    assert any(s.value == f"予約 {numbers[71]}" for s in at.subheader)
    at.number_input(key="bk_page").set_value(2).run()
    assert list(at.dataframe[0].value["予約番号"]) == numbers[::-1][50:]
    assert at.session_state["bk_table"]["selection"]["rows"] == []  # not on this page: no other row highlighted
    assert any(s.value == f"予約 {numbers[71]}" for s in at.subheader)  # still the booking the user picked
    at.button(key="bk_confirm").click().run()
    assert get_store().get_booking(numbers[71])["status"] == "confirmed"
    at.multiselect(key="bk_urgency").set_value(["critical"]).run()  # new filters: page 1, nothing open
    assert len(at.dataframe[0].value) == 25 and not any(s.value.startswith("予約 ") for s in at.subheader)


def test_the_csv_is_built_on_click_from_every_booking_found(deferred):
    numbers = seed(60)
    at = bookings()
    at.run()
    csv = deferred["bookings.csv"]().decode("utf-8-sig").strip().splitlines()
    assert csv[0].startswith("予約番号,") and len(csv) == 61 and {line.split(",")[0] for line in csv[1:]} == set(numbers)
