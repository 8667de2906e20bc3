"""PHOTO_CONFIRM: show the chosen vehicle's picture; yes → FREE_TEXT, no → back to VEHICLE_ID."""
from __future__ import annotations

from core.diagnosis.actions import CONFIRM_PHOTO, PHOTO_CHOICES
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, PromptInfo, SessionState
from core.diagnosis.steps.common import chosen_value, respond
from core.diagnosis.steps.vehicle_id import photo_prompt, vehicle_prompt
from core.vehicles import find_vehicle

SYMPTOM_QUESTION = ("どのような症状がありますか？いつ・どんなときに起きるかも含めて、できるだけ具体的に教えてください。"
                    "（例: 「エンジン警告灯がついた」「ブレーキを踏むとキーキー鳴る」）")


def symptom_prompt(session: SessionState, **kwargs) -> ChatResponse:
    session.current_step = ChatStep.FREE_TEXT
    return respond(session, PromptInfo(type="text", message=SYMPTOM_QUESTION), **kwargs)


def handle_photo_confirm(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    value, judgment = chosen_value(ctx, session, request, CONFIRM_PHOTO, PHOTO_CHOICES)
    if value == "yes":
        return symptom_prompt(session, judgment=judgment)
    if value == "no":
        session.vehicle_id = session.make = session.model = None
        session.year = None
        return vehicle_prompt(session, ctx, note="承知しました。もう一度お車を選んでください。", judgment=judgment)
    vehicle = find_vehicle(ctx.catalog, session.vehicle_id)
    if vehicle is None:
        return vehicle_prompt(session, ctx)
    return photo_prompt(session, vehicle, judgment=judgment)
