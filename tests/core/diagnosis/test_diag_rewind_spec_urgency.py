"""Rewind snapshots, SPEC_CHECK phase 2, URGENCY_CHECK and the UrgencyAssessor merge."""
from __future__ import annotations

import pytest
from diagnosis_fakes import FakeRetriever, Hit, TaskClient, diag

from core.diagnosis import ChatRequest, ChatStep
from core.diagnosis.rag import RagHit
from core.diagnosis.steps.spec_check import handle_spec_check
from core.diagnosis.steps.urgency import handle_urgency_check
from core.diagnosis.urgency_assessor import UrgencyAssessor, merge
from core.diagnosis.urgency_rules import KeywordUrgency
from core.llm.base import ProviderError

HITS = [Hit("v:s55", "異音・振動がするとき", "general", False, 0.6, page=464)]


def questions(n):
    return [diag(message=f"質問{i}はどうですか？", question_topic=f"音の状況{i}", choices=[f"選択{i}A", f"選択{i}B"])
            for i in range(n)]


# --- rewind ------------------------------------------------------------------------------------------

def test_rewind_restores_exactly_the_snapshot_state(driver):
    d = driver(client=TaskClient({"diagnostic_response": questions(6)}), retriever=FakeRetriever(HITS))
    d.to_symptom()
    d.msg("走行中に異音がする")  # turn 1
    d.act("answer", "選択0A")  # turn 2
    d.act("answer", "選択1B")  # turn 3
    before = d.session
    assert [s["turn"] for s in before.state_snapshots] == [1, 2, 3]
    snapshot = before.state_snapshots[1]
    r = d.rewind(2)
    after = d.session
    assert r.rewound_to_turn == 2 and r.current_step == "diagnosing"
    assert after.model_dump(mode="json", exclude={"state_snapshots", "updated_at"}) == \
        {k: v for k, v in snapshot["state"].items() if k != "updated_at"}
    assert [s["turn"] for s in after.state_snapshots] == [1]
    assert after.diagnostic_turn == 1 and after.collected_symptoms == ["走行中に異音がする"]
    assert r.prompt.message == "質問0はどうですか？" and [c.value for c in r.prompt.choices][:2] == ["選択0A", "選択0B"]
    # answering again replays turn 2 with the new answer
    r = d.act("answer", "選択0B")
    assert d.session.collected_symptoms == ["走行中に異音がする", "選択0B"] and d.session.diagnostic_turn == 2
    assert [s["turn"] for s in d.session.state_snapshots] == [1, 2]


def test_rewind_to_turn_one_returns_to_symptom_input(driver):
    d = driver(client=TaskClient({"diagnostic_response": questions(2)}), retriever=FakeRetriever(HITS))
    d.to_symptom()
    d.msg("走行中に異音がする")
    r = d.rewind(1)
    assert r.current_step == "free_text" and d.session.symptom_text == "" and d.session.state_snapshots == []
    assert "症状" in r.prompt.message


def test_rewind_from_reservation_after_critical(driver):
    d = driver(client=TaskClient({"diagnostic_response": questions(2)}), retriever=FakeRetriever(HITS))
    d.to_symptom()
    d.msg("走行中に異音がする")
    r = d.msg("ブレーキがきかない")  # turn 2: critical keyword
    assert r.current_step == "reservation"
    r = d.rewind(2)
    assert r.current_step == "diagnosing" and d.session.urgency_level is None and d.session.can_drive is None


def test_rewind_to_unknown_turn_keeps_state(driver):
    d = driver(client=TaskClient({"diagnostic_response": questions(2)}), retriever=FakeRetriever(HITS))
    d.to_symptom()
    d.msg("走行中に異音がする")
    before = d.session.model_dump(exclude={"updated_at"})
    r = d.rewind(5)
    assert r.rewound_to_turn is None and "ターン 5 には戻れません" in r.notice
    assert d.session.model_dump(exclude={"updated_at"}) == before


# --- spec check phase 2 -------------------------------------------------------------------------------

def spec_session(session_at):
    return session_at(ChatStep.SPEC_CHECK, symptom="セレクトレバーがPから動かない", spec_check_shown=True,
                      collected_symptoms=["セレクトレバーがPから動かない"])


def test_spec_phase2_resolved_done(make_ctx, session_at):
    r = handle_spec_check(spec_session(session_at), ChatRequest(action="spec_feedback", action_value="resolved"),
                          make_ctx(client=TaskClient()))
    assert r.current_step == "done"


@pytest.mark.parametrize("value,text", [("not_resolved", "仕様の説明を確認しましたが"), ("already_tried", "すでに試しました")])
def test_spec_phase2_not_resolved_goes_to_diagnosing(make_ctx, session_at, value, text):
    client = TaskClient({"diagnostic_response": [diag()]})
    session = spec_session(session_at)
    r = handle_spec_check(session, ChatRequest(action="spec_feedback", action_value=value), make_ctx(client=client))
    assert r.current_step == "diagnosing" and session.spec_rejected
    assert text in session.collected_symptoms[-1] and session.collected_symptoms[0] == "セレクトレバーがPから動かない"
    assert "spec_rejected" in client.requests[0].context["flags"]


def test_spec_phase2_typed_text(make_ctx, session_at):
    session = spec_session(session_at)
    r = handle_spec_check(session, ChatRequest(message="もう試しました"), make_ctx(client=TaskClient({"diagnostic_response": [diag()]})))
    assert r.judgment.value == "already_tried" and r.current_step == "diagnosing"


