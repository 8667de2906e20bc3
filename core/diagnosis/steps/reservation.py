"""RESERVATION, BOOKING_INFO and BOOKING_CONFIRM (seed 000 §7): the booking path.

RESERVATION shows the urgency message of the §7 table and the choices dispatch / visit / skip;
``visit`` is only offered when driving is allowed, and a visit request is refused with a message
when ``can_drive`` is False. BOOKING_INFO shows the form (dispatch: name/phone/address; visit:
name/phone/preferred date-time) and validates ``submit_booking`` (a phone number that cannot exist and
a past date are refused, :mod:`core.diagnosis.booking_input`); BOOKING_CONFIRM shows the summary and
either confirms (→ DONE, telling the customer the reception number) or goes back to the form with the
entered data kept (``edit``). The booking's 症状 is :func:`core.diagnosis.interview.booking_symptom`:
what the customer said, not only the first (often vague) line.

Visit (seed 000 §7 「※can_drive=true時のみ」): offered and accepted only when the car may be driven —
never when ``can_drive`` is False or the urgency is critical.
"""
from __future__ import annotations

from typing import Sequence

from core.diagnosis.actions import (
    BOOKING,
    CONFIRM_CHOICES,
    DISPATCH_CHOICE,
    RESERVE,
    RESTART,
    RESTART_CHOICES,
    SKIP_CHOICE,
    SUBMIT_BOOKING,
    VISIT_CHOICE,
)
from core.diagnosis.booking_input import date_error, phone_error
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.interview import booking_symptom
from core.diagnosis.models import (
    BookingField,
    ChatRequest,
    ChatResponse,
    ChatStep,
    Choice,
    ChoiceJudgmentInfo,
    PromptInfo,
    RagSource,
    SessionState,
)
from core.diagnosis.steps.common import action_of, chosen_value, respond
from core.store.bookings import new_booking_number

# Seed 000 §7: visit_urgency → message (can_drive=False comes first).
NO_DRIVE_MESSAGE = "🚨 今すぐロードサービスまたは来場が必要です"
VISIT_URGENCY_MESSAGES = {
    "immediate": "🚨 今すぐ来場またはロードサービスが必要です",
    "today": "⚠️ 本日中の来場をおすすめします",
    "this_week": "⚠️ 今週中の来場をおすすめします",
    "when_convenient": "ご都合のよいときに点検へのご来場をおすすめします",
}
DEFAULT_RESERVATION_MESSAGE = "点検のご予約を承ります"
VISIT_REFUSED_MESSAGE = ("🚨 現在の症状では、お車を運転して来店することはおすすめできません（自走禁止）。"
                         "ロードサービス・出張点検の手配をご利用ください。")
BOOKING_TYPE_LABELS = {"dispatch": "ロードサービス・出張点検", "visit": "来店予約"}
BOOKING_FIELDS: dict[str, list[BookingField]] = {
    "dispatch": [BookingField(name="name", label="お名前", placeholder="例: 山田 太郎"),
                 BookingField(name="phone", label="電話番号", kind="tel", placeholder="例: 090-1234-5678"),
                 BookingField(name="address", label="現在地・住所", kind="textarea",
                              placeholder="例: ○○市○○町1-2-3 ○○駐車場")],
    "visit": [BookingField(name="name", label="お名前", placeholder="例: 山田 太郎"),
              BookingField(name="phone", label="電話番号", kind="tel", placeholder="例: 090-1234-5678"),
              BookingField(name="preferred_datetime", label="希望日時", kind="datetime",
                           placeholder="例: 6月10日 午前10時")],
}


def drivable(session: SessionState) -> bool:
    """May the customer drive to the dealer? Not when can_drive is False or the urgency is critical."""
    return session.can_drive is not False and session.urgency_level != "critical"


def urgency_message(session: SessionState) -> str:
    """The §7 table: can_drive=False first, then visit_urgency."""
    if session.can_drive is False:
        return NO_DRIVE_MESSAGE
    return VISIT_URGENCY_MESSAGES.get(session.visit_urgency or "", DEFAULT_RESERVATION_MESSAGE)


def reservation_choices(session: SessionState) -> list[Choice]:
    choices = [DISPATCH_CHOICE.model_copy()]
    if drivable(session):
        choices.append(VISIT_CHOICE.model_copy())
    choices.append(SKIP_CHOICE.model_copy())
    return choices


def enter(session: SessionState, ctx: DiagnosisContext, *, lead: str = "", rag_sources: Sequence[RagSource] | None = None,
          judgment: ChoiceJudgmentInfo | None = None, note: str = "") -> ChatResponse:
    """Move to RESERVATION and show the urgency message with the reservation choices."""
    session.current_step = ChatStep.RESERVATION
    parts = [p for p in (lead.strip(), note.strip()) if p]
    parts.append(urgency_message(session))
    if session.urgency_reasons:
        parts.append("判断の理由: " + "／".join(session.urgency_reasons[:4]))
    parts.append("ご希望の対応を選んでください。")
    prompt = PromptInfo(type="reservation_choice", message="\n\n".join(parts), choices=reservation_choices(session),
                        action=RESERVE)
    return respond(session, prompt, pending_kind="reservation", rag_sources=rag_sources, judgment=judgment)


