"""RESERVATION / BOOKING_INFO / BOOKING_CONFIRM (seed 000 §7) and the visit refusal guard."""
from __future__ import annotations

import pytest
from diagnosis_fakes import TaskClient

from core.diagnosis import ChatRequest, ChatStep
from core.diagnosis.steps.reservation import (NO_DRIVE_MESSAGE, VISIT_REFUSED_MESSAGE, enter, handle_booking_confirm,
                                              handle_booking_info, handle_reservation, urgency_message)

DISPATCH_FORM = {"name": "山田 太郎", "phone": "090-1234-5678", "address": "テスト市テスト町1-2-3"}
VISIT_FORM = {"name": "山田 太郎", "phone": "0312345678", "preferred_datetime": "6月10日 10時"}


@pytest.mark.parametrize("can_drive,visit,expected", [
    (False, "immediate", "🚨 今すぐロードサービスまたは来場が必要です"),
    (False, None, "🚨 今すぐロードサービスまたは来場が必要です"),
    (True, "immediate", "🚨 今すぐ来場またはロードサービスが必要です"),
    (True, "today", "⚠️ 本日中の来場をおすすめします"),
    (None, "this_week", "⚠️ 今週中の来場をおすすめします"),
])
def test_visit_urgency_message_table(session_at, can_drive, visit, expected):
    session = session_at(can_drive=can_drive, visit_urgency=visit)
    assert urgency_message(session) == expected


def test_enter_offers_visit_only_when_driving_is_allowed(make_ctx, session_at):
    ctx = make_ctx(client=TaskClient())
    r = enter(session_at(can_drive=True, visit_urgency="today", urgency_level="high"), ctx)
    assert r.current_step == "reservation" and r.prompt.type == "reservation_choice" and r.prompt.action == "reserve"
    assert [c.value for c in r.prompt.choices] == ["dispatch", "visit", "skip"]
    r = enter(session_at(can_drive=False, visit_urgency="immediate", urgency_level="critical"), ctx)
    assert [c.value for c in r.prompt.choices] == ["dispatch", "skip"] and NO_DRIVE_MESSAGE in r.prompt.message


def test_visit_refused_when_can_drive_false(make_ctx, session_at):
    ctx = make_ctx(client=TaskClient())
    session = session_at(ChatStep.RESERVATION, can_drive=False, urgency_level="critical", visit_urgency="immediate")
    r = handle_reservation(session, ChatRequest(action="reserve", action_value="visit"), ctx)
    assert r.current_step == "reservation" and VISIT_REFUSED_MESSAGE in r.prompt.message
    assert "visit" not in [c.value for c in r.prompt.choices] and session.booking_type is None


def test_typed_visit_request_refused_too(make_ctx, session_at):
    session = session_at(ChatStep.RESERVATION, can_drive=False, urgency_level="critical")
    r = handle_reservation(session, ChatRequest(message="自分で運転してお店に持っていきます"), make_ctx())
    assert r.judgment.value == "visit" and VISIT_REFUSED_MESSAGE in r.prompt.message and r.current_step == "reservation"


def test_visit_submission_refused_if_driving_became_forbidden(make_ctx, session_at):
    session = session_at(ChatStep.BOOKING_INFO, booking_type="visit", can_drive=False)
    r = handle_booking_info(session, ChatRequest(action="submit_booking", action_value=VISIT_FORM), make_ctx())
    assert r.current_step == "reservation" and VISIT_REFUSED_MESSAGE in r.prompt.message


def test_dispatch_form_fields(make_ctx, session_at):
    session = session_at(ChatStep.RESERVATION, can_drive=False)
    r = handle_reservation(session, ChatRequest(action="reserve", action_value="dispatch"), make_ctx())
    assert r.current_step == "booking_info" and r.prompt.type == "booking_form" and r.prompt.booking_type == "dispatch"
    assert [(f.name, f.label) for f in r.prompt.booking_fields] == [("name", "お名前"), ("phone", "電話番号"),
                                                                     ("address", "現在地・住所")]
    assert r.prompt.action == "submit_booking"


def test_visit_form_fields(make_ctx, session_at):
    session = session_at(ChatStep.RESERVATION, can_drive=True)
    r = handle_reservation(session, ChatRequest(action="reserve", action_value="visit"), make_ctx())
    assert [f.name for f in r.prompt.booking_fields] == ["name", "phone", "preferred_datetime"]
    assert r.prompt.booking_fields[2].label == "希望日時"


