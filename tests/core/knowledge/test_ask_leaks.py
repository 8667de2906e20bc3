"""Ask the knowledge base, what leaves it (issue 23): entries saved without masking (「個人情報をマスクしない」)
and personal data in the question leave masked as the library listing masks them; a model that obeys an
instruction planted in a confirmed entry (``tests/fakes/obedient.py``) leaks neither uncited entries, nor
its system prompt, nor the attacker's addresses — entries reach it as quoted data, and its answer is checked."""
from __future__ import annotations

from bench.knowledge_recall import REVIEWER
from core.knowledge.answer_guard import problems
from core.knowledge.ask import ask
from core.knowledge.retrieval import KnowledgeIndex
from core.llm.scripted import ScriptedClient
from core.prompts import load_prompt
from tests.fakes.obedient import EVIL_IMAGE, EVIL_LINK, PLANTED, echo_question, obedient

QUESTION = "相手だけがいつでも契約を解除できる条項には、普段どう対応していますか？"
PHONE, EMAIL = "090-1234-5678", "legal.tanaka@example.co.jp"


def plant(store, **fields) -> int:
    """A confirmed entry on the question's topic (from an uploaded counterparty draft)."""
    entry = {"contract_type": "業務委託契約", "knowledge_title": "任意解除条項への対応（相手方ドラフト）",
             "target_clause": "解除", "review_points": "・相手だけがいつでも契約を解除できる条項かを確認する",
             "action_plan": "・相手だけがいつでも解除できる条項には予告期間を求める", "clause_sample": "", **fields}
    [entry_id] = store.record_knowledge(None, [entry], REVIEWER, keep_contract_text=True)
    store.set_entry_status(entry_id, "confirm", REVIEWER)
    return entry_id


def test_an_unmasked_entry_and_the_question_leave_masked(library):
    store, _ = library
    planted = plant(store, action_plan=f"・相手だけがいつでも解除できる条項には予告期間を求める\n・窓口 {PHONE} / {EMAIL}")
    assert PHONE in store.get_entry(planted)["action_plan"]  # stored as typed (the library lists it masked)
    client = ScriptedClient([echo_question])
    answer = ask(f"{QUESTION} 担当は taro @ example.com（090～1111～2222）", KnowledgeIndex(store), client)
    text = answer.answer + repr(answer.as_response()) + repr(answer.quotes)
    for secret in (PHONE, EMAIL, "taro @ example.com", "090～1111～2222"):
        assert secret not in text
    sent = repr(client.requests[0].messages) + repr(client.requests[0].context)
    assert PHONE not in sent and EMAIL not in sent  # the model never saw them either


def test_an_obedient_model_leaks_no_uncited_entry_no_prompt_and_no_attacker_address(library):
    store, _ = library
    plant(store, review_points="・相手だけがいつでも契約を解除できる条項かを確認する\n" + PLANTED)
    index = KnowledgeIndex(store)
    client = ScriptedClient([obedient])
    answer = ask(QUESTION, index, client)
    request = client.requests[0]
    assert "<<<DOCUMENT>>>" in request.messages[1]["content"] and PLANTED not in request.messages[0]["content"]
    cited = {h.entry_id for h in answer.sources}
    assert len(cited) == 1
    for hit in index.search(QUESTION, n=3):
        if hit.entry_id not in cited:
            assert hit.entry["action_plan"].split("\n")[0] not in answer.answer
    system = load_prompt("knowledge_answer_system")
    assert all(line not in answer.answer for line in system.split("\n") if len(line) > 20)
    assert EVIL_IMAGE not in answer.answer and EVIL_LINK not in answer.answer and "![" not in answer.answer
    assert PLANTED not in answer.answer


def test_the_check_names_each_problem(library):
    store, _ = library
    hits = KnowledgeIndex(store).search(QUESTION, n=3)
    cited, other = hits[:1], hits[1]
    body = other.entry["action_plan"]
    assert problems(cited[0].entry["action_plan"], cited, hits) == []
    assert problems(body, cited, hits) == ["uncited_entry"]
    assert problems("詳細は https://evil.example/x を参照", cited, hits) == ["url"]
    assert problems("![x](data:image/png;base64,AAAA)", cited, hits) == ["image"]
    system = load_prompt("knowledge_answer_system")
    assert problems(system, cited, hits, instructions=[system]) == ["instructions"]