def test_spec_phase2_without_input_reshows(make_ctx, session_at):
    session = spec_session(session_at)
    r = handle_spec_check(session, ChatRequest(), make_ctx(client=TaskClient()))
    assert r.current_step == "spec_check" and [c.value for c in r.prompt.choices] == ["resolved", "not_resolved", "already_tried"]


# --- urgency assessor ---------------------------------------------------------------------------------

def kw(level, reasons=(), visit=None, drive=None):
    return KeywordUrgency(level=level, reasons=list(reasons), rule_ids=["r"] * len(reasons), visit_urgency=visit, can_drive=drive)


def model(level, drive, visit, reasons, rec="推奨"):
    return {"level": level, "can_drive": drive, "visit_urgency": visit, "reasons": reasons, "recommendation": rec}


def test_merge_model_higher_wins_and_reasons_merge():
    result = merge(kw("medium", ["燃費の悪化"], "this_week", True), model("high", True, "today", ["警告灯", "燃費の悪化"], "本日中に"))
    assert (result.level, result.can_drive, result.visit_urgency) == ("high", True, "today")
    assert result.reasons == ["燃費の悪化", "警告灯"] and result.recommendation == "本日中に"
    assert result.keyword_level == "medium" and result.model_level == "high" and result.model_ok


def test_merge_keyword_higher_wins():
    result = merge(kw("critical", ["ブレーキ"], "immediate", False), model("low", True, "when_convenient", ["軽微"]))
    assert (result.level, result.can_drive, result.visit_urgency) == ("critical", False, "immediate")
    assert result.reasons == ["ブレーキ", "軽微"]


def test_merge_tie_keeps_the_stricter_values():
    result = merge(kw("high", ["異音"], "today", True), model("high", False, "immediate", ["危険"]))
    assert (result.level, result.can_drive, result.visit_urgency) == ("high", False, "immediate")


def test_merge_keyword_none_counts_as_low_and_model_missing():
    result = merge(kw("none"), None)
    assert (result.level, result.can_drive, result.visit_urgency) == ("low", True, "when_convenient")
    assert not result.model_ok


def test_assessor_uses_keywords_over_all_inputs_and_the_model(make_ctx, session_at):
    client = TaskClient({"urgency_assessment": [model("medium", True, "this_week", ["モデル判断"])]})
    ctx = make_ctx(client=client)
    session = session_at(collected_symptoms=["走行中にガラガラと音がする", "低速のとき"])
    rag = [RagHit(section_id="v:s1", section="警告の節", chapter="c", page=3, content_type="warning", has_warning=True,
                  text="危険な記載", score=0.7)]
    result = UrgencyAssessor(ctx).assess(session, rag)
    assert result.level == "high" and result.reasons == ["異音が発生している", "モデル判断"]
    prompt = client.requests[0].messages[-1]["content"]
    assert "警告の節" in prompt and "低速のとき" in prompt
    assert client.requests[0].response_format["json_schema"]["name"] == "urgency_assessment"


def test_assessor_model_failure_keeps_keyword_result(make_ctx, session_at):
    client = TaskClient({"urgency_assessment": [ProviderError("server_error", "x")] * 3})
    session = session_at(collected_symptoms=["最近燃費が悪くなった"])
    result = UrgencyAssessor(make_ctx(client=client)).assess(session)
    assert result.level == "medium" and not result.model_ok and result.visit_urgency == "this_week"


# --- URGENCY_CHECK step -------------------------------------------------------------------------------

def test_urgency_check_high_goes_to_reservation(make_ctx, session_at):
    client = TaskClient({"urgency_assessment": [model("high", True, "today", ["異音が続く"])]})
    session = session_at(ChatStep.URGENCY_CHECK, collected_symptoms=["音がする"])
    r = handle_urgency_check(session, ChatRequest(), make_ctx(client=client))
    assert r.current_step == "reservation" and r.urgency.level == "high" and "⚠️ 本日中の来場をおすすめします" in r.prompt.message
    assert "異音が続く" in r.prompt.message


def test_urgency_check_low_gives_advice_and_done(make_ctx, session_at, monkeypatch):
    monkeypatch.setenv("KAIWA_URGENCY_SEMANTIC", "off")  # the step's branching alone (「ドアの音」 votes medium)
    client = TaskClient({"urgency_assessment": [model("low", True, "when_convenient", ["軽微"], "様子を見てください")]})
    session = session_at(ChatStep.URGENCY_CHECK, symptom="ドアの音", collected_symptoms=["ドアの音"])
    r = handle_urgency_check(session, ChatRequest(), make_ctx(client=client))
    assert r.current_step == "done" and "様子を見てください" in r.prompt.message and r.urgency.level == "low"


def test_urgency_check_replaces_running_level(make_ctx, session_at):
    client = TaskClient({"urgency_assessment": [model("medium", True, "this_week", ["中"])]})
    session = session_at(ChatStep.URGENCY_CHECK, symptom="x", collected_symptoms=["x"], urgency_level="high", can_drive=True)
    r = handle_urgency_check(session, ChatRequest(), make_ctx(client=client))
    assert r.current_step == "done" and session.urgency_level == "medium" and session.visit_urgency == "this_week"


def test_offline_urgency_policy_raises_for_danger_sections(make_ctx, session_at):
    session = session_at(collected_symptoms=["メーターのランプが気になる"])
    danger = RagHit(section_id="v:s41", section="油圧警告灯", chapter="c", page=415, content_type="danger", has_warning=True,
                    text="危険", score=0.8)
    result = UrgencyAssessor(make_ctx()).assess(session, [danger])
    assert result.level == "high" and result.can_drive is False and result.model_ok
    assert any("油圧警告灯" in r for r in result.reasons)