def test_skip_ends_the_session(make_ctx, session_at):
    session = session_at(ChatStep.RESERVATION, can_drive=True)
    r = handle_reservation(session, ChatRequest(action="reserve", action_value="skip"), make_ctx())
    assert r.current_step == "done" and r.prompt.action == "restart"


def test_unmatched_text_reshows_choices(make_ctx, session_at):
    session = session_at(ChatStep.RESERVATION, can_drive=True)
    r = handle_reservation(session, ChatRequest(message="今日の天気は？"), make_ctx())
    assert r.current_step == "reservation" and "ボタンから選ぶか" in r.prompt.message


def test_validation_errors_keep_entered_data(make_ctx, session_at):
    session = session_at(ChatStep.BOOKING_INFO, booking_type="dispatch")
    r = handle_booking_info(session, ChatRequest(action="submit_booking",
                                                 action_value={"name": "山田", "phone": "12", "address": ""}), make_ctx())
    assert r.current_step == "booking_info" and r.prompt.errors == ["現在地・住所を入力してください。",
                                                                     "電話番号は 0 から始まる 10〜11 桁の番号で入力してください。"]
    assert {f.name: f.value for f in r.prompt.booking_fields} == {"name": "山田", "phone": "12", "address": ""}


def test_submit_confirm_edit_loop_keeps_data_then_confirm(make_ctx, session_at):
    ctx = make_ctx()
    session = session_at(ChatStep.BOOKING_INFO, booking_type="dispatch", symptom="ブレーキが効かない")
    r = handle_booking_info(session, ChatRequest(action="submit_booking", action_value=DISPATCH_FORM), ctx)
    assert r.current_step == "booking_confirm" and r.prompt.type == "booking_confirm"
    assert r.prompt.booking_summary["お名前"] == "山田 太郎" and r.prompt.booking_summary["電話番号"] == "090-1234-5678"
    assert r.prompt.booking_summary["ご依頼内容"] == "ロードサービス・出張点検" and r.prompt.booking_summary["症状"] == "ブレーキが効かない"
    assert [c.value for c in r.prompt.choices] == ["confirm", "edit"] and r.prompt.action == "booking"
    r = handle_booking_confirm(session, ChatRequest(action="booking", action_value="edit"), ctx)
    assert r.current_step == "booking_info"
    assert {f.name: f.value for f in r.prompt.booking_fields} == DISPATCH_FORM
    r = handle_booking_info(session, ChatRequest(action="submit_booking", action_value={**DISPATCH_FORM, "address": "別の場所1-1"}), ctx)
    assert r.prompt.booking_summary["現在地・住所"] == "別の場所1-1" and r.prompt.booking_summary["お名前"] == "山田 太郎"
    r = handle_booking_confirm(session, ChatRequest(action="booking", action_value="confirm"), ctx)
    assert r.current_step == "done" and r.prompt.message.startswith("✅") and r.prompt.booking_summary["お名前"] == "山田 太郎"
    assert session.booking_data == {**DISPATCH_FORM, "address": "別の場所1-1"}


def test_booking_confirm_by_typed_text_and_aliases(make_ctx, session_at):
    session = session_at(ChatStep.BOOKING_CONFIRM, booking_type="visit", booking_data=dict(VISIT_FORM))
    r = handle_booking_confirm(session, ChatRequest(message="住所を修正したい"), make_ctx())
    assert r.current_step == "booking_info" and r.judgment.value == "edit"
    session = session_at(ChatStep.BOOKING_CONFIRM, booking_type="visit", booking_data=dict(VISIT_FORM))
    r = handle_booking_confirm(session, ChatRequest(action="confirm"), make_ctx())
    assert r.current_step == "done"


def test_form_ignores_unknown_fields_and_non_submit_requests(make_ctx, session_at):
    session = session_at(ChatStep.BOOKING_INFO, booking_type="visit")
    r = handle_booking_info(session, ChatRequest(message="こんにちは"), make_ctx())
    assert r.current_step == "booking_info" and r.prompt.type == "booking_form"
    handle_booking_info(session, ChatRequest(action="submit_booking", action_value={**VISIT_FORM, "card": "4111"}), make_ctx())
    assert "card" not in session.booking_data


def test_changing_booking_type_from_the_form(make_ctx, session_at):
    session = session_at(ChatStep.BOOKING_INFO, booking_type="visit", can_drive=True)
    r = handle_booking_info(session, ChatRequest(action="reserve", action_value="dispatch"), make_ctx())
    assert r.prompt.booking_type == "dispatch" and session.booking_type == "dispatch"
