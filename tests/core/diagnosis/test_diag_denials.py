"""Denied symptoms (core.diagnosis.denials): a symptom named only to deny it never raises urgency,
never opens questions about it, and never reaches the question plan — for the offline policy and,
through the question guard, for a real model."""
from __future__ import annotations

import pytest
from diagnosis_fakes import FakeRetriever, TaskClient, answer, diag

from core.diagnosis import ChatRequest, ChatStep
from core.diagnosis.denials import asks_about_denied, denied_kinds, strip_denials
from core.diagnosis.scenario import run_scenario
from core.diagnosis.steps.diagnosing import FALLBACK_MESSAGE, handle_diagnosing
from core.diagnosis.urgency_rules import default_rules, is_how_to
from core.llm.offline import OfflineClient


@pytest.mark.parametrize("text,kept,denied", [
    ("警告灯は点いていないけど、走るとゴトゴト音がする", "走るとゴトゴト音がする", ["警告灯"]),
    ("異音や振動はないけど、燃費が悪くなった", "燃費が悪くなった", ["異音", "振動"]),
    ("オイル漏れはないけど、エンジンオイルの交換時期を知りたい", "エンジンオイルの交換時期を知りたい", ["オイル漏れ"]),
    ("警告灯なし、異音なし。燃費が悪い", "燃費が悪い", ["警告灯", "異音"]),
    ("煙とかは全然出てないです", "", ["煙"]),
    ("けいこくとうは ついてない けど へんな おとがする", "へんな おとがする", ["けいこくとう"]),
    ("警告灯の点灯や異音は特にないとのこと。燃費が悪化", "とのこと。燃費が悪化", ["警告灯", "点灯", "異音"]),
])
def test_denied_spans_are_removed(text, kept, denied):
    result = strip_denials(text)
    assert result.kept == kept
    assert result.denied == denied


@pytest.mark.parametrize("text", [
    "ブレーキが効かない", "エンジンがかからない", "エアコンの冷たい風が出ない", "ヘッドランプが点いていない",
    "READY表示灯が点かない", "焦げ臭いにおいがする", "警告灯が点いていないか心配", "エンジンの音がしない",
])
def test_faults_and_questions_are_not_denials(text):
    assert strip_denials(text).denied == []


@pytest.mark.parametrize("text,level", [
    ("警告灯は点いていないけど、ブレーキペダルが奥まで沈む", "critical"),
    ("異音や振動はないけど、燃費が悪くなった", "medium"),
    ("煙は出ていないが、焦げ臭いにおいはしない。エアコンが効かない", "medium"),
    ("オイル漏れはないけど、エンジンオイルの交換時期を知りたい", "none"),
    ("警告灯は点いていません。", "none"),
])
def test_rules_never_rise_on_a_denied_symptom(text, level):
    assert default_rules().check(text).level == level


def test_a_question_after_denials_is_a_how_to_question():
    assert is_how_to("オイル漏れはないけど、エンジンオイルの交換時期を知りたい")


def test_question_topics_about_denied_symptoms():
    assert denied_kinds(["警告灯", "異音"]) == {"lamp", "noise"}
    assert asks_about_denied("点灯している警告灯の種類", "", ["警告灯"])
    assert asks_about_denied(None, "どんな音ですか？", ["異音"])
    assert not asks_about_denied("異音が出るタイミング", "", ["警告灯"])


@pytest.mark.parametrize("text,asked", [
    ("警告灯は点いていないけど、走るとゴトゴト音がする", "音"),
    ("異音や振動はないけど、ハンドルを切ると重い感じがする", None),
])
def test_offline_policy_never_asks_about_the_denied_symptom(text, asked):
    # the real offline policy on the real manual index
    final = run_scenario({"turns": [{"message": text}]}, OfflineClient(), [])
    message = final["message"]
    assert "警告灯" not in message.split("\n")[-1] and "どのように点いて" not in message
    if asked:
        assert asked in message
    assert final["urgency"] != "critical"


def test_a_model_question_about_a_denied_symptom_is_asked_again_then_replaced(make_ctx, session_at):
    lamp = diag(message="どの警告灯が点いていますか？", question_topic="点灯している警告灯の種類",
                choices=["エンジン警告灯", "ABS警告灯"])
    client = TaskClient({"diagnostic_response": [lamp, lamp]})
    ctx = make_ctx(client=client, retriever=FakeRetriever([]), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="警告灯は点いてないけど、ハンドルがぶれる")
    r = handle_diagnosing(session, ChatRequest(message=session.symptom_text), ctx)
    calls = [c for c in client.requests if c.task == "diagnostic_response"]
    assert len(calls) == 2
    assert "お客様は「警告灯」はないと述べています" in calls[0].messages[-1]["content"]
    assert "否定された症状については質問せず" in calls[1].messages[-1]["content"]
    assert r.prompt.message == FALLBACK_MESSAGE


def test_a_model_question_fixed_on_the_second_call_is_kept(make_ctx, session_at):
    lamp = diag(message="どの警告灯が点いていますか？", question_topic="点灯している警告灯の種類",
                choices=["エンジン警告灯", "ABS警告灯"])
    good = diag(message="ぶれはどんなときに感じますか？", question_topic="振動が出る条件", choices=["高速で", "ブレーキ時"])
    client = TaskClient({"diagnostic_response": [lamp, good, answer()]})
    ctx = make_ctx(client=client, retriever=FakeRetriever([]), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="警告灯は点いてないけど、ハンドルがぶれる")
    r = handle_diagnosing(session, ChatRequest(message=session.symptom_text), ctx)
    assert r.prompt.message == "ぶれはどんなときに感じますか？"
    assert session.urgency_level in (None, "high")
