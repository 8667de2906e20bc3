"""Schema-version registry: an old (0.9) stored turn loads from the store, validates through its own
schema, upgrades to the current shape, displays, and replays into a new offline turn."""
import json

import pytest

from core import schema_versions as sv
from core.identity import Identity
from core.knowledge.session import current_state, history_for_model, submit_turn
from core.knowledge.turn import entry_schema, turn_schema
from core.llm.offline import OfflineClient
from core.store.chat_sync import sync_chat
from core.store.store import Store
from core.validation import parse_and_validate_turn

# Seed 003 §3.4 example 2, as a 0.9 turn.
OLD_TURN = {
    "control": {"schema_version": "0.9", "mode": "finalize"},
    "state": {"phase": "draft_knowledge"},
    "assistant_message": "ヒアリングした内容をもとに、ナレッジのドラフトを作成しました。",
    "knowledge_json": {
        "title": "秘密保持義務の期間設定（3 年 vs. 5 年）",
        "contract_types": ["秘密保持契約", "業務委託契約"],
        "problem_pattern": "相手方が秘密保持期間を 3 年に限定しているが、こちらとしては 5 年を希望したいケース",
        "risk": "システム運用・保守の期間が 3 年を超える場合、情報漏えいリスクや紛争時の立証が困難になる。",
        "recommended_clause": "秘密情報の保持義務は、本契約終了後も 5 年間継続するものとする。",
        "note": "プロジェクト期間が明確に 3 年以内で終了する場合は 3 年でも実務上問題ないことが多い。",
    },
}
CURRENT_TURN = {"control": {"schema_version": "1.0", "mode": "interview"},
                "state": {"phase": "collect_case", "missing_info": ["契約書の種類"]},
                "assistant_message": "契約書の種類を教えてください。", "knowledge_json": None}


def test_versions_and_current():
    assert sv.current_version() == "1.0" == sv.CURRENT_VERSION
    assert {"0.9", "1.0"} <= set(sv.registered_versions())
    assert sv.version_of(OLD_TURN) == "0.9" and sv.version_of({"control": {"schema_version": 1.0}}) == "1.0"
    assert sv.version_of({"state": {}}) is None


def test_an_old_turn_validates_by_its_own_schema_and_not_by_the_current_one():
    assert sv.validate_stored(OLD_TURN) == []
    assert not parse_and_validate_turn(json.dumps(OLD_TURN, ensure_ascii=False), turn_schema(), entry_schema()).ok
    broken = {**OLD_TURN, "knowledge_json": {"title": 3}}
    assert sv.validate_stored(broken) and "title" in sv.validate_stored(broken)[0]
    assert sv.validate_stored(CURRENT_TURN) == []


def test_upgrade_maps_the_old_fields_and_passes_the_current_schemas():
    new = sv.upgrade(OLD_TURN)
    assert new["control"] == {"schema_version": "1.0", "mode": "finalize"}
    assert new["state"] == {"phase": "draft_knowledge", "missing_info": []}
    entry = new["knowledge_json"]
    assert entry["knowledge_title"] == OLD_TURN["knowledge_json"]["title"]
    assert entry["contract_type"] == "秘密保持契約、業務委託契約"
    assert entry["review_points"].startswith("事例: 相手方が秘密保持期間") and "情報漏えいリスク" in entry["review_points"]
    assert entry["clause_sample"].endswith("5 年間継続するものとする。") and entry["target_clause"] == ""
    assert parse_and_validate_turn(json.dumps(new, ensure_ascii=False), turn_schema(), entry_schema()).ok
    assert sv.upgrade(CURRENT_TURN) == CURRENT_TURN
    assert sv.upgrade(json.dumps(OLD_TURN)) == new  # stored JSON text works too
    assert OLD_TURN["control"]["schema_version"] == "0.9"  # the input is not mutated


@pytest.mark.parametrize("turn, fragment", [
    ({**CURRENT_TURN, "control": {"schema_version": "2.0", "mode": "interview"}}, "未対応の schema_version です: 2.0"),
    ({"state": {}, "assistant_message": "x"}, "schema_version がありません"),
    ({**OLD_TURN, "knowledge_json": {"title": 3}}, "schema_version 0.9 のスキーマに合いません"),
    ("{not json", "JSON として読めません"),
    ([1, 2], "オブジェクトではありません"),
])
def test_turns_that_cannot_be_upgraded_say_why(turn, fragment):
    with pytest.raises(sv.SchemaVersionError, match=fragment):
        sv.upgrade(turn)


