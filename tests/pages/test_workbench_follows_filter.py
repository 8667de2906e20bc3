"""What a prompt tuner sees (issue #24): the offline replay says why its output cannot change, シナリオ化
and 一括再実行 start from what the filters select, and the operator is shown by name (not
「anonymous:匿名」)."""
from __future__ import annotations

from core.llm.offline import OfflineClient
from core.store import get_store
from tests.pages.test_workbench_page import open_tab, seed_knowledge_call
from ui.workbench.labels import owner_label


def open_workbench(app, client=None, tab: str | None = None):
    if client is not None:
        app.session_state["llm_client"] = client
    app.switch_page("pages/debug_log.py").run()
    assert not app.exception, app.exception
    return open_tab(app, tab) if tab else app


def test_the_offline_replay_explains_why_the_output_cannot_differ(app):
    seed_knowledge_call(OfflineClient())
    app = open_workbench(app, OfflineClient(), tab="再実行")
    assert any("プロンプトを読まずに" in i.value for i in app.info)
    app.button(key="wb_run").click().run()
    assert not app.exception
    assert any("オフラインプロバイダーはプロンプトを読まない" in c.value for c in app.code)


def test_promotion_follows_the_conversation_the_filter_selects(app):
    store = get_store()
    seed_knowledge_call(OfflineClient(), session_id="conv-first")
    seed_knowledge_call(OfflineClient(), session_id="conv-second")
    app = open_workbench(app, tab="シナリオ化")
    app.text_input(key="f_conversation").set_value("conv-first").run()
    assert app.text_input(key="wb_promote_id").value == "conv-first"
    app.text_input(key="f_conversation").set_value("conv-second").run()
    assert app.text_input(key="wb_promote_id").value == "conv-second"
    assert store.debug_ids(limit=1)


def test_batch_defaults_follow_the_filter(app):
    seed_knowledge_call(OfflineClient(), session_id="conv-batch")
    app = open_workbench(app, tab="一括再実行")
    tasks = app.multiselect(key="f_task").options
    assert tasks
    app.multiselect(key="f_task").set_value([tasks[-1]]).run()
    assert app.selectbox(key="wb_batch_task").value == tasks[-1]
    assert app.selectbox(key="wb_batch_task").options == [tasks[-1]]


def test_the_operator_is_shown_by_name():
    assert owner_label("anonymous:匿名") == "匿名"
    assert owner_label("oidc:op@example.com") == "op@example.com"
    assert owner_label("") == "—"
    assert owner_label("山田") == "山田"
