"""Guards on a knowledge turn (seed 003 §7.1 and issue #16): a very short message is logged and made again
once, a wrap-up request answered without a draft and a message repeated word for word are made again
once, and the entry is tidied (concise title, no contract text or restated question in the fields)."""
import json
import logging

from core.documents import extract_document
from core.knowledge.case_facts import collect_facts
from core.knowledge.guards import MIN_MESSAGE_CHARS, TurnContext, regenerate_instruction, tidy_entry
from core.knowledge.session import submit_turn
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient


def turn(message, knowledge=None, phase="collect_case"):
    return json.dumps({"control": {"schema_version": "1.0", "mode": "finalize" if knowledge else "interview"},
                       "state": {"phase": phase, "missing_info": []}, "assistant_message": message,
                       "knowledge_json": knowledge}, ensure_ascii=False)


ENTRY = {"contract_type": "秘密保持契約", "knowledge_title": "秘密保持契約の秘密保持：存続期間の確保",
         "target_clause": "第5条", "review_points": "・存続期間が取引期間に見合っているか確認する",
         "action_plan": "・存続期間を5年にするよう求める", "clause_sample": "本条の義務は5年間存続する。"}
GOOD = "ありがとうございます。契約類型と条項を確認しました。次に、想定されるリスクを教えてください。"


def test_a_very_short_message_is_logged_and_made_again_once(caplog):
    client = ScriptedClient([turn("了解。"), turn(GOOD)])
    chat, knowledge = [], []
    with caplog.at_level(logging.WARNING, logger="kaiwa.knowledge"):
        outcome = submit_turn(chat, knowledge, "NDAの第5条の件です", [], client)
    assert outcome.result.ok and outcome.result.assistant_message == GOOD
    assert chat[-1]["content"] == GOOD and len(client.requests) == 2
    regen = client.requests[1].messages
    assert "短すぎます（3 文字）" in regen[-1]["content"]
    assert regen[-2] == {"role": "assistant", "content": turn("了解。")}  # the rejected output, then the reason
    assert regen[-3]["content"] == "ユーザー指示:\nNDAの第5条の件です"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("regenerated once" in w for w in warnings)
    assert not any("了解" in w or "NDA" in w for w in warnings)  # lengths and reasons only, never the text


def test_only_one_regeneration_even_when_the_second_is_short_too():
    client = ScriptedClient([turn("はい。"), turn("承知。"), turn(GOOD)])
    outcome = submit_turn([], [], "NDAの第5条の件です", [], client)
    assert outcome.result.ok and len(client.requests) == 2 and client.remaining == 1
    assert len(outcome.result.assistant_message) < MIN_MESSAGE_CHARS  # kept, not looped on
    assert outcome.result.attempts == 2


def test_a_failed_regeneration_keeps_the_first_turn():
    client = ScriptedClient([turn("OK"), "broken", "broken", "broken"])
    outcome = submit_turn([], [], "NDAの第5条の件です", [], client)
    assert outcome.result.ok and outcome.result.assistant_message == "OK"


def test_a_wrap_up_request_answered_without_a_draft_is_made_again_with_the_draft():
    asks = turn("ありがとうございます。問題になった条項の条番号や見出しを教えてください。")
    client = ScriptedClient([asks, asks, turn("ここまでの内容で草案をまとめました。不足: 条文例。", ENTRY, "draft_knowledge")])
    chat, knowledge = [], []
    submit_turn(chat, knowledge, "NDAの秘密保持期間が短い件です", [], client)
    outcome = submit_turn(chat, knowledge, "この内容でまとめてください", [], client)
    assert len(client.requests) == 3
    assert "まとめを求めています" in client.requests[2].messages[-1]["content"]
    assert knowledge and knowledge[0]["contract_type"] == "秘密保持契約"
    assert outcome.result.data["state"]["phase"] == "draft_knowledge"


def test_the_same_message_again_is_made_again_once():
    same = turn("どの条項が問題になりましたか？条番号を教えてください。")
    client = ScriptedClient([same, same, turn(GOOD)])
    chat = []
    submit_turn(chat, [], "業務委託契約の件です", [], client)
    outcome = submit_turn(chat, [], "よくわかりません", [], client)
    assert outcome.result.assistant_message == GOOD
    assert "同じメッセージ" in client.requests[2].messages[-1]["content"]


def test_the_entry_is_tidied_title_contract_text_and_questions():
    contract = "第8条（損害賠償）乙は、本契約に関して甲に生じた一切の損害を賠償するものとし、その額に上限を設けない。"
    entry = {**ENTRY, "knowledge_title": "秘密保持契約の秘密保持：秘密保持期間の確保",
             "review_points": "・上限額が定められているか確認する\n・乙は、本契約に関して甲に生じた一切の損害を賠償するものとし、その額に上限を設けない。",
             "action_plan": "・予告期間を設けるべきでしょうか\n・上限を委託料総額とするよう求める"}
    ctx = TurnContext(user_text="予告期間を設けるべきでしょうか？", attachment_texts=[contract])
    tidy = tidy_entry(entry, ctx)
    assert tidy["knowledge_title"] == "秘密保持契約：秘密保持期間の確保"
    assert tidy["review_points"] == "・上限額が定められているか確認する"
    assert tidy["action_plan"] == "・上限を委託料総額とするよう求める"


def test_the_tidied_entry_is_what_the_turn_json_and_the_outputs_hold():
    doc = extract_document("契約.txt", "第5条（秘密保持）本条の義務は、本契約終了後1年間存続するものとし、その後は消滅する。".encode())
    quoted = {**ENTRY, "review_points": "・本条の義務は、本契約終了後1年間存続するものとし、その後は消滅する。\n・期間を確認する"}
    client = ScriptedClient([turn("草案を作成しました。ご確認ください。", quoted, "draft_knowledge")])
    chat, knowledge = [], []
    submit_turn(chat, knowledge, "この件です", [doc], client)
    assert knowledge[0]["review_points"] == "・期間を確認する"
    assert chat[-1]["turn"]["knowledge_json"]["review_points"] == "・期間を確認する"
    assert knowledge[0]["knowledge_title"] == "秘密保持契約：存続期間の確保"


def test_the_offline_interviewer_reads_a_regeneration_request_as_ours_not_the_users():
    client = OfflineClient()
    chat, knowledge = [], []
    submit_turn(chat, knowledge, "業務委託契約の第8条（損害賠償）で上限がない点が問題でした。", [], client)
    messages = [{"role": "system", "content": ""}, {"role": "assistant", "content": "{}"},
                {"role": "user", "content": chat[0]["payload"]}, {"role": "assistant", "content": chat[1]["raw"]},
                {"role": "user", "content": "ユーザー指示:\n" + regenerate_instruction(chat[1]["raw"], "理由")}]
    facts, instructions, _ = collect_facts(messages)
    assert len(instructions) == 1 and facts.contract_type == "業務委託契約"
