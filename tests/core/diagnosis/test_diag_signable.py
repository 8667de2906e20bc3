"""Answers a reviewer can sign (issue #24, seed 000): the rules, routing, retrieval and state-machine parts.

Scenario-level behaviour in many phrasings is in ``tests/scenarios/diagnosis_signable.yaml``; these tests pin
the pieces: vague descriptions, the booking's 症状 summary, booking input checks, the information answers'
warnings, the §10 query service, the photo step, the resolution reply, unknown session ids and the
failed-call log line.
"""
from __future__ import annotations

import logging
from datetime import date

import pytest
from diagnosis_fakes import MIRAI, TaskClient, answer

from core.diagnosis import ChatRequest, ChatService, InMemorySessionStore, SessionState, llm_calls
from core.diagnosis.booking_input import date_error, phone_error, requested_day
from core.diagnosis.interview import booking_symptom, is_vague, narrowed, still_vague
from core.diagnosis.rag import warning_lines, with_warnings
from core.diagnosis.steps.diagnosing import handle_diagnosing
from core.diagnosis.steps.reservation import reservation_choices
from core.diagnosis.urgency_rules import default_rules, is_lamp_question
from core.llm.base import ProviderError
from core.llm.offline import OfflineClient

TREK = "kaiwa-trek-4wd-2020"


# --- vague descriptions ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["なんか変な音がする", "異音がします", "変な振動がある気がする", "ランプがついた"])
def test_a_kind_of_symptom_alone_is_vague(text):
    assert is_vague(text)


@pytest.mark.parametrize("text", ["ブレーキを踏むと変な音がする", "走っているとガラガラ音がする", "赤いランプがついた",
                                  "ルームランプが点かない", "はしると したから がらがら へんな おとがする"])
def test_a_part_a_situation_or_a_sound_word_is_not_vague(text):
    assert not is_vague(text, default_rules().check(text).rule_ids)


def test_the_answers_narrow_the_description_the_rules_read():
    texts = ["なんか変な音がする", "わからない"]
    assert still_vague(texts) and narrowed(texts) == texts  # 「わからない」 says nothing yet
    texts = ["なんか変な音がする", "ブレーキを踏んだとき"]
    assert not still_vague(texts) and narrowed(texts) == ["ブレーキを踏んだとき音がする"]
    assert default_rules().check_many(narrowed(texts)).level != "high"  # no longer the generic 「変な音」 rule


def test_a_vague_description_is_asked_about_before_it_is_rated_whatever_the_model_says(driver, real_retriever):
    client = TaskClient({"diagnostic_response": [answer(urgency_flag="high", visit_urgency="today",
                                                        message="点検をおすすめします。")]})
    d = driver(client=client, retriever=real_retriever)
    d.to_symptom()
    r = d.msg("なんか変な音がする")
    assert r.current_step == "diagnosing" and r.urgency is None and d.session.urgency_level is None
    assert r.prompt.action == "answer" and "聞こえる音" in r.prompt.message  # a question, not the model's answer
    assert not d.session.urgency_reasons


# --- the booking's 症状 -------------------------------------------------------------------------------

def test_the_booking_symptom_summarises_the_answers_not_the_first_line_nor_a_page():
    session = SessionState(session_id="s", symptom_text="なんか変な音がする",
                           collected_symptoms=["なんか変な音がする", "走っているとき", "わからない",
                                               "前のほう。\n" + "・長いリストの行です\n" * 80])
    summary = booking_symptom(session)
    assert summary == "なんか変な音がする（走っているとき／前のほう。）"
    session.collected_symptoms.append("x" * 500)
    assert booking_symptom(session).endswith("x…）") and len(booking_symptom(session)) < 140  # one answer: 60 characters
    session.collected_symptoms += [f"{i}番目の答え" + "y" * 50 for i in range(10)]
    assert len(booking_symptom(session)) == 300 and booking_symptom(session).endswith("…")


