"""👍/👎 under every answer (AppTest, offline provider) on 車両問診, FAQ, 契約ナレッジ作成 and ナレッジに質問: a
rating is stored with the answer's turn, flow, prompt version, model and who gave it; a 👎 puts the answer in
the review queue, and so do a critical answer, an FAQ answer without an article and a failed model call."""
from __future__ import annotations

import pytest

from core.identity import Identity
from core.store import get_store
from core.store.review import ReviewQuery
from tests.pages.test_diagnosis_page import open_diagnosis, say, to_symptom


@pytest.fixture(autouse=True)
def _no_random_sample(monkeypatch):
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "0")


def _feedback_keys(at, flow: str) -> list[str]:
    return [f.key for f in at.feedback if f.key.startswith(f"fb_{flow}_")]


def test_every_diagnosis_answer_has_a_thumbs_and_a_thumbs_down_queues_it(app):
    at = open_diagnosis(app)
    to_symptom(at)
    say(at, "ブレーキペダルが床まで沈む")
    cid = at.session_state["diagnosis_conversation_id"]
    store = get_store()
    answers = [i for i, e in enumerate(store.chat_entries(cid)) if e["role"] == "assistant"]
    assert _feedback_keys(at, "diagnosis") == [f"fb_diagnosis_{cid}_{i}" for i in answers]
    # the newest answer is critical: queued as the safety sample without anyone's feedback
    assert [(r["turn"], r["reason"]) for r in store.review_page()] == [(answers[-1], "critical")]

    first = answers[0]
    at.feedback(key=f"fb_diagnosis_{cid}_{first}").set_value(0).run()  # 👎
    assert not at.exception
    [row] = store.list_feedback(cid)
    assert (row["turn"], row["rating"], row["flow"], row["given_by"]) == (first, "down", "diagnosis", "anonymous:匿名")
    assert row["prompt_version"].startswith("diagnosis_system@") and row["model"]
    assert store.count_review_items(ReviewQuery(reasons=("thumbs_down",))) == 1
    at.text_input(key=f"fb_diagnosis_{cid}_{first}_comment").set_value("車種の確認が不要").run()
    assert store.list_feedback(cid)[0]["comment"] == "車種の確認が不要"


def test_faq_answers_have_feedback_and_a_not_found_answer_is_queued(app):
    at = app.switch_page("pages/faq.py").run()
    at.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    at.chat_input(key="faq_input").set_value("社長の好きな食べ物は？").run()
    assert not at.exception
    cid = at.session_state["faq_conversation_id"]
    assert _feedback_keys(at, "faq") == [f"fb_faq_{cid}_0", f"fb_faq_{cid}_1"]
    store = get_store()
    outcomes = [e["outcome"] for e in store.chat_entries(cid)]
    assert outcomes[1] == "not_found", outcomes
    assert [(r["turn"], r["reason"]) for r in store.review_page()] == [(1, "faq_not_found")]
    at.feedback(key=f"fb_faq_{cid}_0").set_value(1).run()  # 👍: stored, not queued
    assert [(f["turn"], f["rating"], f["flow"]) for f in store.list_feedback(cid)] == [(0, "up", "faq")]
    assert store.count_review_items() == 1


def test_knowledge_answers_have_feedback(app):
    at = app.switch_page("pages/knowledge.py").run()
    at.chat_input(key="knowledge_input").set_value("業務委託契約の損害賠償条項で、上限がない場合の対応を相談したい").run()
    assert not at.exception
    cid = at.session_state["session_id"]
    entries = get_store().chat_entries(cid)
    answer = max(i for i, e in enumerate(entries) if e["role"] == "assistant")
    assert f"fb_knowledge_{cid}_{answer}" in _feedback_keys(at, "knowledge")
    at.feedback(key=f"fb_knowledge_{cid}_{answer}").set_value(0).run()
    [item] = get_store().review_page()
    assert (item["flow"], item["turn"], item["reason"]) == ("knowledge", answer, "thumbs_down")
    assert item["prompt_version"].startswith("knowledge_system@")


def test_ask_the_knowledge_base_answer_has_feedback(app):
    store = get_store()
    store.record_knowledge(None, [{"knowledge_title": "損害賠償の上限", "contract_type": "業務委託契約",
                                   "target_clause": "第8条（損害賠償）", "review_points": "上限額が委託料総額を超えないか",
                                   "action_plan": "上限を委託料総額とする", "clause_sample": "乙の賠償額は…"}],
                           Identity(name="t"))
    at = app.switch_page("pages/ask_knowledge.py").run()
    at.text_area(key="ask_question").input("損害賠償の上限はどうしていますか")
    next(b for b in at.button if b.label == "質問する").click().run()
    assert not at.exception
    sid = at.session_state["ask_session_id"]
    assert _feedback_keys(at, "ask") == [f"fb_ask_{sid}_0"]
    at.feedback(key=f"fb_ask_{sid}_0").set_value(0).run()
    [item] = store.review_page()
    assert (item["flow"], item["conversation_id"], item["reason"]) == ("ask", sid, "thumbs_down")
    full = store.get_review_item(item["id"])
    assert full["snapshot"]["question"] == "損害賠償の上限はどうしていますか" and full["snapshot"]["answer"]


def test_the_random_sample_share_is_configurable(app, monkeypatch):
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "1")
    at = app.switch_page("pages/faq.py").run()
    at.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    assert [r["reason"] for r in get_store().review_page()] == ["sample"]
