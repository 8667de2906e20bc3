"""Non-answers in the knowledge flow (issue #26): a scripted model that echoes the user's message as
``assistant_message``, repeats the few-shot greeting on an interview turn, or drafts in another language's
script is regenerated once, then replaced by the built-in interviewer's turn or failed honestly — never
shown. Ask-the-KB: an answer that is the question again, or states a figure no cited entry states, is asked
once more and then becomes the offline answer (the entry quoted word for word)."""
import json

from core.documents import extract_document
from core.knowledge import guards
from core.knowledge.ask import ask
from core.knowledge.session import submit_turn
from core.llm.scripted import ScriptedClient
from core.results import NOT_ANSWERED
from core.text.untrusted import OPEN

GREETING = ("契約審査ナレッジの作成をお手伝いします。まず、どの種類の契約書で、どの条項が問題になったか教えてください。"
            "契約書のファイル（PDF / DOCX / テキスト）を添付していただくこともできます。")
USER = "売買契約の代金支払条項で、支払期限が書かれていなかった件です"
GOOD = "ありがとうございます。売買契約の代金支払条項の件ですね。支払期限が空欄だった場合のリスクを教えてください。"
ENTRY = {"contract_type": "売買契約", "knowledge_title": "売買契約の代金支払：支払期限の明記",
         "target_clause": "第4条", "review_points": "・支払期限が明記されているか確認する",
         "action_plan": "・支払期限を明記するよう求める", "clause_sample": "買主は引渡し後30日以内に代金を支払う。"}


def turn(message, knowledge=None, phase="collect_case"):
    return json.dumps({"control": {"schema_version": "1.0", "mode": "finalize" if knowledge else "interview"},
                       "state": {"phase": phase, "missing_info": []}, "assistant_message": message,
                       "knowledge_json": knowledge}, ensure_ascii=False)


def test_the_users_message_echoed_back_is_regenerated_once():
    log = []
    client = ScriptedClient([turn(USER), turn(GOOD)])
    chat = []
    outcome = submit_turn(chat, [], USER, [], client, log=log)
    assert outcome.result.ok and chat[-1]["content"] == GOOD and len(client.requests) == 2
    assert "繰り返し" in client.requests[1].messages[-1]["content"]
    assert log[-1]["guards"][0] == {"guard": "echo_user", "reason": log[-1]["guards"][0]["reason"],
                                    "action": "regenerated"}


def test_the_few_shot_greeting_on_every_turn_falls_back_to_the_built_in_interviewer():
    log = []
    client = ScriptedClient([turn(GREETING), turn(GREETING)])
    chat = []
    outcome = submit_turn(chat, [], USER, [], client, log=log)
    assert outcome.result.ok and GREETING not in chat[-1]["content"]
    assert log[-1]["provider"] == "offline" and log[-1]["guards"][0]["guard"] == "echo_example"
    assert log[-1]["guards"][0]["action"] == "offline"


def test_the_greeting_answering_the_examples_own_request_is_fine():
    client = ScriptedClient([turn(GREETING)])
    outcome = submit_turn([], [], "契約審査ナレッジを作りたいので、ヒアリングを始めてください。", [], client)
    assert outcome.result.ok and outcome.result.assistant_message == GREETING and len(client.requests) == 1


def test_a_draft_in_another_script_is_never_accepted(monkeypatch):
    chinese = dict(ENTRY, review_points="・确认货款的支付期限", knowledge_title="买卖合同：货款支付期限")
    draft = turn("草案を作成しました。内容をご確認ください。支払期限の明記を求める方針です。", chinese, "draft_knowledge")
    monkeypatch.setattr("core.knowledge.session.offline_client", lambda: ScriptedClient([draft]))
    client = ScriptedClient([draft, draft])
    chat, outputs = [], []
    outcome = submit_turn(chat, outputs, USER, [], client)
    assert not outcome.result.ok and outcome.result.error_type == NOT_ANSWERED
    assert outputs == [] and chat[-2]["failed"] and chat[-2]["user_text"] == USER  # kept, can be resent
    assert "日本語でない" in chat[-1]["content"] and "货" not in chat[-1]["content"]
    assert "日本語ではありません" in outcome.result.errors[0]


def test_non_answer_reads_every_draft_field():
    ctx = guards.TurnContext(user_text=USER)
    ok = guards.non_answer(_result(dict(ENTRY)), ctx)
    bad = guards.non_answer(_result(dict(ENTRY, action_plan="・要求明确货款支付期限")), ctx)
    assert ok is None and bad.code == "foreign_script" and "action_plan" in bad.reason


