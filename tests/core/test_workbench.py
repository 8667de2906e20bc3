"""core.workbench: filtering records, replay with our validator as judge, JSON diff, batch replay,
promotion of a stored conversation to a core.eval scenario, and saving a prompt version."""
from __future__ import annotations

import json
from datetime import date

import pytest

import core.prompts
from core import workbench as wb
from core.debuglog import CallTags
from core.engine import structured_call, text_call
from core.eval.runner import run_files
from core.identity import ADMIN, OPERATOR, Identity
from core.knowledge.turn import call_llm
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient
from core.prompts import load_prompt, prompt_version, prompt_versions
from core.schemas import load_schema
from core.store import get_store
from core.store.prompt_versions import list_prompt_versions

ADMIN_ID = Identity(name="管理者", email="admin@example.com", source="oidc", roles=frozenset({ADMIN}))
OPERATOR_ID = Identity(name="担当", email="op@example.com", source="oidc", roles=frozenset({OPERATOR}))
CASE = "業務委託契約の損害賠償条項の事例です。上限がないのが問題でした。"


def knowledge_record(client, *, strategies=None, max_repairs=0) -> dict:
    log: list[dict] = []
    call_llm(CASE, None, load_prompt("knowledge_system"), [], client, load_schema("knowledge_llm_turn"),
             load_schema("knowledge_llm_entry"), max_repairs=max_repairs, strategies=strategies, log=log,
             tags=CallTags(session_id="conv-1", flow="knowledge", step="turn", prompt="knowledge_system"))
    return log


def good_turn(**changes) -> dict:
    log = knowledge_record(OfflineClient())
    data = json.loads(log[-1]["raw_output"])
    for path, value in changes.items():
        node = data
        *parents, leaf = path.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return data


def test_records_name_their_task_prompt_version_and_every_prompt_files_version():
    [record] = knowledge_record(OfflineClient())
    assert record["task"] == "knowledge_llm_turn"
    assert record["prompt_version"] == prompt_version("knowledge_system") and len(record["prompt_version"]) == 12
    assert record["prompt_versions"] == prompt_versions() and "repair_instruction" in record["prompt_versions"]
    assert record["temperature"] == 0.2


def test_method_of_a_judgment_stage_is_its_seed_004_name_and_filters_combine():
    records = [
        {"id": 1, "time": "2026-01-01T14:59:00+00:00", "flow": "diagnosis", "step": "diagnosing", "task": "choice_tag",
         "strategy": "plain_text", "outcome": "ok", "provider": "offline", "model": "m"},
        {"id": 2, "time": "2026-01-01T15:01:00+00:00", "flow": "diagnosis", "step": "diagnosing",
         "task": "choice_evaluation", "strategy": "structured_output", "outcome": "provider_error:timeout",
         "provider": "openai", "model": "gpt"},
        {"id": 3, "time": "2026-01-02T15:01:00+00:00", "flow": "faq", "step": "intent",
         "response_format": {"json_schema": {"name": "faq_intent"}}, "strategy": "tool_call", "outcome": "schema_error"},
    ]
    frame = wb.records_frame(records)
    assert list(frame["method"]) == ["tag_fallback", "ai_judge", "tool_call"]
    assert list(frame["task"]) == ["choice_tag", "choice_evaluation", "faq_intent"]
    assert list(frame["error_type"]) == ["", "timeout", "schema_error"]
    # 14:59 UTC is 23:59 JST on Jan 1; 15:01 UTC is already Jan 2 in Japan.
    assert list(frame["date"]) == [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]
    pick = lambda **f: list(wb.filter_records(frame, **f)["id"])  # noqa: E731
    assert pick(methods=["ai_judge", "tag_fallback"]) == [1, 2]
    assert pick(error_types=["timeout"]) == [2]
    assert pick(date_from=date(2026, 1, 2), date_to=date(2026, 1, 2)) == [2]
    assert pick(failed_only=True, flows=["diagnosis"]) == [2]
    assert pick(providers=["openai"], models=["gpt"]) == [2]
    assert pick() == [1, 2, 3]


def test_base_messages_drop_the_repair_exchange_and_the_prompt_extract_instruction():
    bad = json.dumps({"control": {"schema_version": "1.0", "mode": "interview"}})
    log = knowledge_record(ScriptedClient([bad, bad]), strategies=("prompt_extract",), max_repairs=1)
    call, repair = log
    assert repair["kind"] == "repair" and len(repair["messages"]) == len(call["messages"]) + 2
    expected = wb.base_messages(call)
    assert wb.base_messages(repair) == expected
    assert "【出力形式の指示】" in call["messages"][-1]["content"]
    assert "【出力形式の指示】" not in expected[-1]["content"] and CASE in expected[-1]["content"]


