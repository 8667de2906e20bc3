"""The offline diagnosis policies: decisions from the context facts, schema-valid output."""
from __future__ import annotations

import pytest

from core.diagnosis.offline_policy import assess_urgency, best_hit, classify_spec, diagnose, manual_digest, summarize
from core.llm.base import LLMRequest
from core.schemas import load_schema, schema_errors


def hit(section_id, section, content_type="general", has_warning=False, score=0.6, page=10, text="本文です。"):
    return {"section_id": section_id, "section": section, "chapter": "c", "page": page, "content_type": content_type,
            "has_warning": has_warning, "text": text, "score": score}


def ctx(symptom, hits=(), collected=None, level="none", asked=(), flags=(), powertrain="hybrid", reasons=()):
    return {"vehicle": {"powertrain": powertrain}, "symptom": symptom, "collected": collected or [symptom],
            "latest_input": (collected or [symptom])[-1], "history": [], "asked_topics": list(asked), "hits": list(hits),
            "keyword": {"level": level, "reasons": list(reasons), "rule_ids": []}, "turn": len(collected or [1]),
            "max_turns": 8, "candidates_shown": False, "solutions_tried": 0, "flags": list(flags)}


def run(context):
    out = diagnose(LLMRequest(messages=[], task="diagnostic_response", context=context))
    assert schema_errors(load_schema("diagnostic_response"), out) == []
    return out


SHIFT_SPEC = hit("m:s13", "シフトレバーがPから動かない（シフトロック機構）", "specification", False, 0.87, 180,
                 "本車にはシフトロック機構が装備されています。これは安全のための仕様であり、故障ではありません。\n1. ブレーキを踏む")


def test_spec_section_gives_spec_answer_with_citation():
    out = run(ctx("セレクトレバーがPから動かない", [SHIFT_SPEC, hit("m:s12", "シフトレバーの操作", "procedure", True, 0.8)]))
    assert out["action"] == "spec_answer" and "（取扱説明書「シフトレバーがPから動かない（シフトロック機構）」p.180）" in out["message"]
    assert out["manual_coverage"] == "covered" and out["choices"] is None


def test_no_spec_answer_when_rejected_urgent_or_warning_section():
    assert run(ctx("セレクトレバーがPから動かない", [SHIFT_SPEC], flags=["spec_rejected"]))["action"] != "spec_answer"
    assert run(ctx("セレクトレバーが固くて異音", [SHIFT_SPEC], level="high"))["action"] != "spec_answer"
    warned = dict(SHIFT_SPEC, has_warning=True)
    assert run(ctx("セレクトレバーがPから動かない", [warned]))["action"] != "spec_answer"


def test_critical_keyword_escalates():
    out = run(ctx("ブレーキがきかない", level="critical", reasons=["ブレーキの効きに異常がある可能性"]))
    assert out["action"] == "escalate" and out["urgency_flag"] == "critical" and out["can_drive"] is False


LAMP_HITS = [hit("m:s39", "ABS警告灯", "warning", True, 0.8), hit("m:s41", "油圧警告灯", "danger", True, 0.7),
             hit("m:s40", "エンジン警告灯（チェックエンジン）", "warning", True, 0.6, 414, "エンジン警告灯は異常があると点灯します。")]


def test_warning_light_asks_which_lamp_with_icon_able_choices():
    out = run(ctx("メーターに黄色いランプが点灯している", LAMP_HITS, level="high"))
    assert out["action"] == "ask_question" and "警告灯" in out["question_topic"]
    assert 3 <= len(out["choices"]) <= 4 and out["choices"][0].startswith("ABS警告灯")
    assert not any("油圧" in c for c in out["choices"])  # red lamps dropped for a yellow lamp
    assert all("（" in c for c in out["choices"])  # lay explanations in parentheses


def test_named_lamp_skips_to_state_question_then_answers_from_that_lamp():
    first = run(ctx("エンジン警告灯がついた", LAMP_HITS, level="high"))
    assert first["question_topic"] == "警告灯の点灯状態"
    done = run(ctx("エンジン警告灯がついた", LAMP_HITS, collected=["エンジン警告灯がついた", "点滅している"], level="high",
                   asked=["警告灯の点灯状態"]))
    assert done["action"] == "provide_answer" and "p.414" in done["message"] and done["urgency_flag"] == "high"


def test_noise_asks_when_then_answers():
    hits = [hit("m:s55", "異音・振動がするとき", "general", False, 0.6, 464)]
    q = run(ctx("変な音がする", hits, level="high"))
    assert q["question_topic"] == "異音が出るタイミング" and "ブレーキを踏んだとき" in q["choices"]
    q2 = run(ctx("変な音がする", hits, collected=["変な音がする", "ブレーキを踏んだとき"], asked=["異音が出るタイミング"], level="high"))
    assert q2["question_topic"] == "異音の種類"
    a = run(ctx("変な音がする", hits, collected=["変な音がする", "ブレーキを踏んだとき", "キーキー・キーッ（高い金属音）"],
                asked=["異音が出るタイミング", "異音の種類"], level="high"))
    assert a["action"] == "provide_answer" and "（取扱説明書「異音・振動がするとき」p.464）" in a["message"]


