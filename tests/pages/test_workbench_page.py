"""The debug-log page grown into the prompt-tuning workbench: records from the store with their
prompt version, replay of a failed call with a scripted client (both outputs, verdicts, the diff),
batch replay, promotion of a conversation to a scenario that core.eval passes, and the admin-only
prompt save."""
from __future__ import annotations

import json

import pytest

from core import workbench as wb
from core.debuglog import CallTags
from core.eval.runner import run_files
from core.identity import OPERATOR, Identity
from core.knowledge.turn import call_llm
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient
from core.prompts import load_prompt, prompt_version
from core.schemas import load_schema
from core.store import get_store
from core.store.prompt_versions import list_prompt_versions
from core.workbench import prompt_files

BAD = json.dumps({"control": {"schema_version": "1.0", "mode": "interview"}})
OPERATOR_ID = Identity(name="担当", email="op@example.com", source="oidc", roles=frozenset({OPERATOR}))


def seed_knowledge_call(client, session_id: str = "conv-wb") -> dict:
    log: list[dict] = []
    call_llm("業務委託契約の損害賠償条項の事例です。", None, load_prompt("knowledge_system"), [], client,
             load_schema("knowledge_llm_turn"), load_schema("knowledge_llm_entry"), max_repairs=0, log=log,
             tags=CallTags(session_id=session_id, flow="knowledge", step="collect_case", prompt="knowledge_system"))
    store = get_store()
    for record in log:
        store.add_debug_record(record, OPERATOR_ID)
    return log[-1]


def good_output(message: str) -> str:
    log: list[dict] = []
    call_llm("業務委託契約の損害賠償条項の事例です。", None, load_prompt("knowledge_system"), [], OfflineClient(),
             load_schema("knowledge_llm_turn"), load_schema("knowledge_llm_entry"), log=log)
    data = json.loads(log[-1]["raw_output"])
    data["assistant_message"] = message
    return json.dumps(data, ensure_ascii=False)


@pytest.fixture
def workbench(app):
    def open_page(client=None, tab: str | None = None):
        if client is not None:
            app.session_state["llm_client"] = client
        app.switch_page("pages/debug_log.py").run()
        assert not app.exception, app.exception
        return open_tab(app, tab) if tab else app
    return open_page


def open_tab(app, label: str):
    """Click one of the page's tabs (lazy: only the open one runs)."""
    app.session_state["wb_tab"] = label
    app.run()
    assert not app.exception, app.exception
    return app


def open_detail(app, record_id: int):
    """Open a record's expander in the 記録 list (lazy: its body is drawn only while it is open)."""
    app.session_state[f"wb_detail_{record_id}"] = True
    app.run()
    assert not app.exception, app.exception
    return app


def failed_record_id() -> int:
    [row] = [r for r in get_store().list_debug_records() if r["outcome"] != "ok"]
    return row["id"]


def test_records_show_prompt_version_method_and_filters(workbench):
    seed_knowledge_call(ScriptedClient([BAD]))
    seed_knowledge_call(OfflineClient(), session_id="conv-ok")
    app = workbench()
    table = app.dataframe[0].value
    assert list(table["結果"]) == ["schema_error", "ok"]
    assert set(table["プロンプト版"]) == {prompt_version("knowledge_system")}
    assert set(table["方式"]) == {"structured_output"}
    assert not any("版 " in t.value for t in app.get("text"))  # a record's body only while it is open
    open_detail(app, failed_record_id())
    assert any(f"版 {prompt_version('knowledge_system')}" in t.value for t in app.get("text"))
    app.toggle(key="f_failed").set_value(True).run()
    assert list(app.dataframe[0].value["結果"]) == ["schema_error"]
    app.toggle(key="f_failed").set_value(False).run()
    app.text_input(key="f_conversation").set_value("conv-ok").run()
    assert list(app.dataframe[0].value["会話"]) == ["conv-ok"]