def test_replay_runs_the_edited_request_and_judges_old_and_new_with_our_validator():
    bad = json.dumps({"control": {"schema_version": "1.0", "mode": "interview"}}, ensure_ascii=False)
    [record] = knowledge_record(ScriptedClient([bad]))
    assert record["outcome"] == "schema_error"
    new = good_turn(**{"state.phase": "organize_risks", "assistant_message": "改善後の質問です"})
    client = ScriptedClient([json.dumps(new, ensure_ascii=False)])
    result = wb.replay(record, system_prompt="新しいシステムプロンプト", user_payload="編集した入力", temperature=0.7,
                       model="other-model", strategies=["tool_call"], client=client)
    [sent] = client.requests
    assert sent.messages[0] == {"role": "system", "content": "新しいシステムプロンプト"}
    assert sent.messages[-1] == {"role": "user", "content": "編集した入力"}
    assert sent.temperature == 0.7 and sent.tools and sent.response_format is None
    assert result.model == "other-model" and client.model == "scripted-model"  # the client itself is untouched
    assert result.judge == "file:knowledge_llm_turn"
    assert not result.old.ok and result.old.error_type == "schema_error"
    assert result.new.ok and result.new_method == "tool_call" and result.attempts == 1 and result.repairs == 0
    assert any(line.startswith('$.state: （なし） → {"phase": "organize_risks"') for line in result.diff)
    assert any(line.startswith("$.assistant_message: （なし） → \"改善後の質問です\"") for line in result.diff)
    assert result.changed_fields == ["state", "assistant_message", "knowledge_json"]


def test_replay_uses_the_knowledge_entry_check_not_only_the_turn_schema():
    [record] = knowledge_record(OfflineClient())
    broken = good_turn(knowledge_json={"knowledge_title": 5})
    result = wb.replay(record, client=ScriptedClient([json.dumps(broken, ensure_ascii=False)]), max_repairs=0)
    assert result.old.ok and not result.new.ok
    assert result.new.error_type == "entry_schema_error"
    assert any(line.startswith("$.knowledge_json") for line in result.diff)


def test_replay_of_a_plain_text_call_compares_texts():
    log: list[dict] = []
    text_call(ScriptedClient(["[CHOICE:1]"]), [{"role": "user", "content": "どれ？"}], task="choice_tag", log=log,
              tags=CallTags(flow="diagnosis", step="diagnosing", prompt="choice_tag"))
    result = wb.replay(log[0], user_payload="どれですか？", client=ScriptedClient(["[CHOICE:2]"]))
    assert result.judge == "text" and result.old.ok and result.new.ok
    assert result.new_method == result.old_method == "tag_fallback"
    assert "-[CHOICE:1]" in result.diff and "+[CHOICE:2]" in result.diff


def test_replay_on_the_offline_provider_uses_the_recorded_context():
    log: list[dict] = []
    schema = load_schema("faq_intent")
    structured_call(ScriptedClient([json.dumps({"intent": "faq"})]), [{"role": "user", "content": "オイル交換は？"}],
                    schema=schema, name="faq_intent", context={"text": "オイル交換の目安は？", "previous_query": ""},
                    max_repairs=0, log=log, tags=CallTags(flow="faq", step="intent", prompt="faq_intent_system"))
    assert log[0]["context"]["text"] == "オイル交換の目安は？"
    result = wb.replay(log[0], client=OfflineClient())
    assert result.new.ok, result.new.errors


def test_json_diff_is_readable_path_old_to_new():
    old = {"a": 1, "b": {"c": [1, 2, 3], "d": "x"}, "gone": True, "key with space": 1}
    new = {"a": 1, "b": {"c": [1, 5], "d": "y"}, "added": None, "key with space": 2}
    assert wb.json_diff(old, new) == [
        "$.b.c[1]: 2 → 5",
        "$.b.c[2]: 3 → （なし）",
        '$.b.d: "x" → "y"',
        "$.gone: true → （なし）",
        '$["key with space"]: 1 → 2',
        "$.added: （なし） → null",
    ]
    assert wb.json_diff({"n": 1}, {"n": 1.0}) == ["$.n: 1 → 1.0"]
    assert wb.json_diff({"s": "あ" * 500}, {"s": "い"})[0].endswith('→ "い"')
    assert len(wb.json_diff({"s": "あ" * 500}, {"s": "い"})[0]) < 200
    many = wb.json_diff(list(range(1000)), list(range(1, 1001)), limit=10)
    assert len(many) == 11 and many[-1] == "…（ほか 990 件の差分）"


