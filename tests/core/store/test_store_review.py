"""Store conformance for the reviewers' loop (issue #22), on SQLite and PostgreSQL: feedback, the review
queue and its filters and pages, atomic claims that lapse, verdicts with labels from the score
configuration, the double-reviewed sample, skips, regression cases, permissions and the audit log."""
from __future__ import annotations

import threading

import pytest

from core.identity import OPERATOR, REVIEWER, Identity
from core.store import base
from core.store.review import ReviewConflict, ReviewInputError, ReviewQuery
from core.store.store import Store

DEFAULT_LABELS = ["緊急度の誤り", "根拠の誤り", "情報不足", "不適切な表現", "事実でない内容"]


@pytest.fixture
def reviewer() -> Identity:
    return Identity(name="佐藤", email="sato@example.jp", source="proxy", roles=frozenset({OPERATOR, REVIEWER}))


@pytest.fixture
def reviewer2() -> Identity:
    return Identity(name="鈴木", email="suzuki@example.jp", source="proxy", roles=frozenset({OPERATOR, REVIEWER}))


def _queue(store: Store, n: int = 3, flow: str = "diagnosis") -> list[int]:
    return [store.enqueue_review(f"c{i}", 1, flow, "sample", snapshot={"answer": f"回答{i}"},
                                 prompt_version="diagnosis_system@v1", model="offline")[0] for i in range(n)]


def test_default_labels_are_the_score_configuration(store):
    assert [x["name"] for x in store.review_labels()] == DEFAULT_LABELS


def test_feedback_is_stored_with_who_and_audited(store, operator):
    fid = store.add_feedback("c1", 3, "diagnosis", "down", operator, comment="緊急度が低すぎる",
                             prompt_version="diagnosis_system@abc", model="gpt-4o-mini")
    [row] = store.list_feedback("c1")
    assert (row["id"], row["turn"], row["rating"], row["given_by"], row["verified"]) == (fid, 3, "down",
                                                                                        "yamada@example.jp", True)
    assert row["prompt_version"] == "diagnosis_system@abc" and row["model"] == "gpt-4o-mini"
    assert store.list_audit("answer", "c1#3")[0]["action"] == "feedback.give"
    with pytest.raises(ReviewInputError):
        store.add_feedback("c1", 3, "diagnosis", "meh", operator)
    assert store.set_feedback_comment(fid, "追記", operator)
    other = Identity(name="他人", email="x@example.jp", source="proxy")
    assert not store.set_feedback_comment(fid, "書き換え", other)  # only the giver changes their comment
    assert store.list_feedback("c1")[0]["comment"] == "追記"


def test_an_answer_is_queued_once_and_keeps_its_strongest_reason(store):
    first, new = store.enqueue_review("c1", 1, "faq", "sample")
    assert new
    again, new = store.enqueue_review("c1", 1, "faq", "thumbs_down")
    assert (again, new) == (first, False)
    assert store.get_review_item(first)["reason"] == "thumbs_down"
    store.enqueue_review("c1", 1, "faq", "faq_not_found")  # weaker: kept as thumbs_down
    assert store.get_review_item(first)["reason"] == "thumbs_down"
    assert store.count_review_items() == 1


def test_claims_are_exclusive_and_lapse(store, reviewer, reviewer2):
    [item, *_] = _queue(store)
    store.claim_review_item(item, reviewer)
    with pytest.raises(ReviewConflict, match="佐藤"):
        store.claim_review_item(item, reviewer2)
    with pytest.raises(ReviewConflict):
        store.record_review(item, reviewer2, verdict="correct")
    assert store.count_review_items(ReviewQuery(statuses=("claimed",))) == 1
    later = base.now_iso
    try:  # 31 minutes on: the claim lapsed, the item is pending again and another reviewer can take it
        from datetime import datetime, timedelta
        store.now = lambda: (datetime.fromisoformat(later()) + timedelta(minutes=31)).isoformat()
        assert store.get_review_item(item)["status"] == "pending"
        assert store.count_review_items(ReviewQuery(statuses=("pending",))) == 3
        assert store.claim_review_item(item, reviewer2)["claimed_by"] == "suzuki@example.jp"
    finally:
        del store.now


