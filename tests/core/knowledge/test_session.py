"""Console session flow: failures keep the user's input and can be resent."""
import json

from core.documents import extract_document
from core.knowledge.export import entries_csv
from core.knowledge.session import current_state, history_for_model, resend, submit_turn, turns_jsonl
from core.llm.scripted import ScriptedClient

TURN = {"control": {"schema_version": "1.0", "mode": "finalize"},
        "state": {"phase": "draft_knowledge", "missing_info": []}, "assistant_message": "草案を作成しました。内容をご確認ください。",
        "knowledge_json": {"contract_type": "売買契約", "knowledge_title": "t", "target_clause": "第3条",
                           "review_points": "r", "action_plan": "a", "clause_sample": "c"}}


def test_failure_keeps_input_and_resend_sends_the_same_payload():
    doc = extract_document("a.txt", "第3条（検収）10日以内に検査する。".encode())
    client = ScriptedClient(["broken", "broken", "broken", json.dumps(TURN, ensure_ascii=False)])
    chat, knowledge = [], [{"contract_type": "old"}]
    outcome = submit_turn(chat, knowledge, "検収の件です", [doc], client)
    assert not outcome.result.ok
    assert chat[0]["failed"] and chat[0]["content"] == "検収の件です" and chat[1]["raw"] == "broken"
    assert chat[1]["error_type"] == "parse_error"
    assert knowledge == [{"contract_type": "old"}]  # nothing lost
    assert history_for_model(chat) == []  # failed exchanges are not replayed to the model
    failed_payload = client.requests[0].messages[-1]["content"]
    again = resend(chat, knowledge, chat[0]["id"], client)
    assert again.result.ok and len(chat) == 2 and not chat[0].get("failed")
    assert client.requests[-1].messages[-1]["content"] == failed_payload
    assert chat[0]["attachments"][0]["name"] == "a.txt"
    assert knowledge[0]["contract_type"] == "売買契約"
    assert current_state(chat)["state"]["phase"] == "draft_knowledge"
    assert "売買契約" in entries_csv(knowledge).decode("utf-8-sig").splitlines()[1]
    assert json.loads(turns_jsonl(chat))["assistant_message"] == "草案を作成しました。内容をご確認ください。"


def test_history_replays_payloads_and_full_turn_json():
    client = ScriptedClient([json.dumps(TURN, ensure_ascii=False)] * 2)
    chat, knowledge = [], []
    submit_turn(chat, knowledge, "一回目", [], client)
    submit_turn(chat, knowledge, "二回目", [], client)
    second = client.requests[1].messages
    assert second[3] == {"role": "user", "content": "ユーザー指示:\n一回目"}  # after the few-shot pair
    assert json.loads(second[4]["content"]) == TURN


def test_clarify_turn_without_knowledge_keeps_the_previous_draft():
    clarify = {**TURN, "knowledge_json": None, "control": {"schema_version": "1.0", "mode": "clarify"}}
    client = ScriptedClient([json.dumps(TURN), json.dumps(clarify)])
    chat, knowledge = [], []
    submit_turn(chat, knowledge, "a", [], client)
    submit_turn(chat, knowledge, "b", [], client)
    assert knowledge and knowledge[0]["contract_type"] == "売買契約"
