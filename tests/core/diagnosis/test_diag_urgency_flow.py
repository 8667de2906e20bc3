"""Issue #10 in the flow: the observed urgency / diagnosis misses (tests/scenarios/diagnosis_quality.yaml
played through the real manual index and the offline provider), and the same gates on the model path."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from diagnosis_fakes import FakeRetriever, Hit, TaskClient, answer, diag

from core.diagnosis import ChatRequest, ChatStep
from core.diagnosis.scenario import run_scenario
from core.diagnosis.steps.diagnosing import handle_diagnosing
from core.eval.expectations import check_expectations
from core.llm.offline import OfflineClient

SCENARIOS = yaml.safe_load((Path(__file__).parents[2] / "scenarios" / "diagnosis_quality.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_observed_conversation(scenario, real_retriever):
    log: list = []
    final = run_scenario(scenario, OfflineClient(), log, retriever=real_retriever)
    assert check_expectations(scenario["expect"], final, log) == []


def test_no_visit_offered_for_a_flat_tyre(driver, real_retriever):
    d = driver(client=OfflineClient(), retriever=real_retriever)
    d.to_symptom()
    r = d.msg("高速道路でパンクして車が左に流されます")
    assert r.current_step == "reservation" and r.urgency.can_drive is False
    assert [c.value for c in r.prompt.choices] == ["dispatch", "skip"]


def test_text_without_japanese_is_not_diagnosed(driver, real_retriever):
    d = driver(client=OfflineClient(), retriever=real_retriever)
    d.to_symptom()
    r = d.msg("my car makes a noise")
    assert "記載が見つかりませんでした" not in r.prompt.message
    assert r.urgency is None


# --- the model path: the gates hold whatever the model says -------------------------------------------

SQUEAL = [Hit("v:s18", "ブレーキ鳴き", "general", True, 0.7, page=198, text="ブレーキをかけたときに音がすることがあります。")]


def test_model_spec_answer_for_an_unconfirmed_brake_noise_is_blocked(make_ctx, session_at):
    client = TaskClient({"diagnostic_response": [diag(action="spec_answer", choices=None, message="正常な動作です。")]})
    ctx = make_ctx(client=client, retriever=FakeRetriever(SQUEAL), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="ブレーキを踏むとキーキー音がする")
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むとキーキー音がする"), ctx)
    assert r.current_step != "spec_check" and not session.spec_check_shown
    assert "この内容で解決しましたか？" not in r.prompt.message or r.current_step == "diagnosing"


def test_model_spec_answer_for_a_leak_becomes_the_colour_question(make_ctx, session_at):
    hits = [Hit("v:s27", "車の下から水が垂れる（エアコンの除湿水）", "specification", False, 0.7, page=314,
                text="これは正常な現象で、故障ではありません。")]
    client = TaskClient({"diagnostic_response": [diag(action="spec_answer", choices=None, message="除湿水です。")]})
    ctx = make_ctx(client=client, retriever=FakeRetriever(hits), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="車の下に何か漏れた跡がある")
    r = handle_diagnosing(session, ChatRequest(message="車の下に何か漏れた跡がある"), ctx)
    assert r.current_step == "diagnosing" and "垂れている液体は、どんな色やにおいですか？" in r.prompt.message
    assert [c.label for c in r.prompt.choices][:3] == ["透明で無臭（水のよう）", "ピンクや緑色で甘いにおい（冷却水の可能性）",
                                                       "茶色や黒っぽく油っぽい（エンジンオイルの可能性）"]


def test_model_saying_drivable_for_a_puncture_is_overruled(make_ctx, session_at):
    client = TaskClient({"diagnostic_response": [answer(urgency_flag="high", can_drive=True, visit_urgency="today")]})
    ctx = make_ctx(client=client, retriever=FakeRetriever([Hit("v:s58", "パンクしたとき", "procedure", True, 0.7)]), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="高速でタイヤがパンクした")
    r = handle_diagnosing(session, ChatRequest(message="高速でタイヤがパンクした"), ctx)
    assert r.current_step == "reservation" and session.can_drive is False
    assert "visit" not in [c.value for c in r.prompt.choices]


@pytest.mark.parametrize("first", ["ask_question", "clarify_term", "spec_answer", "provide_answer"])
def test_coverage_raise_applies_to_every_action(make_ctx, session_at, monkeypatch, first):
    """Seed 000 §4 D12: not_covered with urgency none/low → medium, whatever the action."""
    monkeypatch.setenv("KAIWA_URGENCY_SEMANTIC", "off")
    turn = diag(action=first, manual_coverage="not_covered", urgency_flag="low")
    if first in ("ask_question", "clarify_term"):
        turn["choices"] = ["閉めるとき", "開けるとき"]
    client = TaskClient({"diagnostic_response": [turn]})
    ctx = make_ctx(client=client, retriever=FakeRetriever([]), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="ドアの音")
    handle_diagnosing(session, ChatRequest(message="ドアの音"), ctx)
    assert session.urgency_level == "medium"


def test_coverage_raise_leaves_covered_questions_alone(make_ctx, session_at, monkeypatch):
    monkeypatch.setenv("KAIWA_URGENCY_SEMANTIC", "off")
    client = TaskClient({"diagnostic_response": [diag(manual_coverage="covered", urgency_flag="none")]})
    ctx = make_ctx(client=client, retriever=FakeRetriever([]), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="ドアの音")
    handle_diagnosing(session, ChatRequest(message="ドアの音"), ctx)
    assert session.urgency_level is None
