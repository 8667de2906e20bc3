"""レビュー page through AppTest: only reviewers (verified e-mails in KAIWA_REVIEWERS) and admins see the queue;
a reviewer claims the next item, reads the conversation up to the answer with personal data masked, records
誤り with labels and a corrected answer, turns it into a regression case and replays the set; the label
filter and the pager; the score configuration is edited by admins only."""
from __future__ import annotations

import pytest

import ui.identity
from core.identity import Identity
from core.review.intake import give_feedback
from core.store import get_store
from core.store.review import ReviewQuery

REVIEWER = {"x-forwarded-user": "sato", "x-forwarded-email": "sato@example.jp"}
OPERATOR = {"x-forwarded-user": "yamada", "x-forwarded-email": "yamada@example.jp"}
ADMIN = {"x-forwarded-user": "boss", "x-forwarded-email": "boss@example.jp"}


@pytest.fixture
def as_user(monkeypatch):
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    monkeypatch.setenv("KAIWA_REVIEWERS", "sato@example.jp")
    monkeypatch.setenv("KAIWA_ADMINS", "boss@example.jp")
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "0")

    def use(headers):
        monkeypatch.setattr(ui.identity, "_headers", lambda settings: headers if settings.trust_proxy else None)
    return use


def faq_answer(question="オイル交換の目安は？ 090-1234-5678", answer="5,000 km ごとです。", outcome="answered",
               citations=("kb:003",)) -> str:
    store = get_store()
    cid = store.create_conversation("faq", Identity(name="op"))
    store.append_turn(cid, {"user": question, "message": answer, "citations": list(citations), "outcome": outcome},
                      role="exchange", user_input=question,
                      turn_json={"message": answer, "citations": list(citations), "outcome": outcome}, model="offline")
    return cid


def open_review(app):
    at = app.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    return at


def test_operators_see_no_queue(app, as_user):
    as_user(OPERATOR)
    cid = faq_answer()
    give_feedback(get_store(), cid, 0, "down", Identity(name="op"))
    at = open_review(app)
    assert any("KAIWA_REVIEWERS" in i.value for i in at.info)
    assert not at.dataframe and not [b for b in at.button if b.key == "rv_claim_next"]


def test_a_reviewer_claims_judges_and_makes_a_regression_case(app, as_user):
    as_user(REVIEWER)
    store = get_store()
    cid = faq_answer()
    give_feedback(store, cid, 0, "down", Identity(name="op"))
    at = open_review(app)
    at.button(key="rv_claim_next").click().run()
    assert not at.exception, at.exception
    [item] = store.review_page()
    assert (item["status"], item["claimed_by"]) == ("claimed", "sato@example.jp")
    shown = "\n".join(m.value for m in at.markdown)
    assert "オイル交換の目安は" in shown and "090-1234-5678" not in shown  # masked for the reviewer
    at.radio(key=f"rv_verdict_{item['id']}").set_value("incorrect").run()
    at.multiselect(key=f"rv_labels_{item['id']}").set_value(["根拠の誤り"]).run()
    at.text_area(key=f"rv_fix_{item['id']}_text").set_value("3,000 km または 6 か月ごとです。").run()
    at.selectbox(key=f"rv_fix_{item['id']}_outcome").set_value("answered").run()
    at.text_input(key=f"rv_fix_{item['id']}_citations").set_value("kb:004").run()
    at.button(key=f"rv_record_{item['id']}").click().run()
    assert not at.exception, at.exception
    done = store.get_review_item(item["id"])
    assert (done["status"], done["verdict"], done["labels"]) == ("done", "incorrect", ["根拠の誤り"])
    assert done["corrected_answer"] == {"text": "3,000 km または 6 か月ごとです。", "outcome": "answered",
                                        "citations": ["kb:004"]}
    assert any("判定を記録しました" in s.value for s in at.success)

    at.button(key=f"rv_regress_{item['id']}").click().run()
    [case] = store.list_review_scenarios()
    assert case["scenario"]["expect"] == {"outcome": "answered", "first_citation": "kb:004", "citations_min": 1}
    assert case["scenario"]["turns"] == [{"message": "オイル交換の目安は？ [電話番号]"}] or \
        "090-1234-5678" not in str(case["scenario"]["turns"])

    at.button(key="rv_replay_run").click().run()  # the regression set against this tab's offline provider
    assert not at.exception, at.exception
    assert at.metric[0].value == "0 / 1"  # the offline FAQ does not cite kb:004 first: not yet what the reviewer wants

    at.selectbox(key="rv_status").set_value("done").run()
    at.multiselect(key="rv_labels").set_value(["情報不足"]).run()
    assert any(c.value.startswith("0 件") for c in at.caption)
    at.multiselect(key="rv_labels").set_value(["根拠の誤り"]).run()
    assert any(c.value.startswith("1 件") for c in at.caption)


def test_the_queue_pages(app, as_user):
    as_user(REVIEWER)
    store = get_store()
    for i in range(55):
        store.enqueue_review(f"c{i}", 0, "faq", "sample")
    at = open_review(app)
    assert any("1–50 / 55 件" in c.value for c in at.caption)
    at.number_input(key="rv_page").set_value(2).run()
    assert any("51–55 / 55 件" in c.value for c in at.caption)
    assert store.count_review_items(ReviewQuery(statuses=("pending",))) == 55


