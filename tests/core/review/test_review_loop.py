"""core.review over a real stored diagnosis conversation (offline provider, keyword manual): the answer at a
turn, the reasons an answer is queued, feedback, the regression case a review makes (and that `python -m
core.eval --stored` runs it), the replay of the reviewed set, the export, and the quality figures with
two reviewers' agreement (percent and Cohen's kappa)."""
from __future__ import annotations

import csv
import io
import json

import pytest

from core.diagnosis.conversation import DiagnosisConversations
from core.diagnosis.models import ChatRequest
from core.eval.runner import main as eval_main
from core.identity import OPERATOR, REVIEWER, Identity
from core.llm.offline import OfflineClient
from core.review import quality
from core.review.answers import NotAnAnswer, answer_at
from core.review.export import export_csv, export_jsonl
from core.review.intake import consider, give_feedback, reason_for
from core.review.regression import NotReplayable, expectations, make_regression_case, scenario_for_item
from core.review.replay import replay_reviewed
from core.store.store import Store
from core.store.debug_sink import StoredDebugLog
from tests.core.diagnosis.diagnosis_fakes import MIRAI, KeywordManualRetriever, TaskClient, diag

OPERATOR_ID = Identity(name="山田", email="yamada@example.jp", source="proxy")
SATO = Identity(name="佐藤", email="sato@example.jp", source="proxy", roles=frozenset({OPERATOR, REVIEWER}))
SUZUKI = Identity(name="鈴木", email="suzuki@example.jp", source="proxy", roles=frozenset({OPERATOR, REVIEWER}))


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'review.db'}")
    yield s
    s.engine.dispose()


