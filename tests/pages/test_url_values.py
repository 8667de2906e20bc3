"""Every value taken from the URL is shown as text on every page (issue 23): ``?conversation=`` of
デバッグログ (a markdown image or a ``[text](url)`` id), ``?session=`` of the chat pages and ``?entry=`` of the
library, each set to hostile markdown on every page, never render as a link or an image
(``tests/pages/hostile.py``: ``assert_inert``)."""
from __future__ import annotations

import pytest

from core.store import get_store
from tests.pages import hostile
from tests.pages.test_outside_text import visit


@pytest.fixture
def seeded():
    return hostile.seed(get_store())  # records, conversations, entries: every page draws its full layout

IMAGE_ID = f"![x](http://{hostile.OUTSIDE}/x.png)"
LINK_ID = f"[開く](http://{hostile.OUTSIDE}/phish)"
PAGES = (None, "pages/diagnosis.py", "pages/faq.py", "pages/library.py", "pages/bookings.py", "pages/debug_log.py",
         "pages/analytics.py", "pages/manual_admin.py", "pages/ask_knowledge.py")


@pytest.mark.parametrize("value", [IMAGE_ID, LINK_ID, hostile.HOSTILE_SESSION], ids=["image", "link", "both"])
def test_the_debug_log_shows_a_hostile_conversation_id_as_text(seeded, value):
    at = visit("pages/debug_log.py", params={"conversation": value})
    shown = " ".join(v for _, v in hostile.markup_strings(at))
    assert "127.0.0.1:9" in shown or any(value == t.value for t in at.text_input)  # it is on the page…
    hostile.assert_inert(at, f"debug log ?conversation={value}")  # …as text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p or "knowledge")
def test_every_url_value_is_text_on_every_page(seeded, page):
    params = {"conversation": LINK_ID, "entry": IMAGE_ID, "session": hostile.HOSTILE_SESSION, "q": IMAGE_ID}
    at = visit(page, params=params)
    hostile.assert_inert(at, f"{page} with hostile query values")
