"""The reviewers' loop in a real browser (issue #22), behind a trusted proxy's identity headers: an operator
gives a 👎 to a diagnosis answer; a reviewer (a second browser context, a verified e-mail in KAIWA_REVIEWERS)
finds it on レビュー, records 誤り with a corrected answer (urgency critical), adds it to the regression set,
and a replay of the prompt version in use shows the item failing its expectation."""
from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from core.store.store import Store
from tests.e2e.conftest import run_server
from tests.e2e.helpers import FIRST_ANSWER, RERUN, choose, go_to, idle, open_app, send, session_id

MIRAI = "kaiwa-mirai-hv-2022"
SYMPTOM = "ブレーキを踏むとキーキーと音がします"
OPERATOR = {"X-Forwarded-User": "yamada", "X-Forwarded-Email": "yamada@example.jp"}
REVIEWER = {"X-Forwarded-User": "sato", "X-Forwarded-Email": "sato@example.jp"}


@pytest.fixture(scope="module")
def review_server(tmp_path_factory, chromium_path):
    env = {"KAIWA_TRUST_PROXY_HEADERS": "1", "KAIWA_REVIEWERS": "sato@example.jp", "KAIWA_REVIEW_SAMPLE": "0"}
    with run_server(tmp_path_factory.mktemp("e2e-review"), env) as running:
        yield running


def browser_as(chromium, headers):
    context = chromium.new_context(viewport={"width": 1400, "height": 1200}, locale="ja-JP", timezone_id="Asia/Tokyo",
                                   extra_http_headers=headers)
    context.set_default_timeout(60_000)
    return context, context.new_page()


def key(page, name: str):
    return page.locator(f".st-key-{name}")


def test_thumbs_down_review_regression_case_and_replay(chromium, review_server, tmp_path):
    store = Store(review_server.db_url)
    operator_context, page = browser_as(chromium, OPERATOR)
    reviewer_context, reviewer = browser_as(chromium, REVIEWER)
    try:
        # the operator: a diagnosis answer, and a 👎 on it
        open_app(page, review_server.url)
        go_to(page, "車両問診")
        key(page, f"diag_vehicle_{MIRAI}").locator("button").click()
        key(page, "diag_choice_yes").locator("button").click(timeout=RERUN)
        expect(page.get_by_placeholder("症状を入力してください")).to_be_visible(timeout=RERUN)
        chat = page.locator('[data-testid="stChatMessage"]')
        send(page, SYMPTOM)
        sid = session_id(page)
        expect(chat.filter(has_text=SYMPTOM)).to_have_count(1, timeout=FIRST_ANSWER)
        deadline = time.monotonic() + FIRST_ANSWER / 1000  # the answer is stored before it is shown
        while not any(e.get("text") == SYMPTOM for e in store.chat_entries(sid)) or \
                store.chat_entries(sid)[-1]["role"] != "assistant":
            assert time.monotonic() < deadline, "the symptom was never answered"
            time.sleep(0.5)
        idle(page, FIRST_ANSWER)
        entries = store.chat_entries(sid)
        answer = max(i for i, e in enumerate(entries) if e["role"] == "assistant")
        thumbs = key(page, f"fb_diagnosis_{sid}_{answer}").locator("button")
        expect(thumbs).to_have_count(2, timeout=RERUN)
        thumbs.nth(1).click()  # 👍 then 👎
        expect(page.get_by_text("レビュー待ちに追加しました", exact=False)).to_be_visible(timeout=RERUN)
        [feedback] = store.list_feedback(sid)
        assert (feedback["turn"], feedback["rating"], feedback["given_by"]) == (answer, "down", "yamada@example.jp")
        original = entries[answer]["response"]["urgency"]["level"]
        assert original != "critical"

        # the reviewer, in another browser: finds it, records 誤り with the right urgency
        open_app(reviewer, review_server.url)
        go_to(reviewer, "レビュー")
        expect(key(reviewer, "rv_table")).to_be_visible(timeout=RERUN)
        key(reviewer, "rv_claim_next").locator("button").click()
        expect(reviewer.get_by_text("あなたが担当中です")).to_be_visible(timeout=RERUN)
        [item] = [i for i in store.review_page() if i["conversation_id"] == sid]
        assert (item["turn"], item["reason"], item["claimed_by"]) == (answer, "thumbs_down", "sato@example.jp")
        expect(reviewer.get_by_text(SYMPTOM).first).to_be_visible()
        key(reviewer, f"rv_verdict_{item['id']}").get_by_text("誤り", exact=True).click()
        idle(reviewer)
        choose(reviewer, f"rv_fix_{item['id']}_urgency", "critical（緊急）")
        key(reviewer, f"rv_fix_{item['id']}_text").locator("textarea").fill("ブレーキの異音は点検まで走行を控えてください。")
        choose(reviewer, f"rv_labels_{item['id']}", "緊急度の誤り")
        reviewer.keyboard.press("Escape")
        idle(reviewer)
        key(reviewer, f"rv_record_{item['id']}").locator("button").click()
        expect(reviewer.get_by_text("判定を記録しました")).to_be_visible(timeout=RERUN)
        done = store.get_review_item(item["id"])
        assert (done["verdict"], done["labels"], done["reviewed_by"]) == ("incorrect", ["緊急度の誤り"], "sato@example.jp")
        assert done["corrected_answer"]["urgency"] == "critical"

        # one click: a regression case; the replay of the prompt version in use fails its expectation
        key(reviewer, f"rv_regress_{item['id']}").locator("button").click()
        expect(reviewer.get_by_text("回帰ケース No.1 を追加しました")).to_be_visible(timeout=RERUN)
        [case] = store.list_review_scenarios()
        assert case["scenario"]["expect"]["urgency"] == "critical"
        reviewer.get_by_role("tab", name="回帰セット").click()
        key(reviewer, "rv_replay_run").locator("button").click()
        metric = reviewer.locator('[data-testid="stMetricValue"]').filter(has_text="0 / 1")
        expect(metric).to_have_count(1, timeout=FIRST_ANSWER)  # matched the reviewer on 0 of 1 cases
        idle(reviewer)
        reviewer.get_by_role("tab", name="回帰セット").click()
        expect(metric).to_be_visible(timeout=RERUN)
        expect(reviewer.get_by_role("tabpanel", name="回帰セット").get_by_test_id("stDataFrame")).to_be_visible()
    finally:
        operator_context.close()
        reviewer_context.close()
        store.engine.dispose()
