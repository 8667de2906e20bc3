"""PHOTO_CONFIRM: show the chosen vehicle's picture; yes → FREE_TEXT, no → back to VEHICLE_ID.

A symptom typed here instead of pressing a button (the README's ``curl`` example sends one right after
choosing the vehicle; 「はい、ブレーキを踏むとキーキー鳴る」) is kept: the vehicle counts as confirmed and
the text is handled as the first symptom (FREE_TEXT), never thrown away.
"""
from __future__ import annotations

import re

from core.diagnosis.actions import CONFIRM_PHOTO, PHOTO_CHOICES
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse, ChatStep, PromptInfo, SessionState
from core.diagnosis.steps.common import action_of, chosen_value, respond, save_snapshot
from core.diagnosis.steps.free_text import SYMPTOM_QUESTION, route_symptom
from core.diagnosis.steps.vehicle_id import photo_prompt, vehicle_prompt
from core.diagnosis.urgency_rules import SYMPTOM_WORD, is_how_to, variants
from core.vehicles import find_vehicle


def symptom_prompt(session: SessionState, **kwargs) -> ChatResponse:
    session.current_step = ChatStep.FREE_TEXT
    return respond(session, PromptInfo(type="text", message=SYMPTOM_QUESTION), **kwargs)


_ACK = re.compile(r"^\s*(はい|ええ|うん|そうです|そう|合って(い)?ます|あって(い)?ます|間違い(ない|ありません)(です)?|OK|オッケー)"
                  r"[、。,.!！\s]*")


def typed_symptom(ctx: DiagnosisContext, text: str | None) -> str | None:
    """The symptom or question in text typed at the photo confirmation (an acknowledgement before it
    set aside), or None when the text is only an answer to the confirmation."""
    rest = _ACK.sub("", (text or "").strip(), count=1).strip()
    if len(rest) < 4:
        return None
    symptom = any(SYMPTOM_WORD.search(form) for form in variants(rest)) or ctx.rules.check(rest).level != "none"
    return rest if symptom or is_how_to(rest) else None


def handle_photo_confirm(session: SessionState, request: ChatRequest, ctx: DiagnosisContext) -> ChatResponse:
    action, _ = action_of(request)
    symptom = typed_symptom(ctx, request.message) if action != CONFIRM_PHOTO else None
    if symptom is not None:  # the vehicle is confirmed by describing its symptom
        session.current_step = ChatStep.FREE_TEXT
        save_snapshot(session, 1)
        return route_symptom(session, symptom, ctx)
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