def diagnosis(store, message: str) -> tuple[str, int]:
    """A stored diagnosis conversation up to the answer to ``message``: (id, that answer's turn)."""
    conversations = DiagnosisConversations(store, client=OfflineClient(), owner=OPERATOR_ID,
                                           retriever=KeywordManualRetriever())
    sid = conversations.handle(ChatRequest()).session_id
    conversations.handle(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI))
    conversations.handle(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    conversations.handle(ChatRequest(session_id=sid, message=message))
    entries = store.chat_entries(sid)
    return sid, max(i for i, e in enumerate(entries) if e["role"] == "assistant")


def test_an_answer_is_read_with_its_facts_and_a_user_turn_is_not_an_answer(store):
    sid, turn = diagnosis(store, "ブレーキペダルが床まで沈む 090-1234-5678")
    answer = answer_at(store, sid, turn)
    assert (answer.flow, answer.urgency, answer.can_drive) == ("diagnosis", "critical", False)
    assert "ブレーキペダル" in answer.question and answer.text
    assert answer.prompt_version.startswith("diagnosis_system@") and answer.model
    assert "090-1234-5678" not in json.dumps(answer.snapshot(), ensure_ascii=False)
    assert reason_for(answer, sample=0) == "critical"
    with pytest.raises(NotAnAnswer):
        answer_at(store, sid, turn - 1)
    with pytest.raises(NotAnAnswer):
        answer_at(store, sid, 999)
    with pytest.raises(LookupError):
        answer_at(store, "nope", 0)


def test_an_answers_calls_are_the_only_debug_records_read(store, monkeypatch):
    """Issue #25: the intake reads the debug records of the answer's window (after the turn before it, up to
    the answer) from the index, not every record of the conversation parsed and then filtered: a long
    conversation's answer costs its own calls. Counted (records parsed)."""
    from core.store import debug_records
    from core.store.chat_sync import sync_chat

    clock = iter(f"2026-11-27T01:00:{s:02d}.000+00:00" for s in range(60))
    monkeypatch.setattr(store, "now", lambda: next(clock))  # every stamp a second after the one before
    sid = store.create_conversation("diagnosis", OPERATOR_ID)
    chat = [{"role": "assistant", "step": "vehicle_id", "message": "車両は？"}, {"role": "user", "text": "ミライ"}]
    sync_chat(store, sid, chat, flow="diagnosis")
    for i in range(5):  # calls before the question: another answer's
        store.add_debug_record({"session_id": sid, "time": f"2000-01-01T00:00:0{i}.000+00:00", "task": "old"}, "op")
    asked = store.list_turns(sid)[-1]["created_at"]
    own = [store.add_debug_record({"session_id": sid, "time": store.now(), "task": task, "prompt": "diagnosis_system",
                                   "prompt_version": "v9", "kind": kind, "outcome": "ok"}, "op")
           for task, kind in (("diagnostic", "call"), ("diagnostic", "repair"))]
    sync_chat(store, sid, [*chat, {"role": "assistant", "step": "diagnosing", "message": "いつからですか？"}],
              flow="diagnosis")
    assert store.list_turns(sid)[-1]["created_at"] > asked
    parsed: list[int] = []
    real = debug_records._as_record
    monkeypatch.setattr(debug_records, "_as_record", lambda row: parsed.append(row.id) or real(row))
    answer = answer_at(store, sid, 2)
    assert answer.debug_ids == own and sorted(parsed) == own  # not the 5 older ones
    assert answer.repaired and answer.prompt_version == "diagnosis_system@v9"

def test_a_chat_turns_answer_is_read_with_its_own_calls_and_a_repaired_one_is_queued(store):
    """A chat turn writes its question and its answer in one transaction with one stamp, so the row before
    the answer is no bound of its calls: they are those made since the turn before. Its calls are read with
    the answer (they were none), and a turn whose call needed a repair is queued as ``repaired_call``."""
    client = TaskClient({"diagnostic_response": ["{これはJSONではない", diag()]})
    log = StoredDebugLog(store, "op")
    conversations = DiagnosisConversations(store, client=client, owner=OPERATOR_ID,
                                           retriever=KeywordManualRetriever())
    sid = conversations.handle(ChatRequest(), log=log).session_id
    conversations.handle(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI), log=log)
    conversations.handle(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"), log=log)
    earlier = {r["id"] for r in store.list_debug_records(conversation_id=sid)}
    conversations.handle(ChatRequest(session_id=sid, message="ブレーキを踏むとキーキー鳴る"), log=log)
    rows = store.list_turns(sid)
    turn = max(i for i, e in enumerate(store.chat_entries(sid)) if e["role"] == "assistant")
    assert rows[turn]["created_at"] == rows[turn - 1]["created_at"]  # the question and the answer: one write
    own = sorted(r["id"] for r in store.list_debug_records(conversation_id=sid) if r["id"] not in earlier)
    answer = answer_at(store, sid, turn)
    assert len(own) >= 2 and sorted(answer.debug_ids) == own  # the call, its repair (and any other of the turn)
    assert answer.repaired and answer.urgency != "critical" and not answer.failed
    named = [r for r in store.list_debug_records(conversation_id=sid) if r["id"] in own and r.get("prompt_version")]
    assert answer.prompt_version.endswith(f"@{named[-1]['prompt_version']}")  # the version the turn ran
    item_id = consider(store, sid, turn, sample=0)
    assert item_id is not None and store.get_review_item(item_id)["reason"] == "repaired_call"


def test_reasons_sample_and_feedback(store):
    sid, turn = diagnosis(store, "ブレーキを踏むとキーキー鳴る")
    answer = answer_at(store, sid, turn)
    assert answer.urgency != "critical"
    assert reason_for(answer, sample=0) is None and reason_for(answer, sample=1) == "sample"
    assert consider(store, sid, turn, sample=0) is None
    feedback_id, item_id = give_feedback(store, sid, turn, "down", OPERATOR_ID, comment="原因が違う")
    assert store.get_review_item(item_id)["reason"] == "thumbs_down"
    assert store.list_feedback(sid)[0]["id"] == feedback_id
    answer.failed = True
    assert reason_for(answer, sample=0) == "failed_call"


def test_a_review_becomes_a_regression_case_that_fails_until_the_answer_changes(store, tmp_path, capsys):
    sid, turn = diagnosis(store, "ブレーキを踏むとキーキー鳴る")
    _, item_id = give_feedback(store, sid, turn, "down", OPERATOR_ID)
    with pytest.raises(NotReplayable):  # no verdict yet
        scenario_for_item(store, store.get_review_item(item_id))
    store.record_review(item_id, SATO, verdict="incorrect", labels=["緊急度の誤り"],
                        corrected_answer={"text": "すぐに停車してください", "urgency": "critical", "can_drive": False})
    scenario_id, scenario = make_regression_case(store, item_id, SATO)
    assert scenario["flow"] == "diagnosis" and scenario["vehicle"] == MIRAI
    assert scenario["turns"] == [{"message": "ブレーキを踏むとキーキー鳴る"}]
    assert scenario["expect"] == {"urgency": "critical", "can_drive": False}
    [row] = replay_reviewed(store, OfflineClient)
    assert (row.scenario_id, row.item_id, row.verdict, row.matches) == (scenario_id, item_id, "incorrect", False)
    assert any("urgency" in f for f in row.failures)
    assert row.as_row()["判定と一致"].startswith("❌")
    # python -m core.eval --stored runs the stored cases too (exit 1: one failed)
    assert eval_main(["--stored", "--db", store.url]) == 1
    assert "FAIL  [diagnosis] レビュー #" in capsys.readouterr().out


def test_a_correct_answer_becomes_a_case_that_passes(store):
    sid, turn = diagnosis(store, "ブレーキペダルが床まで沈む")
    item_id = consider(store, sid, turn, sample=0)
    store.record_review(item_id, SATO, verdict="correct")
    _, scenario = make_regression_case(store, item_id, SATO)
    assert scenario["expect"]["urgency"] == "critical"
    [row] = replay_reviewed(store, OfflineClient)
    assert row.matches, row.failures


@pytest.mark.parametrize("flow, right, expect", [
    ("faq", {"outcome": "not_found", "citations": [], "must_include": ["担当者"]},
     {"outcome": "not_found", "message_contains": ["担当者"]}),
    ("faq", {"outcome": "answered", "citations": ["kb:007", "kb:008"]},
     {"outcome": "answered", "first_citation": "kb:007", "citations_min": 1}),
    ("knowledge", {"fields": {"contract_type": "業務委託契約", "action_plan": "上限を設ける", "bogus": "x"}},
     {"knowledge_fields": ["action_plan", "contract_type"], "knowledge_contains": {"contract_type": "業務委託契約"}}),
    ("diagnosis", {"urgency": "extreme", "text": "自由記述だけ"}, {}),
])
def test_expectations_come_from_checkable_facts_only(flow, right, expect):
    assert expectations(flow, right) == expect


def test_export_is_masked_and_spreadsheet_safe(store):
    item, _ = store.enqueue_review("c1", 0, "faq", "sample", snapshot={"question": "電話は 090-1234-5678", "answer": "回答"})
    store.record_review(item, SATO, verdict="partial", labels=["情報不足"], comment="-1+1 taro@example.com",
                        corrected_answer={"text": "=cmd|' /C calc'!A0"})
    [line] = export_jsonl(store.reviewed_items()).splitlines()
    row = json.loads(line)
    assert "090-1234-5678" not in line and "taro@example.com" not in line
    assert row["labels"] == ["情報不足"] and row["reviewer"] == "佐藤"
    [cells] = list(csv.DictReader(io.StringIO(export_csv(store.reviewed_items()).decode("utf-8-sig"))))
    assert cells["comment"].startswith("'-") and cells["corrected_answer"].startswith("{")
    assert cells["labels"] == "情報不足"


def test_quality_figures_and_two_reviewer_agreement(store):
    store.add_feedback("c1", 0, "faq", "up", OPERATOR_ID, prompt_version="p@1", model="m")
    store.add_feedback("c1", 1, "faq", "down", OPERATOR_ID, prompt_version="p@1", model="m")
    store.add_feedback("c2", 0, "diagnosis", "up", OPERATOR_ID, prompt_version="d@1", model="m")
    rates = quality.feedback_rates(store)
    faq = rates[rates["フロー"] == "faq"].iloc[0]
    assert (faq["👍"], faq["👎"], faq["👍率"]) == (1, 1, 0.5)
    verdicts = [("correct", "correct"), ("incorrect", "incorrect"), ("partial", "correct"), ("correct", "correct")]
    for i, (a, b) in enumerate(verdicts):
        item, _ = store.enqueue_review(f"d{i}", 0, "faq", "sample", prompt_version="p@1", reviews_wanted=2)
        store.record_review(item, SATO, verdict=a, labels=["情報不足"] if a != "correct" else [])
        store.record_review(item, SUZUKI, verdict=b)
    got = quality.agreement(store)
    assert (got.items, got.agreed, got.percent) == (4, 3, 0.75)
    from sklearn.metrics import cohen_kappa_score
    expected = cohen_kappa_score([a for a, _ in verdicts], [b for _, b in verdicts])
    assert got.kappa == round(expected, 3) and 0 < got.kappa < 1
    table = quality.verdict_rates(store)
    assert int(table["正しい"].sum()) == 5 and int(table["誤り"].sum()) == 2
    assert quality.label_counts(store).to_dict("records") == [{"ラベル": "情報不足", "件数": 2}]
    assert quality.agreement(store, since="2999-01-01").kappa is None


def test_certainly_not_queued_only_when_no_reason_holds(monkeypatch):
    """The read-free pre-check after an API turn (issue #25) says "not queued" only when none of consider()'s
    reasons can hold: a fallback, a critical urgency, a repair or retry, a failed last call, the sample."""
    from core.review.intake import certainly_not_queued

    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "0")
    plain = {"role": "assistant", "step": "diagnosing", "message": "いつからですか？",
             "response": {"urgency": {"level": "low", "can_drive": True}}}
    ok = [{"kind": "call", "outcome": "ok"}]
    assert certainly_not_queued("c1", 3, "diagnosis", plain, ok)
    assert certainly_not_queued("c1", 3, "diagnosis", plain, [])
    assert not certainly_not_queued("c1", 3, "diagnosis", {**plain, "fallback": True}, ok)
    critical = {**plain, "response": {"urgency": {"level": "critical", "can_drive": False}}}
    assert not certainly_not_queued("c1", 3, "diagnosis", critical, ok)
    assert not certainly_not_queued("c1", 3, "diagnosis", plain, [{"kind": "repair", "outcome": "ok"}, *ok])
    assert not certainly_not_queued("c1", 3, "diagnosis", plain, [*ok, {"kind": "call", "outcome": "error"}])
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "1")
    assert not certainly_not_queued("c1", 3, "diagnosis", plain, ok)