def test_replay_of_a_failed_call_shows_both_outputs_verdicts_and_the_diff(workbench):
    seed_knowledge_call(ScriptedClient([BAD]))
    client = ScriptedClient([good_output("改善後の質問です")])
    app = workbench(client)
    record_id = failed_record_id()
    open_detail(app, record_id).button(key=f"open_replay_{record_id}").click().run()
    assert app.session_state["wb_record"] == record_id and app.session_state["wb_tab"] == "再実行"
    app.text_area(key="wb_system").set_value("あなたは契約審査の聞き手です。必ず JSON で答えてください。").run()
    app.button(key="wb_run").click().run()
    assert not app.exception
    [request] = client.requests
    assert request.messages[0]["content"] == "あなたは契約審査の聞き手です。必ず JSON で答えてください。"
    codes = [c.value for c in app.code]
    assert BAD in codes and any("改善後の質問です" in c for c in codes)
    assert any(e.value.startswith("検証: 不合格（schema\\_error）") for e in app.error)  # literal text, not markup
    assert any(s.value == "検証: 合格" for s in app.success)
    [diff] = [c for c in codes if c.startswith("$.")]
    assert '$.assistant_message: （なし） → "改善後の質問です"' in diff.splitlines()


def test_batch_replay_table(workbench):
    seed_knowledge_call(ScriptedClient([BAD]))
    seed_knowledge_call(OfflineClient(), session_id="conv-ok")
    app = workbench(ScriptedClient([good_output("一つ目"), good_output("二つ目")]), tab="一括再実行")
    app.text_area(key="wb_batch_system").set_value("変更したシステムプロンプト").run()
    app.button(key="wb_batch_run").click().run()
    assert not app.exception
    table = app.dataframe[-1].value
    assert list(table["合格（前）"]) == [True, False] and list(table["合格（後）"]) == [True, True]
    assert any(m.label == "合格（変更後）" and m.value == "2 / 2" for m in app.metric)


def test_promote_writes_a_scenario_that_core_eval_passes(workbench, monkeypatch, tmp_path):
    monkeypatch.setenv("KAIWA_SCENARIO_DIR", str(tmp_path))
    store = get_store()
    cid = store.create_conversation("faq", OPERATOR_ID, title="オイル交換")
    store.append_turn(cid, {"user": "オイル交換の目安はどのくらいですか？"}, role="exchange",
                      user_input="オイル交換の目安はどのくらいですか？",
                      turn_json={"message": "…", "citations": ["kb:007"], "outcome": "answered"}, step="answered")
    seed_knowledge_call(OfflineClient(), session_id=cid)
    app = workbench(tab="シナリオ化")
    app.text_input(key="wb_promote_id").set_value(cid).run()
    assert app.checkbox(key="wb_expect_outcome").value is True
    app.text_input(key="wb_expect_contains").set_value("5,000km").run()
    app.text_input(key="wb_promote_name").set_value("ワークベンチから").run()
    app.text_input(key="wb_promote_file").set_value("from_workbench").run()
    save = app.button(key="wb_promote_save")
    assert save.disabled and "管理者のみ" in save.help  # an operator downloads; only admins save
    assert [b for b in app.get("download_button") if b.proto.label == "⬇️ YAML をダウンロード"]
    app.session_state["admin_unlocked"] = True
    app.run()
    app.button(key="wb_promote_save").click().run()
    assert not app.exception
    path = tmp_path / "from_workbench.yaml"
    assert any("from_workbench.yaml に保存しました" in s.value for s in app.success)
    [audit] = store.list_audit("scenario")
    assert audit["action"] == "scenario.save" and "admin" in audit["actor_roles"]
    [result] = run_files([path])
    assert result.passed, result.failures
    assert result.name == "ワークベンチから"


