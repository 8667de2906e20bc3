"""Guards that hold whatever the model says (issue #26), each with a scripted model that fails that way:
the model's urgency checked against the manual (capped without evidence from the conversation, the reason
in the debug log; the rules floor still makes an emergency critical), the customer's words handed back as
the message, and a figure no retrieved section states."""
from __future__ import annotations

from diagnosis_fakes import FakeRetriever, Hit, TaskClient, answer, diag

from core.diagnosis.rag import RagHit
from core.diagnosis.steps.common import FAILURE_MESSAGE
from core.diagnosis.urgency_cap import cap_model_urgency, evidence
from core.diagnosis.urgency_rules import KeywordUrgency

RED_LIGHT = "赤信号で止まったらハイブリッドのエンジンが勝手に再始動した"
ROAD_SERVICE = answer(action="escalate", urgency_flag="critical", can_drive=False, visit_urgency="immediate",
                      message="エンジンの異常の可能性があります。直ちに停車し、ロードサービスを手配してください。")


def guards(log, task="diagnostic_response"):
    return [g for r in log if r.get("task") == task for g in r.get("guards", [])]


def test_a_model_rating_the_manuals_normal_behaviour_critical_is_capped(driver, real_retriever):
    log = []
    d = driver(client=TaskClient({"diagnostic_response": [ROAD_SERVICE]}), retriever=real_retriever, log=log)
    d.to_symptom()
    r = d.msg(RED_LIGHT)
    assert r.urgency is None and r.current_step != "reservation"  # no road service for the manual's normal case
    assert "ロードサービス" not in r.prompt.message and "故障ではありません" in r.prompt.message  # the offline words
    found = guards(log)
    assert found and found[0]["guard"] == "urgency_cap" and found[0]["model_level"] == "critical"
    assert found[0]["capped_to"] == "none" and "正常な動作" in found[0]["reason"]
    assert found[0]["action"] == "capped_offline_message"


def test_the_rules_floor_still_makes_an_emergency_critical_whatever_the_model_says(driver):
    calm = answer(urgency_flag="none", can_drive=True, visit_urgency=None, message="様子を見てください。")
    client = TaskClient({"diagnostic_response": [calm] * 3})
    d = driver(client=client)
    d.to_symptom()
    r = d.msg("ブレーキペダルが床まで沈む")
    assert r.urgency.level == "critical" and r.urgency.can_drive is False and r.current_step == "reservation"


def test_a_model_urgency_with_no_risk_seen_is_capped_unless_the_customer_said_a_danger_word(driver):
    log = []
    high = answer(urgency_flag="high", can_drive=False, visit_urgency="today", message="念のため早めに点検を受けてください。")
    d = driver(client=TaskClient({"diagnostic_response": [high]}), log=log)
    d.to_symptom()
    r = d.msg("給油口の開け方がわからない")  # rules and the learned layer: no risk
    assert r.urgency.level == "low" and r.current_step != "reservation" and r.urgency.can_drive is not False
    assert guards(log)[0]["capped_to"] == "low" and guards(log)[0]["action"] == "capped"
    assert "キーワード規則と学習層" in guards(log)[0]["reason"]


def test_evidence_from_the_conversation_keeps_the_models_level():
    none = KeywordUrgency(level="none")
    data = answer(urgency_flag="high")
    assert evidence(none, ["給油口から焦げ臭いにおいがする"]) is not None
    kept, finding = cap_model_urgency(data, none, [], ["給油口のあたりから焦げ臭いにおいがする"])
    assert finding is None and kept["urgency_flag"] == "high"
    capped, finding = cap_model_urgency(data, none, [], ["給油口の開け方がわからない"])
    assert finding.code == "urgency_cap" and capped["urgency_flag"] == "low" and capped["visit_urgency"] == "when_convenient"


def test_the_cap_never_lowers_below_the_rules_and_leaves_risky_turns_alone():
    medium = KeywordUrgency(level="medium", rule_level="medium")
    data = answer(urgency_flag="high")
    assert cap_model_urgency(data, medium, [], ["異音がする"]) == (data, None)  # a risk is seen: not this guard's call
    normal_top = RagHit("s1", "停車中にエンジンが自動でかかる", "c", 1, "general", False,
                        "充電のための自動始動で、故障ではありません。", 0.9)
    low = KeywordUrgency(level="low", rule_level="low")
    capped, finding = cap_model_urgency(answer(urgency_flag="critical", action="escalate"), low, [normal_top], ["x"])
    assert capped["urgency_flag"] == "low" and capped["action"] == "provide_answer" and finding.detail["capped_to"] == "low"


def test_the_customers_words_handed_back_are_regenerated_then_replaced_by_the_offline_answer(driver):
    log = []
    said = "ワイパーが動かない"
    echo = diag(message="ワイパーが動かない。", question_topic="ワイパー")
    client = TaskClient({"diagnostic_response": [echo, echo]})
    d = driver(client=client, log=log)
    d.to_symptom()
    r = d.msg(said)
    assert r.prompt.message.strip("。") != said and not r.fallback
    assert [g["action"] for g in guards(log)] == ["offline"] and guards(log)[0]["guard"] == "echo_user"
    second = [q for q in client.requests if q.task == "diagnostic_response"][1]
    assert "繰り返している" in second.messages[0]["content"] + second.messages[-1]["content"]


def test_an_invented_figure_is_asked_for_once_more(driver):
    log = []
    hits = [Hit("s1", "メーカー保証", content_type="warning", text="特別保証は新車登録から5年または10万kmです。")]
    invented = answer(message="保証は5年6万kmまでです。（取扱説明書「メーカー保証」）")
    stated = answer(message="特別保証は5年または10万kmです。（取扱説明書「メーカー保証」）")
    d = driver(client=TaskClient({"diagnostic_response": [invented, stated]}), retriever=FakeRetriever(hits), log=log)
    d.to_symptom()
    r = d.msg("ブレーキを踏むとキーキー音がします")  # a symptom: the diagnostic answer (a question about the warranty alone is an information answer)
    assert "6万km" not in r.prompt.message and "10万km" in r.prompt.message
    assert guards(log)[0]["guard"] == "unsupported_figure" and guards(log)[0]["figures"] == ["6万km"]


def test_when_nothing_passes_the_turn_fails_honestly(driver, monkeypatch):
    echo = diag(message="ワイパーが動かない", question_topic="ワイパー")
    monkeypatch.setattr("core.diagnosis.steps.diagnosing.offline_client",
                        lambda: TaskClient({"diagnostic_response": [echo]}))
    d = driver(client=TaskClient({"diagnostic_response": [echo, echo]}))
    d.to_symptom()
    r = d.msg("ワイパーが動かない")
    assert r.fallback and r.prompt.message == FAILURE_MESSAGE
