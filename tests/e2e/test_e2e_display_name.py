"""The typed display name in a real browser (issue #15): typed once, it survives a reload and a new tab
of the same browser (a cookie written by the cookie component, read back by Streamlit), is shown as
「未確認」, and a different browser does not get it."""
from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.helpers import RERUN, idle, open_app

NAME = "山田 太郎"
COOKIE = "kaiwa_display_name"
NAME_INPUT = 'input[aria-label="表示名（最初に一度だけ入力してください）"]'


def test_the_display_name_survives_a_reload(new_browser, server):
    page = new_browser()
    open_app(page, server.url)
    sidebar = page.locator('[data-testid="stSidebar"]')
    box = sidebar.locator(NAME_INPUT)
    box.fill(NAME)
    box.press("Enter")
    expect(sidebar).to_contain_text(f"{NAME}（未確認）", timeout=RERUN)
    page.wait_for_function(f"() => document.cookie.includes('{COOKIE}=')", timeout=RERUN)
    idle(page)

    page.reload()
    expect(sidebar).to_contain_text(f"{NAME}（未確認）", timeout=RERUN)
    expect(sidebar.locator(NAME_INPUT)).to_have_count(0)

    second_tab = page.context.new_page()  # same browser, new tab: a new Streamlit session
    open_app(second_tab, f"{server.url}/library")
    expect(second_tab.locator('[data-testid="stSidebar"]')).to_contain_text(f"{NAME}（未確認）", timeout=RERUN)

    other = new_browser()  # another browser has its own cookies
    open_app(other, server.url)
    expect(other.locator('[data-testid="stSidebar"]')).to_contain_text("匿名", timeout=RERUN)