def test_saving_a_prompt_is_admin_only_and_explicit(workbench, monkeypatch, tmp_path):
    seed_knowledge_call(OfflineClient())
    app = workbench(tab="再実行")
    assert app.button(key="wb_prompt_save").disabled  # an operator cannot save
    assert app.checkbox(key="wb_prompt_sure").disabled

    prompts = tmp_path / "prompts"
    prompts.mkdir()
    load_prompt_file = load_prompt("knowledge_system")
    (prompts / "knowledge_system.md").write_text(load_prompt_file, encoding="utf-8")
    monkeypatch.setattr(prompt_files, "PROMPTS_DIR", prompts)  # never the repository's prompts/
    app.session_state["admin_unlocked"] = True
    app.run()
    assert app.selectbox(key="wb_prompt_name").value == "knowledge_system"
    assert app.button(key="wb_prompt_save").disabled  # not before the explicit confirmation
    app.text_area(key="wb_prompt_text_knowledge_system").set_value("新しいシステムプロンプト {{x}}").run()
    app.checkbox(key="wb_prompt_sure").check().run()
    app.button(key="wb_prompt_save").click().run()
    assert not app.exception
    assert (prompts / "knowledge_system.md").read_text(encoding="utf-8") == load_prompt_file  # no file is written
    assert load_prompt("knowledge_system") == "新しいシステムプロンプト {{x}}"  # the store's version is in use
    [saved, before] = list_prompt_versions(get_store(), "knowledge_system")
    assert saved["version"] == wb.content_version("新しいシステムプロンプト {{x}}")
    assert any(f"版 {saved['version']} として保存しました" in s.value for s in app.success)


def test_the_replay_editor_follows_the_record_picked(workbench):
    """Issue #15: after another record is picked, the editor shows *its* system prompt, input and prompt file
    (the file a save would write), not the first record's."""
    seed_knowledge_call(ScriptedClient([BAD]))
    get_store().add_debug_record({
        "session_id": "conv-faq", "flow": "faq", "step": "answer", "prompt": "faq_answer_system",
        "task": "faq_answer", "provider": "offline", "model": "m", "strategy": "structured_output", "attempt": 1,
        "kind": "call", "outcome": "ok", "raw_output": "{}", "temperature": 0.5,
        "messages": [{"role": "system", "content": "FAQ の回答者です。"}, {"role": "user", "content": "保証期間は？"}]},
        OPERATOR_ID)
    [knowledge, faq] = get_store().list_debug_records()
    app = open_detail(workbench(), knowledge["id"])
    app.button(key=f"open_replay_{knowledge['id']}").click().run()
    assert app.text_area(key="wb_system").value == knowledge["messages"][0]["content"]
    assert app.selectbox(key="wb_prompt_name").value == "knowledge_system"
    app.text_area(key="wb_system").set_value("書きかけの変更").run()
    app.selectbox(key="wb_record_pick").set_value(faq["id"]).run()
    assert not app.exception
    assert app.session_state["wb_record"] == faq["id"]
    assert app.text_area(key="wb_system").value == "FAQ の回答者です。"
    assert app.text_area(key="wb_user").value == "保証期間は？"
    assert app.number_input(key="wb_temperature").value == 0.5
    assert app.selectbox(key="wb_prompt_name").value == "faq_answer_system"  # the file a save would write
    assert app.text_area(key="wb_prompt_text_faq_answer_system").value == load_prompt("faq_answer_system")
    assert not app.checkbox(key="wb_prompt_sure").value
    app.selectbox(key="wb_record_pick").set_value(knowledge["id"]).run()  # and back again
    assert app.text_area(key="wb_system").value == knowledge["messages"][0]["content"]
    assert app.selectbox(key="wb_prompt_name").value == "knowledge_system"


