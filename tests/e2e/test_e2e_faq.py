"""FAQ in a real browser: an answer citing its KB article (an expander that opens to the article),
kept across a reload of the page."""
from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.helpers import FIRST_ANSWER, RERUN, go_to, messages, open_app, send, session_id

QUESTION = "オイル交換の目安は？"


def test_faq_answer_with_a_citation_is_kept_after_a_reload(new_browser, server, server_store):
    page = new_browser()
    open_app(page, server.url)
    go_to(page, "FAQ")
    send(page, QUESTION)
    chat = messages(page)
    expect(chat).to_have_count(2, timeout=FIRST_ANSWER)  # the first answer may build the FAQ vectors
    citation = chat.nth(1).locator('[data-testid="stExpander"]').filter(has_text="📄 kb:")
    expect(citation.first).to_be_visible(timeout=RERUN)
    expect(citation.first).to_contain_text("オイル交換の目安")
    answer = chat.nth(1).locator('[data-testid="stMarkdown"]').first.inner_text()
    sid = session_id(page)
    assert [t["user"] for t in server_store.chat_entries(sid)] == [QUESTION]

    page.reload()
    expect(chat).to_have_count(2, timeout=RERUN)
    assert session_id(page) == sid
    expect(chat.nth(0)).to_contain_text(QUESTION)
    expect(chat.nth(1)).to_contain_text(answer.strip().splitlines()[0])
    expect(citation.first).to_be_visible()
    citation.first.locator("summary").click()  # the expander opens to the cited article
    expect(citation.first).to_contain_text("5,000km")
