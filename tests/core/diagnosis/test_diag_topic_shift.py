"""A new symptom or topic mid-conversation is recognised and re-routed (core.diagnosis.steps.topic_shift),
never swallowed as an answer, a skip or a 「ボタンから選ぶか」 — real manual index, offline provider."""
from __future__ import annotations

import pytest

from core.diagnosis.models import Choice, PromptInfo, SessionState
from core.diagnosis.steps.topic_shift import is_new_topic

TREK = "kaiwa-trek-4wd-2020"


def session_with(symptom: str, pending: str, choices: list[str]) -> SessionState:
    s = SessionState(session_id="t", symptom_text=symptom, pending_kind=pending)
    s.last_prompt = PromptInfo(type="single_choice", message="?", choices=[Choice(value=c, label=c) for c in choices])
    return s


LAMP = session_with("エンジン警告灯がついた", "question", ["点灯したまま消えない", "点滅している", "わからない"])
NOISE = session_with("走るとゴトゴト音がする", "question", ["ブレーキを踏んだとき", "加速するとき", "わからない"])


@pytest.mark.parametrize("session,text", [
    (LAMP, "それとは別に、エアコンが全然冷えないんだけど"),
    (LAMP, "あとタイヤの空気圧の警告灯もついてる"),
    (LAMP, "話は変わるけど、給油口の開け方を教えて"),
    (LAMP, "エアコンも効かないです"),
    (LAMP, "走るとガタガタ変な音もするんです"),
    (NOISE, "ついでに聞きたいんですが、オイル交換の時期はいつですか"),
])
def test_new_matters_are_recognised(session, text):
    assert is_new_topic(session, text)


@pytest.mark.parametrize("session,text", [
    (LAMP, "点灯したまま消えない"), (LAMP, "点滅してます"), (LAMP, "わからない"), (LAMP, "はい"),
    (NOISE, "ブレーキを踏んだとき"), (NOISE, "40キロくらいで走っているときです"), (NOISE, "段差を越えるとゴトゴトいう"),
])
def test_answers_are_answers(session, text):
    assert not is_new_topic(session, text)


@pytest.fixture
def real(driver, real_retriever):
    def build():
        return driver(retriever=real_retriever)
    return build


def test_a_new_symptom_during_a_question_starts_a_new_thread(real):
    d = real()
    d.to_symptom()
    d.msg("エンジン警告灯がついた")
    assert d.session.pending_kind == "question" and d.session.urgency_level == "high"
    r = d.msg("それとは別に、エアコンが全然冷えないんだけど")
    assert "新しいご相談として確認します" in r.prompt.message and "エンジン警告灯がついた" in r.prompt.message
    assert d.session.symptom_text == "それとは別に、エアコンが全然冷えないんだけど"
    assert "エアコン" in r.rag_sources[0].section
    assert d.session.urgency_level == "high"  # what the lamp reached is kept
    assert "先のご相談: エンジン警告灯がついた" in d.session.conversation_summary


def test_a_question_after_an_answer_is_answered_not_the_old_symptom(real):
    d = real()
    d.to_symptom(TREK)
    d.msg("ブレーキを踏むとキーキー鳴る")
    d.act("answer", "天気に関係なく毎回鳴り、だんだん大きくなってきた")
    r = d.msg("話は変わるけど、給油口の開け方を教えて")
    assert r.current_step == "spec_check" and r.rag_sources[0].section == "給油口の開け方"


def test_a_new_symptom_at_the_reservation_is_not_a_button_miss(real):
    d = real()
    d.to_symptom()
    d.msg("エンジン警告灯がついた")
    r = d.msg("点滅している")
    assert r.current_step == "reservation"
    r = d.msg("あと、エアコンから変なにおいがするんですけど")
    assert "ボタンから選ぶか" not in r.prompt.message and "新しいご相談として確認します" in r.prompt.message
    assert r.current_step != "reservation" or "エアコン" in r.prompt.message


def test_the_booking_form_is_not_interrupted_by_another_matter(real):
    d = real()
    d.to_symptom()
    d.msg("エンジン警告灯がついた")
    d.msg("点滅している")
    d.act("reserve", "visit")
    r = d.msg("あとエアコンも効かない")
    assert r.current_step == "booking_info" and r.prompt.type == "booking_form"