def test_two_reviewers_claiming_at_once_never_both_hold_it(store_url, reviewer, reviewer2):
    setup = Store(store_url)
    items = _queue(setup, 5)
    stores = [Store(store_url, run_migrations=False) for _ in range(2)]
    won: dict[str, list[int]] = {"a": [], "b": []}
    barrier = threading.Barrier(2)

    def work(key, store, actor):
        barrier.wait()
        for item in items:
            try:
                store.claim_review_item(item, actor)
                won[key].append(item)
            except ReviewConflict:
                pass

    threads = [threading.Thread(target=work, args=("a", stores[0], reviewer)),
               threading.Thread(target=work, args=("b", stores[1], reviewer2))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(won["a"] + won["b"]) == items  # every item claimed exactly once
    assert not set(won["a"]) & set(won["b"])
    for s in [setup, *stores]:
        s.engine.dispose()


def test_claim_next_skips_items_held_by_others(store, reviewer, reviewer2):
    items = _queue(store)
    assert store.claim_next_review_item(reviewer)["id"] == items[0]
    assert store.claim_next_review_item(reviewer2)["id"] == items[1]
    assert store.claim_next_review_item(reviewer2, ReviewQuery(flows=("faq",))) is None


def test_a_verdict_is_recorded_with_labels_and_correction(store, reviewer):
    [item, *_] = _queue(store)
    store.claim_review_item(item, reviewer)
    done = store.record_review(item, reviewer, verdict="incorrect", labels=["緊急度の誤り", "情報不足"],
                               comment="すぐ停車を案内すべき", corrected_answer={"text": "直ちに停車", "urgency": "critical"})
    assert (done["status"], done["verdict"], done["labels"]) == ("done", "incorrect", ["緊急度の誤り", "情報不足"])
    assert done["corrected_answer"]["urgency"] == "critical" and done["reviewed_by_label"] == "佐藤"
    assert done["claimed_by"] is None and len(done["verdicts"]) == 1
    assert store.count_review_items(ReviewQuery(labels=("情報不足",))) == 1
    assert store.count_review_items(ReviewQuery(labels=("根拠の誤り",))) == 0
    assert store.count_review_items(ReviewQuery(reviewers=("sato@example.jp",), statuses=("done",))) == 1
    actions = [a["action"] for a in store.list_audit("review_item", item)]
    assert actions == ["review.verdict", "review.claim"]
    [row] = store.reviewed_items()
    assert row["snapshot"]["answer"] == "回答0"
    with pytest.raises(ReviewConflict, match="レビュー済み"):
        store.record_review(item, reviewer, verdict="correct")


@pytest.mark.parametrize("verdict, labels", [("wrong", []), ("correct", ["存在しないラベル"]), ("correct", "緊急度の誤り")])
def test_unknown_verdicts_and_labels_are_refused(store, reviewer, verdict, labels):
    [item, *_] = _queue(store)
    with pytest.raises(ReviewInputError):
        store.record_review(item, reviewer, verdict=verdict, labels=labels)
    assert store.get_review_item(item)["status"] == "pending"  # nothing recorded, the item not taken


def test_the_double_reviewed_sample_wants_a_second_reviewer(store, reviewer, reviewer2):
    item, _ = store.enqueue_review("c9", 2, "faq", "sample", reviews_wanted=2)
    store.record_review(item, reviewer, verdict="partial", labels=["情報不足"])
    assert store.get_review_item(item)["status"] == "pending"
    with pytest.raises(ReviewConflict, match="すでにレビュー"):
        store.claim_review_item(item, reviewer)
    assert store.claim_next_review_item(reviewer) is None
    done = store.record_review(item, reviewer2, verdict="incorrect")
    assert done["status"] == "done" and done["verdict"] == "partial"  # the item keeps the first verdict
    assert [v["reviewer"] for v in done["verdicts"]] == ["sato@example.jp", "suzuki@example.jp"]
    assert len(store.review_verdict_rows()) == 2


def test_skip_and_release(store, reviewer, reviewer2):
    a, b, _ = _queue(store)
    store.claim_review_item(a, reviewer)
    assert not store.release_review_item(a, reviewer2)
    assert store.release_review_item(a, reviewer)
    store.skip_review_item(b, reviewer2, comment="判断できない")
    assert store.get_review_item(b)["status"] == "skipped"
    assert store.count_review_items(ReviewQuery(statuses=("skipped",))) == 1
    assert store.list_audit("review_item", b)[0]["action"] == "review.skip"


def test_operators_cannot_review_and_only_admins_edit_labels(store, operator, reviewer, admin):
    [item, *_] = _queue(store)
    for call in (lambda: store.claim_review_item(item, operator), lambda: store.record_review(item, operator, verdict="correct"),
                 lambda: store.skip_review_item(item, operator), lambda: store.claim_review_item(item, "api"),
                 lambda: store.save_review_labels([{"name": "x"}], reviewer)):
        with pytest.raises(PermissionError):
            call()
    store.record_review(item, admin, verdict="correct")  # admins may review too
    labels = store.save_review_labels([{"name": "緊急度の誤り"}, {"name": "  新しい  ラベル "}], admin)
    assert [(x["name"], x["active"]) for x in labels][:2] == [("緊急度の誤り", True), ("新しい ラベル", True)]
    assert [x["name"] for x in store.review_labels()] == ["緊急度の誤り", "新しい ラベル"]
    assert store.list_audit("review_labels")[0]["actor"] == "admin@example.jp"
    with pytest.raises(ReviewInputError):
        store.save_review_labels([{"name": "緊急度の誤り", "active": False}], admin)


def test_queue_filters_and_pages(store, reviewer):
    ids = _queue(store, 7, "diagnosis") + _queue(store, 0)
    faq = [store.enqueue_review(f"f{i}", 0, "faq", "faq_not_found", prompt_version="faq_answer_system@v2")[0]
           for i in range(4)]
    assert store.count_review_items(ReviewQuery(flows=("faq",))) == 4
    assert store.count_review_items(ReviewQuery(reasons=("faq_not_found",), prompt_versions=("faq_answer_system@v2",))) == 4
    page = store.review_page(ReviewQuery(flows=("diagnosis",)), limit=3, offset=3)
    assert [r["id"] for r in page] == ids[3:6] and "snapshot" not in page[0]
    assert store.review_position(ids[5], ReviewQuery(flows=("diagnosis",))) == 5
    assert store.review_position(faq[0], ReviewQuery(flows=("diagnosis",))) is None
    assert sorted(store.review_values("flow")) == ["diagnosis", "faq"]
    assert store.count_review_items(ReviewQuery(since="2999-01-01")) == 0


def test_regression_cases_are_stored_and_linked(store, reviewer, operator):
    [item, *_] = _queue(store)
    store.record_review(item, reviewer, verdict="incorrect", corrected_answer={"urgency": "critical"})
    scenario = {"name": "レビュー #1", "flow": "diagnosis", "turns": [{"message": "ブレーキが効かない"}],
                "expect": {"urgency": "critical"}}
    with pytest.raises(PermissionError):
        store.add_review_scenario(item, scenario, operator)
    sid = store.add_review_scenario(item, scenario, reviewer)
    assert store.get_review_item(item)["scenario_id"] == sid
    second = store.add_review_scenario(item, {**scenario, "name": "レビュー #1 改"}, reviewer)
    [stored] = store.list_review_scenarios()
    assert (stored["id"], stored["scenario"]["expect"]) == (second, {"urgency": "critical"})


def test_the_queue_reads_an_index_in_order(tmp_path):
    """Each filter of the queue is an index range read in id order: no scan of the table, no sort of the queue
    (SQLite's plan; PostgreSQL's planner chooses by statistics)."""
    from sqlalchemy import select

    from core.store import tables as t
    store = Store(f"sqlite:///{tmp_path / 'plan.db'}")
    c = t.review_items.c
    for query in (ReviewQuery(statuses=("pending",)), ReviewQuery(flows=("faq",), statuses=("pending",)),
                  ReviewQuery(labels=("情報不足",)), ReviewQuery(prompt_versions=("p@1",))):
        stmt = select(c.id).where(*store._review_where(query, store.now())).order_by(c.id).limit(50)
        sql = str(stmt.compile(store.engine, compile_kwargs={"literal_binds": True}))
        with store._read() as conn:
            plan = " | ".join(str(row[-1]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        assert "TEMP B-TREE" not in plan, (query, plan)
        assert "SCAN review_items" not in plan or "USING" in plan, (query, plan)
    store.engine.dispose()


def test_queueing_an_answer_is_one_write_transaction(store):
    """Issue #25: an answer entering the queue after a turn is one write transaction (the look for an item
    already there and the insert were two); a second reason for the same answer keeps its item, a stronger
    one replaces a pending item's reason. Both engines; counted."""
    from sqlalchemy import event

    writes: list[int] = []

    def begin(conn):
        if conn.get_execution_options().get("kaiwa_write"):
            writes.append(1)

    event.listen(store.engine, "begin", begin)
    try:
        item, new = store.enqueue_review("c1", 3, "diagnosis", "sample", snapshot={"answer": "回答"})
        assert new and len(writes) == 1
        again, new = store.enqueue_review("c1", 3, "diagnosis", "critical")
        assert (again, new) == (item, False) and len(writes) == 2
    finally:
        event.remove(store.engine, "begin", begin)
    [row] = store.review_page(ReviewQuery())
    assert row["reason"] == "critical" and row["id"] == item


def test_one_answers_debug_records_are_read_from_the_index(store):
    """``list_debug_records(after=…, until=…)``: only the records of one answer's window (after < time ≤
    until) are read, not the conversation's newest 200 filtered afterwards. Both engines."""
    for i in range(6):
        store.add_debug_record({"session_id": "c1", "time": f"2026-11-27T01:00:0{i}.000+00:00", "task": f"t{i}"}, "op")
    store.add_debug_record({"session_id": "c2", "time": "2026-11-27T01:00:03.000+00:00", "task": "other"}, "op")
    window = store.list_debug_records(conversation_id="c1", after="2026-11-27T01:00:02.000+00:00",
                                      until="2026-11-27T01:00:04.000+00:00")
    assert [r["task"] for r in window] == ["t3", "t4"]