def handle_reservation(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    # typed text is judged against all three, so a typed visit request can be refused too
    value, judgment = chosen_value(ctx, session, request, RESERVE, [DISPATCH_CHOICE, VISIT_CHOICE, SKIP_CHOICE])
    if value == "visit" and not drivable(session):
        return enter(session, ctx, note=VISIT_REFUSED_MESSAGE, judgment=judgment)
    if value in ("dispatch", "visit"):
        session.booking_type = str(value)
        session.current_step = ChatStep.BOOKING_INFO
        return booking_form(session, judgment=judgment)
    if value == "skip":
        session.current_step = ChatStep.DONE
        message = ("承知しました。今回はご予約なしで終了します。症状が続く・悪化する場合は、無理に運転せず販売店または"
                   "ロードサービスへご連絡ください。")
        if session.can_drive is False:
            message = "承知しました。" + NO_DRIVE_MESSAGE + "。安全な場所に停車したまま、ロードサービスへご連絡ください。"
        return respond(session, PromptInfo(type="text", message=message, choices=list(RESTART_CHOICES), action=RESTART),
                       pending_kind="done", judgment=judgment)
    note = "ボタンから選ぶか、「出張」「来店」「予約しない」のように入力してください。" if request.message else ""
    return enter(session, ctx, note=note, judgment=judgment)


def booking_form(session: SessionState, *, errors: Sequence[str] = (), judgment: ChoiceJudgmentInfo | None = None,
                 message: str | None = None) -> ChatResponse:
    kind = session.booking_type or "dispatch"
    fields = [f.model_copy(update={"value": session.booking_data.get(f.name, "")}) for f in BOOKING_FIELDS[kind]]
    text = message or (f"{BOOKING_TYPE_LABELS[kind]}の手配に必要な情報を入力してください。" if kind == "dispatch"
                       else f"{BOOKING_TYPE_LABELS[kind]}に必要な情報を入力してください。")
    prompt = PromptInfo(type="booking_form", message=text, booking_type=kind, booking_fields=fields,
                        action=SUBMIT_BOOKING, errors=list(errors))
    return respond(session, prompt, judgment=judgment, record=not errors)


def validate_booking(kind: str, data: dict[str, str]) -> list[str]:
    errors = []
    for field in BOOKING_FIELDS[kind]:
        if field.required and not (data.get(field.name) or "").strip():
            errors.append(f"{field.label}を入力してください。")
    if problem := phone_error(data.get("phone")):
        errors.append(problem)
    if kind == "visit" and (problem := date_error(data.get("preferred_datetime"))):
        errors.append(problem)
    return errors


def booking_summary(session: SessionState) -> dict[str, str]:
    kind = session.booking_type or "dispatch"
    summary = {"ご依頼内容": BOOKING_TYPE_LABELS[kind]}
    for field in BOOKING_FIELDS[kind]:
        summary[field.label] = session.booking_data.get(field.name, "")
    if session.make or session.model:
        summary["車両"] = f"{session.make or ''} {session.model or ''}（{session.year or '-'}年式）".strip()
    if symptom := booking_symptom(session):
        summary["症状"] = symptom
    if session.booking_number:
        summary["受付番号"] = session.booking_number
    return summary


def handle_booking_info(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    action, value = action_of(request)
    if action == RESERVE:  # changing the booking type from the form
        return handle_reservation(session, request, ctx)
    if action != SUBMIT_BOOKING or not isinstance(value, dict):
        return booking_form(session)
    kind = session.booking_type or "dispatch"
    allowed = {f.name for f in BOOKING_FIELDS[kind]}
    session.booking_data.update({k: str(v).strip() for k, v in value.items() if k in allowed and v is not None})
    if kind == "visit" and not drivable(session):
        session.booking_type = None
        return enter(session, ctx, note=VISIT_REFUSED_MESSAGE)
    errors = validate_booking(kind, session.booking_data)
    if errors:  # the reasons in the message too: a client showing only the message still reads them
        return booking_form(session, errors=errors, message="入力内容を確認してください。\n" + "\n".join(f"・{e}" for e in errors))
    session.current_step = ChatStep.BOOKING_CONFIRM
    return booking_confirm_prompt(session)


def booking_confirm_prompt(session: SessionState, *, judgment: ChoiceJudgmentInfo | None = None,
                           note: str = "") -> ChatResponse:
    message = "以下の内容で予約します。よろしいですか？"
    if note:
        message = f"{note}\n\n{message}"
    prompt = PromptInfo(type="booking_confirm", message=message, booking_type=session.booking_type,
                        booking_summary=booking_summary(session), choices=[c.model_copy() for c in CONFIRM_CHOICES],
                        action=BOOKING)
    return respond(session, prompt, pending_kind="booking_confirm", judgment=judgment)


def handle_booking_confirm(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    value, judgment = chosen_value(ctx, session, request, BOOKING, CONFIRM_CHOICES)
    if value == "edit":
        session.current_step = ChatStep.BOOKING_INFO
        return booking_form(session, judgment=judgment, message="修正する項目を書き換えて、もう一度送信してください。")
    if value == "confirm":
        session.current_step = ChatStep.DONE
        kind = session.booking_type or "dispatch"
        session.booking_number = session.booking_number or new_booking_number()
        tail = ("担当者から折り返しご連絡し、到着予定時刻をお伝えします。安全な場所でお待ちください。" if kind == "dispatch"
                else "ご希望の日時を確認のうえ、担当者からご連絡します。")
        prompt = PromptInfo(type="text", message=(f"✅ {BOOKING_TYPE_LABELS[kind]}を受け付けました。受付番号は {session.booking_number} です。"
                                                     f"{tail}お問い合わせの際は受付番号をお伝えください。"),
                            booking_type=kind, booking_summary=booking_summary(session),
                            choices=list(RESTART_CHOICES), action=RESTART)
        return respond(session, prompt, pending_kind="done", judgment=judgment)
    note = "「この内容で予約する」か「修正する」を選んでください。" if request.message else ""
    return booking_confirm_prompt(session, judgment=judgment, note=note)