def test_batch_replay_table_counts_valid_before_and_after():
    bad = json.dumps({"control": {"schema_version": "1.0", "mode": "interview"}})
    records = knowledge_record(ScriptedClient([bad])) + knowledge_record(OfflineClient())
    good = json.dumps(good_turn(), ensure_ascii=False)
    client = ScriptedClient([good, "not json", "still not json"])
    seen = []
    table = wb.batch_replay(records, {"system_prompt": "変更後", "max_repairs": 1}, client,
                            progress=lambda i, n: seen.append((i, n)))
    assert list(table.columns) == wb.BATCH_COLUMNS
    assert list(table["valid_before"]) == [False, True] and list(table["valid_after"]) == [True, False]
    assert list(table["repairs"]) == [0, 1]
    assert seen == [(1, 2), (2, 2)]
    assert all(r.messages[0]["content"] == "変更後" for r in client.requests)
    summary = wb.batch_summary(table)
    assert summary == {"total": 2, "valid_before": 1, "valid_after": 1, "fixed": 1, "broken": 1,
                       "methods": {"structured_output": 2}, "repairs": 1}
    with pytest.raises(ValueError):
        wb.batch_replay(records, {"prompt": "x"}, client)


def faq_conversation(store) -> str:
    cid = store.create_conversation("faq", OPERATOR_ID, title="オイル交換")
    store.append_turn(cid, {"user": "オイル交換の目安はどのくらいですか？ 090-1234-5678"}, role="exchange",
                      user_input="オイル交換の目安はどのくらいですか？ 090-1234-5678",
                      turn_json={"message": "…", "citations": ["kb:007"], "outcome": "answered"}, step="answered")
    return cid


def test_promote_writes_a_scenario_that_core_eval_passes(tmp_path):
    store = get_store()
    cid = faq_conversation(store)
    suggested = wb.suggest_expectations(store, cid)
    assert suggested == {"outcome": "answered", "citations_min": 1}
    scenario = wb.promote(store, cid, {**suggested, "message_contains": "5,000km"}, name="昇格テスト")
    assert scenario["flow"] == "faq" and scenario["name"] == "昇格テスト"
    [turn] = scenario["turns"]
    assert "090-1234-5678" not in turn["message"] and turn["message"].startswith("オイル交換の目安")
    path = wb.save_scenario(scenario, tmp_path / "promoted.yaml", actor=ADMIN_ID, store=store, comment="会話から作成")
    assert path.read_text(encoding="utf-8").startswith("# 会話から作成\n")
    [result] = run_files([path])
    assert result.passed, result.failures
    # Saving again with the same name replaces it; another name is appended.
    wb.save_scenario(scenario, path, actor=ADMIN_ID, store=store)
    wb.save_scenario({**scenario, "name": "別名"}, path, actor=ADMIN_ID, store=store)
    assert [r.name for r in run_files([path])] == ["昇格テスト", "別名"]


def test_saving_a_scenario_is_admin_only_and_audited(tmp_path):
    store = get_store()
    scenario = wb.promote(store, faq_conversation(store), {"outcome": "answered"}, name="監査テスト")
    for actor in (OPERATOR_ID, None, "admin@example.com", Identity(name="admin@example.com")):
        with pytest.raises(PermissionError):
            wb.save_scenario(scenario, tmp_path / "x.yaml", actor=actor, store=store)
    assert not (tmp_path / "x.yaml").exists() and store.list_audit("scenario") == []
    wb.save_scenario(scenario, tmp_path / "x.yaml", actor=ADMIN_ID, store=store)
    [audit] = store.list_audit("scenario")
    assert audit["action"] == "scenario.save" and audit["actor"] == "admin@example.com" and audit["at"]
    assert audit["detail"] == {"file": "x.yaml", "name": "監査テスト", "flow": "faq"}


def test_promote_refuses_unknown_or_no_expectations():
    store = get_store()
    cid = faq_conversation(store)
    with pytest.raises(ValueError, match="知らない期待値"):
        wb.promote(store, cid, {"outcom": "answered"})
    with pytest.raises(ValueError, match="1 つ以上"):
        wb.promote(store, cid, {})
    with pytest.raises(LookupError):
        wb.promote(store, "no-such-conversation", {"outcome": "answered"})


def test_scenario_filename_is_safe():
    assert wb.scenario_filename("../../etc/passwd") == "etc_passwd.yaml"
    assert wb.scenario_filename("日本語だけ") == "promoted.yaml"