def test_a_confirmed_booking_tells_the_number_and_stores_the_summary(tmp_path):
    from core.diagnosis.conversation import DiagnosisConversations
    from core.store.store import Store

    url = f"sqlite:///{tmp_path / 'k.db'}"
    convs = DiagnosisConversations(Store(url), client=OfflineClient())
    r = convs.handle(ChatRequest())
    sid = r.session_id
    for request in (ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI),
                    ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"),
                    ChatRequest(session_id=sid, message="ブレーキが効かない"),
                    ChatRequest(session_id=sid, action="reserve", action_value="dispatch"),
                    ChatRequest(session_id=sid, action="submit_booking",
                                action_value={"name": "山田 太郎", "phone": "090-1234-5678", "address": "東京都"})):
        r = convs.handle(request)
    r = convs.handle(ChatRequest(session_id=sid, action="booking", action_value="confirm"))
    [booking] = Store(url).list_bookings()
    assert r.current_step == "done" and f"受付番号は {booking['number']} です" in r.prompt.message
    assert r.prompt.booking_summary["受付番号"] == booking["number"]
    assert booking["symptom"] == "ブレーキが効かない"


# --- booking input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("phone, ok", [("090-1234-5678", True), ("09012345678", True), ("+81 90-1234-5678", True),
                                       ("03-1234-5678", True), ("0120-123-456", True), ("090-1234-567", False),
                                       ("03-1234-56789", False), ("1234", False), ("０９０－１２３４－５６７８", True)])
def test_phone_numbers_that_cannot_exist_are_refused_in_japanese(phone, ok):
    problem = phone_error(phone)
    assert (problem is None) == ok
    if not ok:
        assert "電話番号" in problem


def test_past_dates_are_refused_and_future_ones_kept():
    today = date(2026, 11, 26)
    assert date_error("2020年1月10日 10時", today) and "過去の日付" in date_error("昨日の夕方", today)
    assert date_error("11月20日 午前", today)  # a few days ago: a slip, not next year
    assert requested_day("1月5日", today) == date(2027, 1, 5) and date_error("1月5日", today) is None
    assert date_error("明日の午前10時", today) is None and date_error("なるべく早く", today) is None
    assert "存在しない日付" in date_error("2月30日", today)


def test_visit_is_offered_only_when_the_car_may_be_driven():
    def values(**fields):
        return [c.value for c in reservation_choices(SessionState(session_id="s", **fields))]

    assert "visit" in values(urgency_level="high", can_drive=True)
    assert "visit" not in values(urgency_level="high", can_drive=False)
    assert "visit" not in values(urgency_level="critical", can_drive=True)  # a critical symptom is never driven in


# --- lamp questions, warnings on information answers, the §10 query service ----------------------------

def test_a_lamp_question_is_not_a_lit_lamp():
    rules = default_rules()
    assert is_lamp_question("エンジン警告灯って何を意味するの？") and rules.check("エンジン警告灯って何を意味するの？").level == "none"
    assert not is_lamp_question("エンジン警告灯がついたけど何？") and rules.check("エンジン警告灯がついた").level == "high"
    assert rules.check("タイヤ空気圧警告灯がついた").level == "medium"
    assert rules.check("ドラレコのランプが点滅してる").level == "low"


def test_warning_lines_and_with_warnings_carry_the_sections_warnings_cited(real_retriever, make_ctx):
    from core.diagnosis.rag import rag_search

    ctx = make_ctx(retriever=real_retriever)
    [fuel] = [h for h in rag_search(ctx, "給油のしかた", MIRAI) if h.section.startswith("給油")]
    lines = warning_lines(fuel.text)
    assert lines.startswith("⚠警告") and "給油中は火気厳禁です" in lines
    message = with_warnings("給油口は左側後方にあります。", fuel)
    assert "給油中は火気厳禁です" in message and "（取扱説明書「給油のしかた（燃料の種類・タンク容量）」p.220）" in message
    assert with_warnings(message, fuel) == message  # nothing twice


