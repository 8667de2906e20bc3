"""車両問診 in a real browser: vehicle, photo check, a critical symptom, a reload that resumes at the
same step, the dispatch booking form, confirmation, and the booking listed on 予約管理."""
from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.helpers import FIRST_ANSWER, RERUN, go_to, messages, open_app, send, session_id

MIRAI = "kaiwa-mirai-hv-2022"
SYMPTOM = "ブレーキペダルが床まで沈む"


def button(page, key: str):
    return page.locator(f".st-key-{key} button")


def test_critical_symptom_to_a_dispatch_booking_survives_a_reload(new_browser, server, server_store):
    page = new_browser()
    open_app(page, server.url)
    go_to(page, "車両問診")
    button(page, f"diag_vehicle_{MIRAI}").click()
    button(page, "diag_choice_yes").click(timeout=RERUN)
    expect(page.get_by_placeholder("症状を入力してください")).to_be_visible(timeout=RERUN)

    send(page, SYMPTOM)
    banner = page.locator("[data-testid=\"stAlert\"]").filter(has_text="緊急度: 緊急")
    expect(banner).to_be_visible(timeout=FIRST_ANSWER)  # the first answer may build the manual index
    expect(button(page, "diag_choice_dispatch")).to_be_visible()
    expect(button(page, "diag_choice_visit")).to_have_count(0)
    chat = messages(page)
    count = chat.count()
    sid = session_id(page)

    page.reload()  # resumes at the reservation step, same conversation, same transcript
    expect(banner).to_be_visible(timeout=RERUN)
    expect(button(page, "diag_choice_dispatch")).to_be_visible()
    expect(chat).to_have_count(count)
    expect(chat.filter(has_text=SYMPTOM)).to_have_count(1)
    assert session_id(page) == sid

    button(page, "diag_choice_dispatch").click()
    page.locator(".st-key-diag_field_name input").fill("山田 太郎")
    page.locator(".st-key-diag_field_phone input").fill("090-1234-5678")
    page.locator(".st-key-diag_field_address textarea").fill("東京都テスト区1-2-3 駐車場")
    page.get_by_role("button", name="入力内容を確認する").click()
    expect(button(page, "diag_choice_confirm")).to_be_visible(timeout=RERUN)
    expect(chat.last).to_contain_text("山田 太郎")
    button(page, "diag_choice_confirm").click()
    expect(chat.last).to_contain_text("ロードサービス・出張点検を受け付けました", timeout=RERUN)

    [booking] = server_store.list_bookings(conversation_id=session_id(page))
    assert booking["contact"]["name"] == "山田 太郎" and booking["urgency"] == "critical"
    go_to(page, "予約管理")
    grid = page.locator('[data-testid="stDataFrame"]')
    expect(grid).to_contain_text(booking["number"], timeout=RERUN)
    expect(grid).to_contain_text("山田 太郎")
