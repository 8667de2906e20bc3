"""A database outage in a real browser: the console runs on a real PostgreSQL (a throwaway cluster,
``tests/helpers/pg.py``) that is stopped in the middle of a diagnosis and started again. Every page
shows the Japanese notice and never an exception; the symptom typed meanwhile is kept; once PostgreSQL
is back the notice goes away by itself (no click) and 「再送信」 stores the turn."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import expect

from core.store.db import create_scratch_database
from core.store.store import Store
from tests.e2e.conftest import run_server
from tests.e2e.helpers import FIRST_ANSWER, RERUN, go_to, idle, open_app, send, session_id
from tests.helpers.pg import ThrowawayPostgres

MIRAI = "kaiwa-mirai-hv-2022"
NOTICE = "データベースに接続できない"
PAGES = ("契約ナレッジ作成", "FAQ", "ナレッジライブラリ", "予約管理", "デバッグログ", "分析", "マニュアル管理", "車両問診")


@pytest.fixture(scope="module")
def cluster():
    pg = ThrowawayPostgres(Path(tempfile.mkdtemp(prefix="kaiwa-e2e-pg-")))  # the server runs as postgres
    yield pg
    pg.destroy()


@pytest.fixture
def pg_server(tmp_path_factory, chromium_path, cluster):
    if not cluster.running():
        cluster.start()
    with run_server(tmp_path_factory.mktemp("e2e-outage"),
                    {"KAIWA_DB_URL": create_scratch_database(cluster.url)}) as running:
        yield running
    if not cluster.running():
        cluster.start()


def button(page, key: str):
    return page.locator(f".st-key-{key} button")


def test_postgres_stopped_and_started_under_a_browser(new_browser, pg_server, cluster):
    page = new_browser()
    open_app(page, pg_server.url)
    go_to(page, "車両問診")
    button(page, f"diag_vehicle_{MIRAI}").click()
    button(page, "diag_choice_yes").click(timeout=RERUN)
    expect(page.get_by_placeholder("症状を入力してください")).to_be_visible(timeout=RERUN)
    sid = session_id(page)

    cluster.stop()
    send(page, "エアコンの風が弱い")
    notice = page.locator('[data-testid="stAlert"]').filter(has_text=NOTICE)
    expect(notice.first).to_be_visible(timeout=RERUN)
    expect(page.get_by_text("エアコンの風が弱い").first).to_be_visible()  # kept, and shown as kept
    for title in PAGES:
        page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).click()
        idle(page)
        expect(notice.first).to_be_visible(timeout=RERUN)
        expect(page.locator('[data-testid="stException"]')).to_have_count(0)
        assert "Traceback" not in page.content() and "OperationalError" not in page.content(), title

    cluster.start()
    expect(notice).to_have_count(0, timeout=60_000)  # by itself: the page checks again every few seconds
    resend = page.get_by_role("button", name="再送信")
    expect(resend).to_be_enabled(timeout=RERUN)
    resend.click()
    expect(page.locator('[data-testid="stChatMessage"]').filter(has_text="エアコンの風が弱い").first).to_be_visible(
        timeout=FIRST_ANSWER)
    expect(resend).to_have_count(0, timeout=RERUN)
    store = Store(pg_server.db_url, run_migrations=False)
    try:
        users = [e["text"] for e in store.chat_entries(sid) if e["role"] == "user"]
    finally:
        store.engine.dispose()
    assert users[-1] == "エアコンの風が弱い"


def test_a_knowledge_message_sent_while_postgres_is_down_is_kept_and_resent(new_browser, pg_server, cluster):
    page = new_browser()
    open_app(page, pg_server.url)  # 契約ナレッジ作成
    text = "業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。"
    cluster.stop()
    send(page, text)
    expect(page.locator('[data-testid="stAlert"]').filter(has_text=NOTICE).first).to_be_visible(timeout=RERUN)
    expect(page.get_by_text(text).first).to_be_visible()
    expect(page.locator('[data-testid="stException"]')).to_have_count(0)
    cluster.start()
    resend = page.get_by_role("button", name="再送信")
    expect(resend).to_be_enabled(timeout=60_000)  # the page came back by itself, the text is waiting
    resend.click()
    expect(page.locator('[data-testid="stChatMessage"]').filter(has_text=text).first).to_be_visible(timeout=RERUN)
    idle(page)
    store = Store(pg_server.db_url, run_migrations=False)
    try:
        cid = session_id(page)
        assert [e["content"] for e in store.chat_entries(cid) if e["role"] == "user"] == [text]
    finally:
        store.engine.dispose()
