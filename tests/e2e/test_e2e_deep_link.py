"""The first visit to a freshly started server on a page's own address (a bookmark, or a tab that
reloads after the server restarted) must run the app's navigation, not the page file on its own."""
from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.helpers import RERUN


def test_first_visit_to_a_fresh_server_on_a_deep_link_runs_the_app(new_browser, fresh_server):
    page = new_browser()
    page.goto(f"{fresh_server.url}/diagnosis")
    title = page.get_by_role("heading", level=1).first
    error = page.locator('[data-testid="stException"]')
    expect(title.or_(error).first).to_be_visible(timeout=RERUN)
    expect(error).to_have_count(0, timeout=1_000)
    expect(title).to_contain_text("車両問診")
    expect(page.locator('[data-testid="stSidebarNav"]')).to_be_visible()
