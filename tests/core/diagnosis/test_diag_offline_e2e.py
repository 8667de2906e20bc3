"""End-to-end sessions with the offline provider: over a deterministic keyword retriever, over the
real manual retriever, and through the scenario-runner adapter."""
from __future__ import annotations

import pytest
from diagnosis_fakes import MIRAI, TREK

from core.diagnosis.scenario import run_scenario
from core.llm.offline import OfflineClient
from core.text.pii import find_pii

PHONE = "090-1234-5678"


def test_full_offline_session_vehicle_to_done_with_booking(driver, keyword_retriever):
    log: list = []
    d = driver(client=OfflineClient(), retriever=keyword_retriever, log=log)
    steps = [d.last.current_step, d.act("select_vehicle", MIRAI).current_step, d.act("confirm_photo", "yes").current_step]
    r = d.msg("メーターに黄色いランプが点灯している")
    steps.append(r.current_step)
    assert r.prompt.action == "answer" and "警告灯" in r.prompt.message
    lamp = next(c for c in r.prompt.choices if c.label.startswith("ABS"))
    assert lamp.icon == "data/icons/warning-lights/abs.svg"
    r = d.act("answer", lamp.value)
    assert r.current_step == "diagnosing" and "どのように点いて" in r.prompt.message
    r = d.act("answer", "点灯したまま消えない")
    steps.append(r.current_step)
    assert r.current_step == "reservation" and "（取扱説明書「ABS警告灯」p.413）" in r.prompt.message
    assert r.rag_sources[0].section_id == "kaiwa-mirai-hv-2022:s039" and r.urgency.level == "high"
    r = d.act("reserve", "dispatch")
    r = d.act("submit_booking", {"name": "山田 太郎", "phone": PHONE, "address": "テスト市1-2-3"})
    assert r.current_step == "booking_confirm"
    r = d.act("booking", "edit")
    assert {f.name: f.value for f in r.prompt.booking_fields}["phone"] == PHONE
    d.act("submit_booking", {"name": "山田 花子", "phone": PHONE, "address": "テスト市1-2-3"})
    r = d.msg("この内容でお願いします")
    steps.append(r.current_step)
    assert r.current_step == "done" and r.prompt.booking_summary["お名前"] == "山田 花子"
    assert steps == ["vehicle_id", "photo_confirm", "free_text", "diagnosing", "reservation", "done"]
    assert log and not any(find_pii(str(rec)) for rec in log)
    assert {rec["outcome"] for rec in log} == {"ok"}


def test_offline_session_resolved_by_answer(driver, keyword_retriever):
    d = driver(client=OfflineClient(), retriever=keyword_retriever)
    d.to_symptom(TREK)
    r = d.msg("スマートキーの電池交換の方法を教えて")  # an information question → SPEC_CHECK, no urgency (issue #10)
    assert r.current_step == "spec_check" and r.prompt.action == "spec_feedback" and "CR2032" in r.prompt.message
    assert r.urgency is None
    r = d.msg("できました、解決しました")
    assert r.current_step == "done" and r.judgment.method == "structured_output"


def test_offline_not_resolved_four_times_reaches_urgency_check(driver, keyword_retriever):
    d = driver(client=OfflineClient(), retriever=keyword_retriever)
    d.to_symptom()
    d.msg("燃費が悪くなった")  # (a how-to question now goes to SPEC_CHECK, issue #10)
    for _ in range(4):
        r = d.act("resolved", "no")
    assert d.session.solutions_tried == 4 and r.current_step in ("done", "reservation")
    assert "緊急度の評価" in r.prompt.message


# --- the real retriever -----------------------------------------------------------------------------

def test_real_shift_lever_gives_shift_lock_with_citation(driver, real_retriever):
    d = driver(client=OfflineClient(), retriever=real_retriever)
    d.to_symptom(MIRAI)
    r = d.msg("セレクトレバーがPから動かない")
    assert r.current_step == "spec_check" and "シフトロック" in r.prompt.message
    assert "p.180" in r.prompt.message and r.rag_sources[0].section_id == "kaiwa-mirai-hv-2022:s013"
    d2 = driver(client=OfflineClient(), retriever=real_retriever)
    d2.to_symptom(TREK)
    r2 = d2.msg("セレクトレバーがPから動かない")
    assert "シフトロック" in r2.prompt.message and "（取扱説明書「" in r2.prompt.message and r2.rag_sources