def test_saving_a_prompt_version_needs_prompt_write_and_records_who_and_when(tmp_path, monkeypatch):
    monkeypatch.setattr(core.prompts, "PROMPTS_DIR", tmp_path)
    store = get_store()
    (tmp_path / "demo.md").write_text("元の内容\n", encoding="utf-8")
    with pytest.raises(PermissionError):
        wb.save_prompt_version("demo", "新しい内容", OPERATOR_ID, store, prompts_dir=tmp_path)
    with pytest.raises(PermissionError):
        wb.save_prompt_version("demo", "新しい内容", "admin", store, prompts_dir=tmp_path)
    assert (tmp_path / "demo.md").read_text(encoding="utf-8") == "元の内容\n"
    assert list_prompt_versions(store, "demo") == []

    assert load_prompt("demo") == "元の内容"
    saved = wb.save_prompt_version("demo", "新しい内容", ADMIN_ID, store, note="質問を短く", prompts_dir=tmp_path)
    assert (tmp_path / "demo.md").read_text(encoding="utf-8") == "元の内容\n"  # the store is the truth, not the file
    assert load_prompt("demo") == "新しい内容" and prompt_version("demo") == saved["version"]
    assert saved["version"] == wb.content_version("新しい内容") == wb.content_version("新しい内容\n")
    assert saved["previous_version"] == wb.content_version("元の内容")
    assert saved["created_by"] == "admin@example.com" and saved["created_at"]
    history = list_prompt_versions(store, "demo", with_content=True)
    assert [(h["version"], h["content"]) for h in history] == [(saved["version"], "新しい内容"),
                                                               (saved["previous_version"], "元の内容\n")]
    [audit] = [a for a in store.list_audit("prompt", "demo") if a["detail"]["version"] == saved["version"]]
    assert audit["action"] == "prompt.save" and audit["actor"] == "admin@example.com"
    assert audit["detail"]["note"] == "質問を短く"


def test_saving_a_prompt_version_rejects_bad_names_and_empty_content(tmp_path):
    store = get_store()
    with pytest.raises(ValueError):
        wb.save_prompt_version("../app", "x", ADMIN_ID, store, prompts_dir=tmp_path)
    with pytest.raises(ValueError):
        wb.save_prompt_version("no_such_prompt_file", "x", ADMIN_ID, store)  # only existing prompts/ files
    (tmp_path / "demo.md").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError):
        wb.save_prompt_version("demo", "  \n", ADMIN_ID, store, prompts_dir=tmp_path)


def test_content_version_matches_prompt_version_of_the_file():
    assert wb.content_version(load_prompt("knowledge_system") + "\n") == prompt_version("knowledge_system")


def knowledge_conversation(store, messages, *, confirm_after: int | None = None) -> str:
    """A knowledge conversation stored the way the console page stores it."""
    from core.knowledge.session import submit_turn
    from core.store.chat_sync import sync_chat

    cid = store.create_conversation("knowledge", OPERATOR_ID)
    chat: list[dict] = []
    outputs: list[dict] = []
    for i, text in enumerate(messages):
        outcome = submit_turn(chat, outputs, text, [], OfflineClient(), session_id=cid)
        sync_chat(store, cid, chat, flow="knowledge", author=OPERATOR_ID)
        if outcome.result.ok and outcome.result.knowledge:
            store.record_knowledge(cid, outcome.result.knowledge, OPERATOR_ID)
        if confirm_after == i + 1:
            for entry in store.conversation_outputs(cid):
                if entry["status"] == "draft":
                    store.set_entry_status(entry["id"], "confirm", OPERATOR_ID)
    return cid


def test_promote_a_confirmed_knowledge_interview(tmp_path):
    store = get_store()
    case = "業務委託契約の第8条（損害賠償）で、賠償額の上限がなく責任が無制限になっている点が問題でした。"
    cid = knowledge_conversation(store, [case, "委託料の総額を上限とするよう修正を求めるべきです。", "おまかせ",
                                         "ありがとうございました"], confirm_after=3)
    suggested = wb.suggest_expectations(store, cid)
    assert suggested["confirmed"] is True and suggested["phase"] and suggested["mode"]
    assert "knowledge_title" in suggested["knowledge_fields"]
    scenario = wb.promote(store, cid, {**suggested, "knowledge_contains": {"*": ["委託料"]}}, name="ナレッジ昇格")
    assert scenario["turns"] == [{"message": case}, {"message": "委託料の総額を上限とするよう修正を求めるべきです。"},
                                 {"message": "おまかせ"}, {"action": "confirm"}, {"message": "ありがとうございました"}]
    _, _, final = wb.conversation_turns(store, cid)
    assert final["schema_version"] == "スキーマ 1.0"
    [result] = run_files([wb.save_scenario(scenario, tmp_path / "k.yaml", actor=ADMIN_ID, store=store)])
    assert result.passed, result.failures


def test_output_schema_version_of_a_record():
    [record] = knowledge_record(OfflineClient())
    assert wb.output_schema_version(record) == "1.0"
    assert wb.output_schema_version({"raw_output": "not json"}) is None
