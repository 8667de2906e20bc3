"""One prompt-tuning session in a real browser: a failed FAQ call recorded in the server's store is
opened from the debug log, its system prompt edited, replayed on the offline provider (old output
failing, new one passing, with the diff), and its conversation promoted to a scenario that is
checked on the page, downloaded, and passes ``core.eval``."""
from __future__ import annotations

import json

from playwright.sync_api import expect

from core.debuglog import CallTags
from core.engine import structured_call
from core.eval.runner import run_files
from core.llm.scripted import ScriptedClient
from core.prompts import render
from core.schemas import load_schema
from tests.e2e.helpers import RERUN, fill_when_idle, go_to, open_app

QUESTION = "オイル交換の目安はどのくらいですか？"
BAD = json.dumps({"intent": "faq"})
EDITED = "あなたは FAQ の意図分類器です。必ずスキーマどおりの JSON だけを返してください。"


def seed_failed_faq_call(store) -> tuple[str, int]:
    cid = store.create_conversation("faq", None, title="オイル交換（調整用）")
    store.append_turn(cid, {"user": QUESTION}, role="exchange", user_input=QUESTION, step="answered",
                      turn_json={"message": "…", "citations": ["kb:007"], "outcome": "answered"})
    log: list[dict] = []
    messages = [{"role": "system", "content": render("faq_intent_system")},
                {"role": "user", "content": QUESTION}]
    structured_call(ScriptedClient([BAD]), messages, schema=load_schema("faq_intent"), name="faq_intent",
                    context={"text": QUESTION, "previous_query": ""}, max_repairs=0, log=log,
                    tags=CallTags(session_id=cid, flow="faq", step="intent", prompt="faq_intent_system"))
    [record] = log
    assert record["outcome"] == "schema_error"
    store.add_debug_record(record, None)
    [row] = [r for r in store.list_debug_records(conversation_id=cid)]
    return cid, row["id"]


def test_open_a_failed_call_edit_the_prompt_replay_and_promote(new_browser, server, server_store, tmp_path):
    cid, record_id = seed_failed_faq_call(server_store)
    page = new_browser()
    open_app(page, server.url)
    go_to(page, "デバッグログ")

    def filters():
        return page.locator('[data-testid="stExpander"]').filter(has_text="絞り込み").first

    def open_filters():  # the filter expander starts open; reopen it if a rerun closed it
        expect(filters()).to_be_visible(timeout=RERUN)
        if not filters().get_by_label("会話 ID", exact=True).is_visible():
            filters().locator("summary").first.click()

    box = fill_when_idle(page, lambda: filters().get_by_label("会話 ID", exact=True), cid, prepare=open_filters)
    box.press("Enter")
    failed = page.locator('[data-testid="stExpander"]').filter(has_text=f"❌ #{record_id} ")
    expect(failed).to_have_count(1, timeout=RERUN)
    failed.locator("summary").first.click()
    failed.get_by_role("button", name="この呼び出しを再実行タブで開く").click()

    page.get_by_role("tab", name="再実行", exact=True).click()
    system = page.get_by_label("システムプロンプト", exact=True)
    expect(system).to_be_visible(timeout=RERUN)
    system.fill(EDITED)
    system.press("Control+Enter")
    page.get_by_role("button", name="▶️ 再実行", exact=True).click()
    expect(page.get_by_text("検証: 合格", exact=True)).to_be_visible(timeout=RERUN)
    expect(page.get_by_text("検証: 不合格（schema_error）")).to_be_visible()
    expect(page.get_by_text("旧出力（記録）")).to_be_visible()
    expect(page.locator('[data-testid="stCode"]').filter(has_text="$.intent: \"faq\" → （なし）")).to_have_count(1)

    page.get_by_role("tab", name="シナリオ化", exact=True).click()
    expect(page.get_by_label("会話 ID", exact=True).last).to_have_value(cid, timeout=RERUN)
    expect(page.get_by_text('outcome: "answered"')).to_be_visible(timeout=RERUN)
    page.get_by_role("button", name="シナリオを実行して確認").click()
    expect(page.get_by_text("シナリオは合格しました。")).to_be_visible(timeout=RERUN)
    with page.expect_download() as download:
        page.get_by_role("button", name="YAML をダウンロード").click()
    path = tmp_path / "promoted.yaml"
    download.value.save_as(path)
    [result] = run_files([path])
    assert result.passed, result.failures
    assert result.flow == "faq" and result.name == f"faq {cid}"

    # the tabs are lazy (only the open one is drawn): what was typed in 再実行 is still there on coming back
    page.get_by_role("tab", name="再実行", exact=True).click()
    expect(page.get_by_label("システムプロンプト", exact=True)).to_have_value(EDITED, timeout=RERUN)