def test_a_rerun_of_the_promote_tab_reads_and_masks_no_turn_again(workbench, monkeypatch):
    """シナリオ化 reads the conversation's turns and masks them once per change of the conversation: a
    rerun (a ticked box, a typed name) reads and masks nothing (counted); a new turn is read on the next."""
    from core.workbench import scenarios

    store = get_store()
    cid = store.create_conversation("faq", OPERATOR_ID, title="オイル交換")
    seed_knowledge_call(OfflineClient(), session_id=cid)
    for question in ("オイル交換の目安は？", "電話は090-1234-5678です"):
        store.append_turn(cid, {"user": question}, role="exchange", user_input=question,
                          turn_json={"message": "…", "citations": [], "outcome": "answered"}, step="answered")
    reads: list[str] = []
    real = scenarios.conversation_turns
    counted = lambda s, c: reads.append(c) or real(s, c)  # noqa: E731
    monkeypatch.setattr(scenarios, "conversation_turns", counted)
    monkeypatch.setattr(wb, "conversation_turns", counted)
    app = workbench(tab="シナリオ化")
    app.text_input(key="wb_promote_id").set_value(cid).run()
    assert not app.exception and reads == [cid]
    app.text_input(key="wb_promote_name").set_value("名前だけ変える").run()
    app.run()
    assert reads == [cid]
    store.append_turn(cid, {"user": "車検の費用は？"}, role="exchange", user_input="車検の費用は？", step="answered")
    app.run()
    [scenario] = [c.value for c in app.code if c.language == "yaml"]
    assert reads == [cid, cid] and "車検の費用" in scenario and "[電話番号]" in scenario and "090" not in scenario


def test_what_was_typed_in_the_replay_tab_survives_a_visit_to_another_tab(workbench):
    """Lazy tabs draw only the open tab, and Streamlit drops the state of widgets a run does not draw: the
    replay editor's typed system prompt, input, temperature, model and prompt draft come back as typed
    (``ui.kept``), and opening another record still starts from that record's values."""
    seed_knowledge_call(ScriptedClient([BAD]))
    app = workbench(tab="再実行")
    app.text_area(key="wb_system").set_value("書きかけのシステムプロンプト").run()
    app.text_area(key="wb_user").set_value("書きかけの入力").run()
    app.number_input(key="wb_temperature").set_value(0.9).run()
    app.text_input(key="wb_model").set_value("my-model").run()
    app.text_area(key="wb_prompt_text_knowledge_system").set_value("下書きのプロンプト").run()
    open_tab(app, "記録")
    assert not [t for t in app.text_area if t.key == "wb_system"]  # the closed tab is not drawn
    open_tab(app, "再実行")
    assert app.text_area(key="wb_system").value == "書きかけのシステムプロンプト"
    assert app.text_area(key="wb_user").value == "書きかけの入力"
    assert app.number_input(key="wb_temperature").value == 0.9
    assert app.text_input(key="wb_model").value == "my-model"
    assert app.text_area(key="wb_prompt_text_knowledge_system").value == "下書きのプロンプト"
    [record] = get_store().list_debug_records()
    app.selectbox(key="wb_record_pick").set_value(record["id"]).run()  # the same record: kept
    open_tab(app, "記録")
    app = open_detail(app, record["id"])
    app.button(key=f"open_replay_{record['id']}").click().run()  # opened again: that record's own values
    assert app.text_area(key="wb_system").value == record["messages"][0]["content"]
    assert app.text_area(key="wb_prompt_text_knowledge_system").value == load_prompt("knowledge_system")


def test_the_batch_forms_typed_text_survives_a_visit_to_another_tab(workbench):
    seed_knowledge_call(ScriptedClient([BAD]))
    app = workbench(tab="一括再実行")
    app.text_area(key="wb_batch_system").set_value("一括用の下書き").run()
    app.text_input(key="wb_batch_old").set_value("甲").run()
    open_tab(app, "記録")
    open_tab(app, "一括再実行")
    assert app.text_area(key="wb_batch_system").value == "一括用の下書き"
    assert app.text_input(key="wb_batch_old").value == "甲"