def test_real_brake_pedal_sinks_is_critical_without_driving(driver, real_retriever):
    d = driver(client=OfflineClient(), retriever=real_retriever)
    d.to_symptom(MIRAI)
    r = d.msg("ブレーキペダルが床まで沈む")
    assert r.current_step == "reservation" and r.urgency.level == "critical" and r.urgency.can_drive is False
    assert "visit" not in [c.value for c in r.prompt.choices]
    r = d.act("reserve", "visit")
    assert "自走禁止" in r.prompt.message and r.current_step == "reservation"


def test_real_aircon_water_is_a_spec_answer(driver, real_retriever):
    d = driver(client=OfflineClient(), retriever=real_retriever)
    d.to_symptom(MIRAI)
    r = d.msg("エアコンの下から水が垂れる")
    assert r.current_step == "spec_check" and "故障ではありません" in r.prompt.message
    assert r.rag_sources[0].section_id == "kaiwa-mirai-hv-2022:s027" and r.rag_sources[0].page == 314
    assert d.act("spec_feedback", "resolved").current_step == "done"


def test_real_engine_warning_light_answers_from_its_section(driver, real_retriever):
    d = driver(client=OfflineClient(), retriever=real_retriever)
    d.to_symptom(MIRAI)
    r = d.msg("エンジン警告灯がついた")
    r = d.act("answer", r.prompt.choices[0].value)
    assert "（取扱説明書「エンジン警告灯（チェックエンジン）」p.414）" in r.prompt.message
    assert r.rag_sources[0].section_id == "kaiwa-mirai-hv-2022:s040"


# --- scenario adapter -------------------------------------------------------------------------------

def test_run_scenario_plays_turns_and_returns_final_state(keyword_retriever):
    scenario = {"name": "booking", "flow": "diagnosis", "turns": [
        {"message": "ブレーキがきかない"}, {"action": "reserve", "value": "dispatch"},
        {"action": "submit_booking", "value": {"name": "山田", "phone": PHONE, "address": "テスト市1-1"}},
        {"action": "booking", "value": "confirm"}]}
    log: list = []
    out = run_scenario(scenario, OfflineClient(), log, retriever=keyword_retriever)
    assert set(out) == {"step", "urgency", "can_drive", "citations", "message", "outcome", "trace", "transcript"}
    assert (out["step"], out["urgency"], out["can_drive"], out["outcome"], out["trace"]) == ("done", "critical", False, None, [])
    assert out["transcript"][0]["step"] == "vehicle_id" and out["transcript"][1] == {"role": "user", "action": "select_vehicle",
                                                                                      "value": MIRAI}
    assert not find_pii(str(out["transcript"]))  # the phone number is masked in the transcript


def test_run_scenario_default_vehicle_rewind_and_citations(keyword_retriever):
    scenario = {"vehicle": TREK, "turns": [{"message": "エンジン警告灯がついた"}, {"rewind": 1},
                                          {"message": "エアコンの下から水が垂れる"}]}
    out = run_scenario(scenario, OfflineClient(), [], retriever=keyword_retriever)
    assert out["step"] == "spec_check" and out["citations"][0] == "kaiwa-trek-4wd-2020:s025"
    rewind = next(e for e in out["transcript"] if e.get("role") == "assistant" and e["step"] == "free_text" and
                  e is not out["transcript"][2])
    assert rewind["type"] == "text"
    out = run_scenario({"turns": []}, OfflineClient(), [], retriever=keyword_retriever)
    assert out["step"] == "free_text" and out["transcript"][1]["value"] == MIRAI


def test_run_scenario_faults():
    out = run_scenario({"faults": ["model_error"], "turns": [{"message": "ワイパーの動きがおかしい"}]}, OfflineClient(), [],
                       retriever=None)
    assert "回答を作成できませんでした" in out["message"] and "会話に残っています" in out["message"] and out["step"] == "diagnosing"
    out = run_scenario({"faults": ["retriever_error"], "turns": [{"message": "エアコンの風が弱い"}]}, OfflineClient(), [])
    assert out["citations"] == [] and "ディーラーでの点検を推奨" in out["message"]
    with pytest.raises(ValueError):
        run_scenario({"faults": ["nope"], "turns": []}, OfflineClient(), [])


def test_run_scenario_with_the_default_real_retriever(real_retriever):
    out = run_scenario({"turns": [{"message": "エアコンの下から水が垂れる"}]}, OfflineClient(), [])
    assert out["step"] == "spec_check" and out["citations"][0] == "kaiwa-mirai-hv-2022:s027"