def test_only_admins_edit_the_score_configuration(app, as_user):
    as_user(REVIEWER)
    at = open_review(app)
    assert not [b for b in at.button if b.key == "rv_labels_save"]
    as_user(ADMIN)
    at.run()
    assert not at.exception
    at.button(key="rv_labels_save").click().run()
    assert not at.exception
    assert get_store().list_audit("review_labels")[0]["actor"] == "boss@example.jp"
    assert [x["name"] for x in get_store().review_labels()][:2] == ["緊急度の誤り", "根拠の誤り"]


def test_analytics_shows_the_review_quality_section(app):
    store = get_store()
    sato = Identity(name="佐藤", email="sato@example.jp", source="proxy", roles=frozenset({"operator", "reviewer"}))
    suzuki = Identity(name="鈴木", email="suzuki@example.jp", source="proxy", roles=frozenset({"operator", "reviewer"}))
    store.add_feedback("c1", 0, "faq", "up", Identity(name="op"), prompt_version="faq_answer_system@v1", model="m")
    store.add_feedback("c1", 1, "faq", "down", Identity(name="op"), prompt_version="faq_answer_system@v1", model="m")
    for i, (a, b) in enumerate([("correct", "correct"), ("incorrect", "partial")]):
        item, _ = store.enqueue_review(f"x{i}", 0, "faq", "sample", reviews_wanted=2)
        store.record_review(item, sato, verdict=a, labels=["情報不足"] if a != "correct" else [])
        store.record_review(item, suzuki, verdict=b)
    at = app.switch_page("pages/analytics.py").run()
    assert not at.exception, at.exception
    assert any(h.value == "🧐 レビューと評価" for h in at.header)
    at.toggle(key="rq_show").set_value(True).run()
    assert not at.exception, at.exception
    frames = [d.value for d in at.dataframe]
    [agreement] = [f.set_index("指標")["値"] for f in frames if "指標" in f.columns and "一致率" in list(f["指標"])]
    assert agreement["2 人がレビューした回答"] == "2" and agreement["一致率"] == "50.0%"
    assert any("👍率" in f.columns and 0.5 in list(f["👍率"]) for f in frames)
    assert any("ラベル" in f.columns and list(f["件数"]) == [1] for f in frames)


def test_outside_text_on_the_review_page_is_inert(app, as_user):
    from tests.pages import hostile
    as_user(REVIEWER)
    store = get_store()
    cid = faq_answer(question=hostile.HOSTILE, answer=hostile.HOSTILE, citations=(hostile.HOSTILE_SESSION,))
    give_feedback(store, cid, 0, "down", Identity(name=hostile.HOSTILE_NAME))
    [item] = store.review_page()
    store.record_review(item["id"], Identity(name="鈴木", email="suzuki@example.jp", source="proxy",
                                             roles=frozenset({"operator", "reviewer"})),
                        verdict="partial", comment=hostile.HOSTILE, corrected_answer={"text": hostile.HOSTILE})
    at = open_review(app)
    at.selectbox(key="rv_status").set_value("done").run()
    at.session_state["rv_selected"] = item["id"]
    at.run()
    assert not at.exception, at.exception
    assert any(f"No.{item['id']}" in s.value for s in at.subheader)  # the item is open
    hostile.assert_inert(at, "review item")


def test_personal_data_is_shown_only_to_admins_for_an_entry_kept_with_contract_text(app, as_user):
    store = get_store()
    op = Identity(name="op")
    cid = store.create_conversation("knowledge", op)
    store.append_turn(cid, {"role": "user", "content": "乙（担当 090-1234-5678）の賠償上限"}, role="user",
                      user_input="乙（担当 090-1234-5678）の賠償上限")
    store.append_turn(cid, {"role": "assistant", "content": "上限を確認しましょう。"}, role="assistant")
    store.record_knowledge(cid, [{"knowledge_title": "賠償上限", "contract_type": "業務委託契約", "target_clause": "第8条",
                                  "review_points": "上限", "action_plan": "上限を設ける",
                                  "clause_sample": "担当 090-1234-5678 に通知する"}], op, keep_contract_text=True)
    give_feedback(store, cid, 1, "down", op)
    [item] = store.review_page()
    as_user(REVIEWER)
    at = open_review(app)
    at.session_state["rv_selected"] = item["id"]
    at.run()
    shown = "\n".join(m.value for m in at.markdown)
    assert "賠償上限" in shown and "090-1234-5678" not in shown
    assert not [t for t in at.toggle if t.key == f"rv_unmask_{item['id']}"]  # a reviewer's role does not allow it
    as_user(ADMIN)
    at.run()
    at.toggle(key=f"rv_unmask_{item['id']}").set_value(True).run()
    assert not at.exception, at.exception
    assert "090-1234-5678" in "\n".join(m.value for m in at.markdown)
    assert store.list_audit("review_item", item["id"])[0]["action"] == "review.unmask"
