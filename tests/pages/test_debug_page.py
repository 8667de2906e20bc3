"""デバッグログ page (the workbench's 記録 tab): table, expandable records, JSONL download, debug toggle."""


def test_debug_page_lists_every_call(app):
    app.chat_input[0].set_value("業務委託契約の損害賠償条項の事例です。上限がないのが問題でした。").run()
    app.switch_page("pages/debug_log.py").run()
    assert not app.exception
    table = app.dataframe[0].value
    assert list(table["フロー"]) == ["knowledge"] and list(table["結果"]) == ["ok"]
    assert list(table["タスク"]) == ["knowledge_llm_turn"]
    assert any("ネイティブ JSON Schema" in e.label for e in app.expander)
    assert any(b.label == "JSONL をダウンロード" for b in app.get("download_button"))
    assert [t.label for t in app.tabs] == ["記録", "再実行", "一括再実行", "シナリオ化", "レビュー済みセット"]


def test_debug_off_records_nothing(app):
    # AppTest reruns only the page, not app.py, so the sidebar toggle exists on the first run only.
    app.sidebar.toggle(key="debug_toggle").set_value(False).run()
    assert app.session_state.debug_enabled is False
    app.chat_input[0].set_value("秘密保持契約の件です").run()
    assert app.session_state.chat and app.session_state.debug_logs == []
    app.session_state["debug_enabled"] = True
    app.chat_input[0].set_value("第5条（秘密保持）の期間が短い点が問題です").run()
    assert len(app.session_state.debug_logs) == 1


def test_empty_debug_page_explains_and_keeps_running(app):
    app.switch_page("pages/debug_log.py").run()
    assert not app.exception
    assert any("まだ記録がありません" in c.value for c in app.caption)
    assert len(app.dataframe) == 0