def test_register_rules_and_a_new_version_chain(monkeypatch):
    monkeypatch.setattr(sv, "_REGISTRY", dict(sv._REGISTRY))
    with pytest.raises(ValueError):
        sv.register("0.8", lambda t: [], adapter=lambda t: t)  # adapter without target
    with pytest.raises(ValueError):
        sv.register("1.0", lambda t: [], adapter=lambda t: t, upgrades_to="1.0")

    def from_0_8(turn):
        return {**turn, "control": {**turn["control"], "schema_version": "0.9"},
                "state": {"phase": turn["state"]["step"]}}

    sv.register("0.8", lambda t: [] if "step" in t.get("state", {}) else ["$.state.step missing"], from_0_8,
                upgrades_to="0.9")
    old = {**OLD_TURN, "control": {"schema_version": "0.8", "mode": "finalize"}, "state": {"step": "draft_knowledge"}}
    assert sv.upgrade(old)["control"]["schema_version"] == "1.0"  # 0.8 → 0.9 → 1.0


def test_an_old_stored_turn_loads_displays_and_replays(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/turns.db")
    try:
        operator = Identity(name="tester")
        cid = store.create_conversation("knowledge", operator)
        chat = [{"id": "u1", "role": "user", "content": "NDA の秘密保持期間の件です", "user_text": "NDA の秘密保持期間の件です",
                 "attachments": []},
                {"id": "a1", "role": "assistant", "content": OLD_TURN["assistant_message"],
                 "raw": json.dumps(OLD_TURN, ensure_ascii=False), "turn": OLD_TURN, "method": "structured_output"}]
        sync_chat(store, cid, chat, flow="knowledge", author=operator)
        stored_row = store.list_turns(cid)[1]
        assert stored_row["turn_json"]["control"]["schema_version"] == "0.9"  # the store keeps it as it was

        loaded = sv.upgrade_chat(store.chat_entries(cid))
        old = loaded[1]
        assert old["stored_schema_version"] == "0.9" and "schema_error" not in old
        assert sv.describe(old) == "スキーマ 0.9（1.0 に変換して表示）"
        assert sv.describe(stored_row["turn_json"]) == "スキーマ 0.9（1.0 に変換して表示）"
        assert sv.describe(CURRENT_TURN) == "スキーマ 1.0"
        # display: the message and a current-shape state
        assert old["content"] == OLD_TURN["assistant_message"]
        state = current_state(loaded)
        assert state["state"]["phase"] == "draft_knowledge" and state["knowledge_json"]["knowledge_title"]
        assert parse_and_validate_turn(old["raw"], turn_schema(), entry_schema()).ok
        # replay: the history sent to the model holds only the current shape, and the next turn works
        replayed = history_for_model(loaded)
        assert json.loads(replayed[1]["content"])["control"]["schema_version"] == "1.0"
        knowledge = []
        outcome = submit_turn(loaded, knowledge, "第5条（秘密保持）の存続期間が3年と短い点が懸念でした。期間を5年に延長するよう交渉すべきです。",
                              [], OfflineClient())
        assert outcome.result.ok and outcome.result.data["control"]["schema_version"] == "1.0"
        assert "契約類型: 秘密保持契約" in outcome.result.assistant_message  # it read the replayed history
        assert submit_turn(loaded, knowledge, "おまかせ", [], OfflineClient()).result.ok
        assert knowledge[0]["contract_type"] == "秘密保持契約" and knowledge[0]["target_clause"] == "第5条（秘密保持）"  # as typed (issue 24)
    finally:
        store.engine.dispose()


def test_an_unreadable_stored_turn_still_shows_its_message():
    bad = {"id": "a", "role": "assistant", "content": "古い応答",
           "turn": {**CURRENT_TURN, "control": {"schema_version": "7"}}}
    out = sv.upgrade_entry(bad)
    assert "turn" not in out and out["content"] == "古い応答" and "未対応" in out["schema_error"]
    assert sv.describe(out) == "スキーマ 7（読み込めません）"
    assert current_state([out]) is None
    user = {"id": "u", "role": "user", "content": "x"}
    assert sv.upgrade_entry(user) == user