def test_an_information_answer_goes_through_the_query_service(driver, real_retriever, monkeypatch):
    calls = []
    original = llm_calls.query

    def spy(ctx, session, symptom, **kwargs):
        calls.append(symptom)
        return original(ctx, session, symptom, **kwargs)

    monkeypatch.setattr(llm_calls, "query", spy)
    d = driver(retriever=real_retriever)
    d.to_symptom(TREK)
    r = d.msg("タイヤ交換の手順は？")
    assert calls == ["タイヤ交換の手順は？"] and r.current_step == "spec_check" and r.urgency is None
    assert "ジャッキで車体を上げているときは" in r.prompt.message and "（取扱説明書「スペアタイヤへの交換」p.440）" in r.prompt.message
    d2 = driver(retriever=real_retriever)
    d2.to_symptom()
    d2.msg("ブレーキを踏むとキーキー鳴る")
    d2.act("answer", "天気に関係なく毎回鳴り、だんだん大きくなってきた")
    assert len(calls) == 2  # the diagnostic answer uses the same service


# --- the photo step, the resolution reply, unknown ids, the failed-call log -------------------------------

def test_a_symptom_typed_at_the_photo_confirmation_is_kept_and_handled(driver, real_retriever):
    d = driver(retriever=real_retriever)
    d.act("select_vehicle", MIRAI)
    r = d.msg("ブレーキを踏むとキーキー鳴る")
    assert r.current_step == "diagnosing" and d.session.symptom_text == "ブレーキを踏むとキーキー鳴る"
    assert r.rag_sources[0].section == "ブレーキ鳴き" and r.judgment is None
    d = driver(retriever=real_retriever)
    d.act("select_vehicle", MIRAI)
    assert d.msg("はい").current_step == "free_text"  # an answer to the confirmation stays one


def test_free_text_at_the_resolution_question_never_repeats_the_answer(driver, real_retriever):
    d = driver(retriever=real_retriever)
    d.to_symptom()
    first = d.msg("燃費が悪くなった")
    assert first.prompt.action == "resolved"
    r = d.msg("うーん、微妙です")
    assert "燃費が悪化しやすい条件" not in r.prompt.message and "とのこと、承知しました" in r.prompt.message
    assert r.judgment is None and r.prompt.action == "resolved"
    said = [m["content"] for m in d.session.conversation_history if m["role"] == "assistant"]
    assert len(said) == len(set(said))  # the answer is in the history once


def test_an_unknown_session_id_is_unknown_and_an_expired_one_expired():
    class Clock:
        now = 0.0

        def __call__(self):
            return self.now

    clock = Clock()
    service = ChatService(OfflineClient(), store=InMemorySessionStore(ttl_seconds=10, clock=clock))
    assert "見つかりません" in service.process(ChatRequest(session_id="never", message="こんにちは")).notice
    sid = service.start().session_id
    clock.now += 11
    assert "有効期限" in service.process(ChatRequest(session_id=sid, message="こんにちは")).notice


def test_a_failed_diagnostic_call_is_logged_at_error_without_the_customers_text(make_ctx, session_at, caplog):
    ctx = make_ctx(client=TaskClient({"diagnostic_response": [ProviderError("server_error", "down")] * 3}))
    session = session_at()
    with caplog.at_level(logging.ERROR, logger="core.diagnosis.steps.diagnosing"):
        r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする 090-1234-5678"), ctx)
    assert r.fallback
    [record] = [rec for rec in caplog.records if rec.levelno == logging.ERROR]
    assert "LLM diagnostic call failed" in record.getMessage() and "server_error" in record.getMessage()
    assert "090" not in record.getMessage() and "ブレーキ" not in record.getMessage()


# --- the right section (issue #26's offline answers) ----------------------------------------------------------

@pytest.mark.parametrize("text, section", [("ブレーキがキーキーいう", "ブレーキ鳴き"),
                                           ("ブレーキを踏むとキーキー鳴る", "ブレーキ鳴き"),
                                           ("エンジン警告灯がついた", "エンジン警告灯（チェックエンジン）"),
                                           ("スマートキーの電池交換の方法は？", "スマートキーの電池交換")])
def test_the_manual_search_finds_the_section_about_the_subject(real_retriever, make_ctx, text, section):
    from core.diagnosis.rag import rag_search

    hits = rag_search(make_ctx(retriever=real_retriever), text, MIRAI)
    assert hits[0].section == section
    assert not any("スマートキー" in h.section for h in hits) or "スマートキー" in text
