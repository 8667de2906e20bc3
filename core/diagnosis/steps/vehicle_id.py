"""VEHICLE_ID: choose the vehicle from the catalog (make, model, year, picture)."""
from __future__ import annotations

from core.diagnosis.actions import CONFIRM_PHOTO, PHOTO_CHOICES, SELECT_VEHICLE
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import (
    ChatRequest,
    ChatResponse,
    ChatStep,
    Choice,
    ChoiceJudgmentInfo,
    PromptInfo,
    SessionState,
)
from core.diagnosis.steps.common import action_of, choice_from_text, respond
from core.vehicles import Vehicle, find_vehicle

WELCOME = "車両問診を始めます。お乗りのお車を選んでください。"


def vehicle_choices(ctx: DiagnosisContext) -> list[Choice]:
    return [Choice(value=v.vehicle_id, label=v.label, icon=v.image or None) for v in ctx.catalog]


def vehicle_prompt(session: SessionState, ctx: DiagnosisContext, *, note: str = "",
                   judgment: ChoiceJudgmentInfo | None = None, notice: str | None = None) -> ChatResponse:
    session.current_step = ChatStep.VEHICLE_ID
    message = f"{note}\n\n{WELCOME}" if note else WELCOME
    prompt = PromptInfo(type="single_choice", message=message, choices=vehicle_choices(ctx), action=SELECT_VEHICLE)
    return respond(session, prompt, pending_kind="vehicle", judgment=judgment, notice=notice)


def photo_prompt(session: SessionState, vehicle: Vehicle, *, judgment: ChoiceJudgmentInfo | None = None) -> ChatResponse:
    session.current_step = ChatStep.PHOTO_CONFIRM
    prompt = PromptInfo(type="single_choice", image=vehicle.image or None,
                        message=f"お乗りのお車はこちらの {vehicle.label} でお間違いないですか？写真と見比べてご確認ください。",
                        choices=[c.model_copy() for c in PHOTO_CHOICES], action=CONFIRM_PHOTO)
    return respond(session, prompt, pending_kind="photo", judgment=judgment)


def handle_vehicle_id(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    action, value = action_of(request)
    judgment = None
    vehicle_id = value if action == SELECT_VEHICLE else None
    if vehicle_id is None and request.message:
        judgment = choice_from_text(ctx, session, request.message, vehicle_choices(ctx))
        vehicle_id = judgment.value if judgment else None
    vehicle = find_vehicle(ctx.catalog, vehicle_id if isinstance(vehicle_id, str) else None)
    if vehicle is None:
        note = "該当する車両が見つかりませんでした。一覧から選んでください。" if (request.message or action) else ""
        return vehicle_prompt(session, ctx, note=note, judgment=judgment)
    session.vehicle_id, session.make, session.model, session.year = vehicle.vehicle_id, vehicle.make, vehicle.model, vehicle.year
    return photo_prompt(session, vehicle, judgment=judgment)