def test_force_answer_flag_and_danger_section():
    danger = hit("m:s42", "充電警告灯", "danger", True, 0.7, 416)
    out = run(ctx("バッテリーのマークがついた", [danger], flags=["force_answer"]))
    assert out["action"] == "provide_answer" and out["urgency_flag"] == "high" and out["can_drive"] is False


def test_no_hits_answers_not_covered():
    out = run(ctx("カーナビの地図を更新したい", []))
    assert out["action"] == "provide_answer" and out["manual_coverage"] == "not_covered"


def test_howto_question_answers_directly():
    out = run(ctx("スマートキーの電池交換の方法を教えて", [hit("m:s7", "スマートキーの電池交換", "procedure", True, 0.72, 66)]))
    assert out["action"] == "provide_answer" and "p.66" in out["message"]


def test_best_hit_prefers_named_section():
    hits = [hit("a", "油圧警告灯", score=0.97), hit("b", "エンジン警告灯（チェックエンジン）", score=0.8)]
    assert best_hit(hits, "エンジン警告灯がついた", "warning_light")["section_id"] == "b"
    assert best_hit([], "x", "general") is None


def test_manual_digest_keeps_opening_and_steps_and_drops_dangling_headings():
    text = "一文目です。二文目です。三文目です。\n1. 手順A\n2. 手順B\n⚠注意\n" + "長い注意書き" * 100
    digest = manual_digest(text, limit=60)
    assert digest.splitlines() == ["一文目です。二文目です。", "1. 手順A", "2. 手順B"]


def test_manual_digest_adds_the_normal_behaviour_sentence_when_asked():
    from core.diagnosis.offline_policy import NORMAL_RE

    text = "一文目。二文目。三文目で、故障ではありません。四文目。"
    assert manual_digest(text) == "一文目。二文目。"
    assert manual_digest(text, must=NORMAL_RE) == "一文目。二文目。三文目で、故障ではありません。"


@pytest.mark.parametrize("hits,level,expected", [
    ([SHIFT_SPEC], "none", (True, "high")),
    ([dict(SHIFT_SPEC, score=0.45)], "none", (True, "medium")),
    ([hit("x", "ABS警告灯", "warning", True, 0.9)], "none", (False, "low")),
    ([SHIFT_SPEC], "high", (False, "low")),
])
def test_classify_spec(hits, level, expected):
    out = classify_spec(LLMRequest(messages=[], task="spec_classification",
                                   context={"symptom": "x", "hits": hits, "keyword": {"level": level}}))
    assert schema_errors(load_schema("spec_classification"), out) == []
    assert (out["is_spec"], out["confidence"]) == expected


def test_assess_urgency_schema_valid():
    out = assess_urgency(LLMRequest(messages=[], task="urgency_assessment",
                                    context={"keyword": {"level": "medium", "reasons": ["燃費の悪化"]}, "hits": []}))
    assert schema_errors(load_schema("urgency_assessment"), out) == []
    assert (out["level"], out["visit_urgency"], out["reasons"]) == ("medium", "this_week", ["燃費の悪化"])


def test_summarize_is_extractive():
    text = summarize(LLMRequest(messages=[], task="diagnosis_summary", context={
        "symptom": "音がする", "collected": ["音がする", "ブレーキを踏んだとき（低速）"],
        "history": [{"role": "assistant", "content": "どんな音ですか？詳しく"}]}))
    assert text == "主訴: 音がする。これまでの回答: ブレーキを踏んだとき。直近の案内: どんな音ですか？"


def test_a_symptoms_category_and_normal_form_are_worked_out_once_per_text():
    """Issue #25: the offline model asks for the symptom's category and each section's normal form several
    times a turn; each text is worked out once (bounded memo) and gives what working it out gives. A text
    over the memo's bound is worked out every time. Counted."""
    from core.diagnosis import offline_policy, urgency_rules

    offline_policy._category.memo.cache_clear()
    urgency_rules.normal_form.memo.cache_clear()
    text = "まふらーから ゆげが でる。警告灯は点いていない"
    first = offline_policy._category(text)
    assert offline_policy._category(text) == first == offline_policy._category.__wrapped__(text)
    memo = offline_policy._category.memo.cache_info()
    assert memo.misses == 1 and memo.hits == 1
    form = urgency_rules.normal_form(text)
    assert urgency_rules.normal_form(text) == form == urgency_rules.normal_form.__wrapped__(text)
    assert urgency_rules.normal_form.memo.cache_info().hits >= 1
    long_text = "ブレーキが効かない。" * 300
    before = offline_policy._category.memo.cache_info()
    assert offline_policy._category(long_text) == offline_policy._category.__wrapped__(long_text)
    assert urgency_rules.normal_form(long_text) == urgency_rules.normal_form.__wrapped__(long_text)
    assert offline_policy._category.memo.cache_info() == before
