"""契約ナレッジ作成 in a real browser: a case typed with a DOCX and a PDF attached, a reload in the
middle of the interview that resumes it, the draft confirmed, and the entry listed in the library."""
from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

from tests.e2e.helpers import RERUN, go_to, messages, open_app, send, session_id, wait_for_session
from tests.helpers.documents import make_docx

PDF = Path(__file__).resolve().parents[3] / "shared/testdata/pdf-samples/minimal-document.pdf"
CASE = "業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。添付の契約書を見てください。"
POLICY = "委託料総額を上限とするよう修正を求めるべきです。「賠償額は委託料総額を上限とする。」"


def attachments() -> list[dict]:
    docx = make_docx(["業務委託契約書", "第8条（損害賠償）乙は一切の損害を賠償する。"],
                     [["項目", "金額"], ["委託料", "月額50万円"]], [])
    return [{"name": "contract.docx", "buffer": docx,
             "mimeType": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
            {"name": "appendix.pdf", "buffer": PDF.read_bytes(), "mimeType": "application/pdf"}]


def test_interview_with_uploads_resumes_after_reload_and_lands_confirmed_in_the_library(new_browser, server,
                                                                                        server_store):
    page = new_browser()
    open_app(page, server.url)
    sid = wait_for_session(page)

    send(page, CASE, attachments())
    chat = messages(page)
    expect(chat).to_have_count(2, timeout=RERUN)
    expect(chat.nth(0)).to_contain_text(CASE)
    expect(chat.nth(0)).to_contain_text("contract.docx")
    expect(chat.nth(0)).to_contain_text("appendix.pdf")
    expect(chat.nth(1)).to_contain_text("第8条")
    first_reply = chat.nth(1).inner_text()

    page.reload()  # mid-interview: the same conversation comes back from the store
    expect(chat).to_have_count(2, timeout=RERUN)
    assert session_id(page) == sid
    expect(chat.nth(0)).to_contain_text(CASE)
    expect(chat.nth(0)).to_contain_text("contract.docx")
    expect(chat.nth(1)).to_contain_text(first_reply.strip().splitlines()[-1])
    expect(page.get_by_text("② リスク整理")).to_be_visible()

    send(page, POLICY)
    expect(chat).to_have_count(4, timeout=RERUN)
    confirm = page.get_by_role("button", name="このナレッジを確定する")
    expect(confirm).to_be_visible(timeout=RERUN)
    [entry] = server_store.conversation_outputs(sid)
    assert entry["status"] == "draft"
    confirm.click()
    expect(page.get_by_text("確定済み · No.")).to_be_visible(timeout=RERUN)
    assert server_store.get_entry(entry["id"])["status"] == "confirmed"

    go_to(page, "ナレッジライブラリ")
    grid = page.locator('[data-testid="stDataFrame"]')
    expect(grid).to_contain_text(entry["knowledge_title"], timeout=RERUN)
    expect(grid).to_contain_text("確定済み")
