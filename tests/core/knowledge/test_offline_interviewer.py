"""The offline interviewer runs a real interview to a complete, schema-valid knowledge entry."""
from core.documents import extract_document
from core.knowledge.session import submit_turn
from core.llm.offline import OfflineClient
from tests.helpers.documents import make_docx

CONTRACT = make_docx(["業務委託契約書", "第1条（目的）本契約は、システム保守業務の委託について定める。",
                      "第8条（損害賠償）乙は、本契約に関して甲に生じた一切の損害を賠償する。",
                      "第12条（解除）甲は、いつでも本契約を解除できる。"], [["別表", "委託料"], ["月額", "50万円"]], [])


def interview(turns, docs_first=None):
    chat, knowledge, client = [], [], OfflineClient()
    outcomes = []
    for i, text in enumerate(turns):
        docs = docs_first if (i == 0 and docs_first) else []
        outcomes.append(submit_turn(chat, knowledge, text, docs, client))
    return chat, knowledge, outcomes


def phase(outcome):
    return outcome.result.data["state"]["phase"]


def test_full_interview_to_a_confirmed_entry():
    doc = extract_document("契約書.docx", CONTRACT)
    chat, knowledge, outcomes = interview([
        "業務委託契約の事例を登録したいです",
        "第8条の損害賠償で、賠償額の上限がなく当社の責任が無制限になっている点が問題でした。",
        "委託料の総額を上限とするよう修正を求め、故意・重過失は除外する案で交渉すべきです。",
        "おまかせ",
        "確定",
    ], [doc])
    assert all(o.result.ok for o in outcomes)
    assert [phase(o) for o in outcomes] == ["collect_case", "organize_risks", "organize_risks",
                                            "draft_knowledge", "review_knowledge"]
    first = outcomes[0].result
    assert "第8条(損害賠償)" in first.assistant_message and "第12条(解除)" in first.assistant_message
    assert "問題となった条項（条番号・見出し）" in first.data["state"]["missing_info"]
    assert outcomes[3].result.data["control"]["mode"] == "finalize"
    assert outcomes[4].result.data["state"]["missing_info"] == []
    entry = knowledge[0]
    assert entry["contract_type"] == "業務委託契約" and entry["target_clause"] == "第8条(損害賠償)"
    assert "無制限" in entry["review_points"] and "現行条文" not in entry["review_points"]
    assert "上限" in entry["action_plan"] and "登録したい" not in entry["action_plan"]
    assert "委託料の総額を上限" in entry["clause_sample"]
    assert entry["knowledge_title"].startswith("業務委託契約の損害賠償")
    assert len(chat) == 10 and all(e.get("method") == "structured_output" for e in chat[1::2])


def test_missing_info_shrinks_as_facts_arrive():
    _, _, outcomes = interview(["秘密保持契約の件です", "第5条（秘密保持）の期間が3年と短く、漏えいリスクが残る点が懸念でした。"])
    before = set(outcomes[0].result.data["state"]["missing_info"])
    after = set(outcomes[1].result.data["state"]["missing_info"])
    assert "契約書の種類（例: 業務委託契約、秘密保持契約）" not in before
    assert after < before
    assert "想定されるリスク・審査で確認すべきポイント" not in after


def test_labelled_edits_are_applied_during_review():
    _, knowledge, outcomes = interview([
        "NDAの第5条（秘密保持）で期間が短く漏えいリスクが残る点が問題です。期間を5年に延長するよう交渉すべきです。",
        "「秘密保持義務は本契約終了後5年間存続する。」",
        "タイトル: NDAの秘密保持期間は5年を確保",
    ])
    assert phase(outcomes[1]) == "draft_knowledge"
    assert phase(outcomes[2]) == "review_knowledge"
    assert knowledge[0]["knowledge_title"] == "NDAの秘密保持期間は5年を確保"
    assert knowledge[0]["contract_type"] == "秘密保持契約"
    assert knowledge[0]["clause_sample"] == "秘密保持義務は本契約終了後5年間存続する。"


def test_short_unclear_reply_is_a_clarify_turn():
    _, _, outcomes = interview(["業務委託契約です", "はい"])
    assert outcomes[1].result.data["control"]["mode"] == "clarify"
