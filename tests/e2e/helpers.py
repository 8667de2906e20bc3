"""Small Playwright helpers for the Streamlit console: send a chat message (with files), wait for a
rerun to settle, navigate through the sidebar, and read the conversation id from the URL."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Page, expect

CHAT_INPUT = '[data-testid="stChatInput"]'
MESSAGE = '[data-testid="stChatMessage"]'
RERUN = 60_000  # ms: one ordinary rerun on a busy, shared 2-core machine
FIRST_ANSWER = 180_000  # ms: the first diagnosis / FAQ answer may build the search index first


def open_app(page: Page, url: str, path: str = "") -> None:
    page.goto(f"{url}/{path}")
    settle(page)


def settle(page: Page, timeout: float = RERUN) -> None:
    """Wait until the page's title has drawn (each test then waits for the text it expects)."""
    expect(page.get_by_role("heading", level=1).first).to_be_visible(timeout=timeout)


def send(page: Page, text: str, files: list[dict] | None = None) -> None:
    """Type into the chat input (attaching ``files`` as Playwright file payloads) and press Enter."""
    box = page.locator(CHAT_INPUT)
    if files:
        box.locator("input[type=file]").set_input_files(files)
        for item in files:  # the chip of each attachment shows before sending
            expect(box).to_contain_text(item["name"], timeout=RERUN)
    box.locator("textarea").fill(text)
    box.locator("textarea").press("Enter")


def messages(page: Page):
    return page.locator(MESSAGE)


def session_id(page: Page) -> str:
    values = parse_qs(urlparse(page.url).query).get("session") or [""]
    return values[0]


def wait_for_session(page: Page) -> str:
    page.wait_for_url("**?session=*", timeout=RERUN)
    return session_id(page)


def go_to(page: Page, title: str) -> None:
    """Click the sidebar navigation link with this page title."""
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).click()
    expect(page.get_by_role("heading", level=1).first).to_contain_text(title, timeout=RERUN)
    settle(page)