def _result(entry):
    from core.results import TurnResult
    return TurnResult(ok=True, assistant_message=GOOD, knowledge=[entry])


# ---- ask the knowledge base ------------------------------------------------------------------

class OneEntryIndex:
    def search(self, question, n=3):
        from core.knowledge.retrieval import KnowledgeHit
        return [KnowledgeHit(entry_id=7, score=0.9, entry=ENTRY)]


def answer(text, content="・支払期限を明記するよう求める"):
    return json.dumps({"answer": text, "sources": [{"entry_id": 7, "content": content}]}, ensure_ascii=False)


def test_ask_an_invented_figure_twice_becomes_the_offline_answer():
    log = []
    invented = answer("支払期限は引渡し後60日以内とするよう求めます。")
    client = ScriptedClient([invented, invented])
    result = ask("支払期限の書き方は？", OneEntryIndex(), client, log=log)
    assert "60日" not in result.answer and "No.7" in result.answer and [h.entry_id for h in result.sources] == [7]
    assert log[-1]["provider"] == "offline" and log[-1]["guards"][0]["figures"] == ["60日"]


def test_ask_the_question_handed_back_is_asked_once_more():
    client = ScriptedClient([answer("支払期限の書き方は？"), answer("支払期限を明記するよう求めます（No.7）。")])
    result = ask("支払期限の書き方は？", OneEntryIndex(), client)
    assert result.answer == "支払期限を明記するよう求めます（No.7）。" and len(client.requests) == 2


def test_ask_a_figure_the_entry_states_passes():
    client = ScriptedClient([answer("引渡し後30日以内の支払とするのが当社の例です。", "買主は引渡し後30日以内に代金を支払う。")])
    result = ask("支払期限の書き方は？", OneEntryIndex(), client)
    assert "30日" in result.answer and len(client.requests) == 1


# ---- a small context: the second request keeps what is being answered ------------------------------
# A regeneration is the first request plus the rejected output and the reason. Fitting it to a small
# context trims the sources and drops older turns; it never drops the question (with its file or entries)
# as older history, which left the model only the reason to answer from.

CONTRACT = ("第4条（代金の支払）買主は、目的物の引渡しを受けた後、代金を支払うものとする。\n"
            + "第9条（その他）本契約に定めのない事項は、誠実に協議して定める。\n" * 80)


def test_on_a_small_context_an_interview_regeneration_keeps_the_turn_and_its_file():
    log = []
    client = ScriptedClient([turn(USER), turn(GOOD)])
    client.context_tokens = 4000  # the contract does not fit whole
    chat = [{"role": "user", "content": "前の相談です。" * 30}, {"role": "assistant", "content": "前の回答です。" * 30}]
    outcome = submit_turn(chat, [], USER, [extract_document("契約書.txt", CONTRACT.encode())], client, log=log)
    assert outcome.result.ok and chat[-1]["content"] == GOOD
    second = client.requests[-1].messages
    asked = second[-3]
    assert asked["role"] == "user" and USER in asked["content"]
    assert OPEN in asked["content"] and "第4条" in asked["content"]
    assert second[-2] == {"role": "assistant", "content": turn(USER)} and "繰り返し" in second[-1]["content"]
    assert "前の相談です" not in str(second)  # the older turn is what went
    assert "参照テキスト" in " ".join(log[-1]["call"]["fit"])


class LongEntryIndex:
    def search(self, question, n=3):
        from core.knowledge.retrieval import KnowledgeHit
        long = dict(ENTRY, review_points="・支払期限が明記されているか確認する\n" + "・支払方法と振込手数料の負担者を確認する\n" * 60)
        return [KnowledgeHit(entry_id=7, score=0.9, entry=long)]


def test_on_a_small_context_an_ask_regeneration_keeps_the_question_and_the_entries():
    log = []
    client = ScriptedClient([answer("支払期限の書き方は？"), answer("支払期限を明記するよう求めます（No.7）。")])
    client.context_tokens = 1200  # the entry does not fit whole
    result = ask("支払期限の書き方は？", LongEntryIndex(), client, log=log)
    assert result.answer == "支払期限を明記するよう求めます（No.7）。"
    first, second = client.requests[0].messages, client.requests[1].messages
    assert second[:2] == first[:2] and "支払期限の書き方は？" in second[1]["content"] and OPEN in second[1]["content"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert all("参照テキスト" in " ".join(r["call"]["fit"]) for r in log)
    assert not any("以前の会話" in note for r in log for note in r["call"]["fit"])
