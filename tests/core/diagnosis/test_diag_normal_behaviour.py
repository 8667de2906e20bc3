"""Behaviour the manual calls normal is explained as normal from the manual's own section, with no
urgency (issue #16: a hybrid restarting itself at a red light got 緊急度 高 while quoting
「故障ではありません」). Real manual index, offline provider; and the same guard on a model's answer."""
from __future__ import annotations

import re

import pytest
from diagnosis_fakes import TaskClient, answer

from core.diagnosis.scenario import run_scenario
from core.diagnosis.steps.diagnosing import NOT_NORMAL_NOTE
from core.llm.offline import OfflineClient

TREK = "kaiwa-trek-4wd-2020"
NORMAL = re.compile(r"故障ではありません|正常な(現象|動作|作動|制御)|異常ではありません|正常です|正常な音")

CASES = [  # vehicle, text, the manual section that explains it, a sentence of it the answer must quote
    (None, "赤信号で止まったらハイブリッドのエンジンが勝手に再始動した", "停車中にエンジンが自動でかかる", "故障ではありません"),
    (None, "停車中にエンジンが急にブルンとかかった。故障ですか？", "停車中にエンジンが自動でかかる", "故障ではありません"),
    (None, "信号で止まるとエンジンが切れて、ブレーキ離すとまたかかる", "停車中にエンジンが自動でかかる", "故障ではありません"),
    (TREK, "信号待ちでエンジンが止まるんだけど壊れた？", "アイドリングストップ機能（信号待ちでエンジンが止まる）", "信号待ち"),
    (None, "エアコンを使ったあと車の下から水がポタポタ垂れてる", "車の下から水が垂れる（エアコンの除湿水）", "故障ではありません"),
    (TREK, "寒い朝、マフラーから白い湯気が出る", "車の下から水が垂れる（エアコンの除湿水）",
     "寒い朝にマフラーから白い湯気が出るのも同じ理由によるものです。"),
    (TREK, "ふゆのあさ まふらーから しろい ゆげが でる", "車の下から水が垂れる（エアコンの除湿水）", "白い湯気"),
]


def play(vehicle, *turns):
    scenario = {"turns": [t if isinstance(t, dict) else {"message": t} for t in turns]}
    if vehicle:
        scenario["vehicle"] = vehicle
    return run_scenario(scenario, OfflineClient(), [])


@pytest.mark.parametrize("vehicle,text,section,quote", CASES, ids=[c[1] for c in CASES])
def test_normal_behaviour_is_explained_from_its_section_without_urgency(vehicle, text, section, quote, real_retriever):
    final = play(vehicle, text)
    assert final["step"] == "spec_check" and final["urgency"] is None
    assert f"取扱説明書「{section}」" in final["message"] and quote in final["message"]
    assert final["transcript"][-1]["citations"][0].endswith(final["citations"][0])
    sections = [e for e in final["transcript"] if e["role"] == "assistant"]
    assert all(e["urgency"] is None for e in sections)


@pytest.mark.parametrize("text", ["EVモードで走ると音がしない", "ハイブリッドで走ってるとき、エンジンの音がしなくなる"])
def test_ev_mode_silence_is_explained_and_asked_about_without_urgency(text, real_retriever):
    final = play(None, text)
    assert final["urgency"] is None and "EV走行" in final["message"] and "故障ではありません" in final["message"]
    final = play(None, text, {"action": "answer", "value": "READYは点いたままで、ふつうに加速できる"})
    assert final["step"] == "spec_check" and final["urgency"] is None


def test_every_turn_quoting_a_normal_statement_carries_no_urgency(real_retriever):
    for vehicle, text, _, _ in CASES:
        for entry in play(vehicle, text)["transcript"]:
            if entry["role"] == "assistant" and NORMAL.search(entry["message"]) and "条件に当てはまらない" not in entry["message"]:
                assert entry["urgency"] is None, (text, entry["message"][:80])


def test_abnormal_conditions_still_get_their_urgency(real_retriever):
    final = play(None, "停車中に音がする", {"action": "answer", "value": "キーキー・キーッ（高い金属音）"})
    assert final["urgency"] == "high" and "当てはまらない" in final["message"]


def test_a_model_answer_quoting_not_a_fault_with_urgency_becomes_the_spec_answer(driver, real_retriever):
    quoting = answer(urgency_flag="high", message="取扱説明書「停車中にエンジンが自動でかかる」によると、これは正常な作動で、故障ではありません。")
    d = driver(client=TaskClient({"diagnostic_response": [quoting], "spec_classification": [
        {"is_spec": False, "confidence": "low", "explanation": "-", "matched_section": None, "matched_section_id": None,
         "page": None}]}), retriever=real_retriever)
    d.to_symptom()
    r = d.msg("赤信号で止まったらハイブリッドのエンジンが勝手に再始動した")
    assert r.current_step == "spec_check" and r.urgency is None
    assert "故障ではありません" in r.prompt.message and NOT_NORMAL_NOTE not in r.prompt.message


def test_a_model_answer_quoting_not_a_fault_for_a_real_symptom_says_why_it_does_not_apply(driver, real_retriever):
    quoting = answer(urgency_flag="high", message="ブレーキ鳴きは故障ではありませんが、点検をおすすめします。")
    d = driver(client=TaskClient({"diagnostic_response": [quoting]}), retriever=real_retriever)
    d.to_symptom()
    r = d.msg("ブレーキを踏むたびにガリガリと金属音がする")
    assert r.urgency.level in ("high", "critical") and NOT_NORMAL_NOTE in r.prompt.message
