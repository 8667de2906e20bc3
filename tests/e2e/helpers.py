"""Small Playwright helpers for the Streamlit console: send a chat message (with files), wait for a
rerun to settle, navigate through the sidebar, and read the conversation id from the URL."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from typing import Callable

from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

CHAT_INPUT = '[data-testid="stChatInput"]'
MESSAGE = '[data-testid="stChatMessage"]'
RERUN = 60_000  # ms: one ordinary rerun on a busy, shared 2-core machine
FIRST_ANSWER = 180_000  # ms: the first diagnosis / FAQ answer may build the search index first


def open_app(page: Page, url: str, path: str = "") -> None:
    page.goto(f"{url}/{path}")
    settle(page)


def idle(page: Page, timeout: float = RERUN) -> None:
    """Wait until no script run is in progress (Streamlit's running icon is gone)."""
    expect(page.locator('[data-testid="stStatusWidgetRunningIcon"]')).to_have_count(0, timeout=timeout)


def fill_when_idle(page: Page, locate: Callable[[], Locator], value: str, *,
                   prepare: Callable[[], None] | None = None, attempts: int = 4) -> Locator:
    """Fill the field ``locate()`` finds once the page is idle. A rerun that starts in between can
    make the field inert or redraw its container (a CI run timed out on a filter box that way), so
    each attempt waits for idle, runs ``prepare`` (e.g. reopen an expander) and finds the field again."""
    for attempt in range(attempts):
        idle(page)
        if prepare is not None:
            prepare()
        box = locate()
        try:
            expect(box).to_be_editable(timeout=RERUN / 4)
            box.fill(value, timeout=RERUN / 4)
            return box
        except (PlaywrightTimeoutError, AssertionError):
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def choose(page: Page, key: str, option: str, attempts: int = 4) -> None:
    """Pick ``option`` in the select box (or multiselect) ``key`` once the page is idle: typed (long lists are
    virtual), then Enter on the one option left, which has the keyboard's focus. A click on it waited for the
    list to stand still, and under load a rerun kept moving it for a minute (a CI run timed out so); a rerun
    that closes the list meanwhile makes the attempt start again."""
    for attempt in range(attempts):
        idle(page)
        page.locator(f".st-key-{key}").click()
        page.keyboard.press("Control+A")  # in the box's own input: what it held is typed over
        page.keyboard.type(option)
        try:
            expect(page.get_by_role("option", name=option, exact=True)).to_be_visible(timeout=RERUN / 4)
            page.keyboard.press("Enter")
            page.wait_for_function(  # the chosen value shows as text or as the value of the box's input
                """([key, option]) => { const box = document.querySelector(`.st-key-${key}`);
                    return !!box && (box.innerText.includes(option)
                                     || [...box.querySelectorAll("input")].some(i => i.value.includes(option))); }""",
                arg=[key, option], timeout=RERUN / 4)
            idle(page)
            return
        except (PlaywrightTimeoutError, AssertionError):
            page.keyboard.press("Escape")
            if attempt == attempts - 1:
                raise


def settle(page: Page, timeout: float = RERUN) -> None:
    """Wait until the page's title has drawn (each test then waits for the text it expects)."""
    expect(page.get_by_role("heading", level=1).first).to_be_visible(timeout=timeout)


def send(page: Page, text: str, files: list[dict] | None = None) -> None:
    """Type into the chat input (attaching ``files`` as Playwright file payloads) and press Enter,
    once the previous run has finished."""
    idle(page)
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
