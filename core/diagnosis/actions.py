"""Button action names and values of the diagnosis chat, and the fixed choice sets.

A button sends ``ChatRequest(action=<name>, action_value=<value>)``. ``PromptInfo.action`` tells
the page which action name the choices of the current prompt use.

| step | action | values |
|---|---|---|
| vehicle_id | ``select_vehicle`` | a ``vehicle_id`` from the catalog |
| photo_confirm | ``confirm_photo`` | ``yes`` / ``no`` |
| spec_check | ``spec_feedback`` | ``resolved`` / ``not_resolved`` / ``already_tried`` |
| diagnosing (question) | ``answer`` | the choice value (its label), ``dont_know``, ``free_input`` |
| diagnosing (after an answer) | ``resolved`` | ``yes`` / ``no`` / ``book`` |
| reservation | ``reserve`` | ``dispatch`` / ``visit`` / ``skip`` |
| booking_info | ``submit_booking`` | dict of form fields (``name``, ``phone``, ``address`` or ``preferred_datetime``) |
| booking_confirm | ``booking`` | ``confirm`` / ``edit`` |
| done | ``restart`` | (none) |
"""
from __future__ import annotations

from core.diagnosis.models import Choice

SELECT_VEHICLE = "select_vehicle"
CONFIRM_PHOTO = "confirm_photo"
SPEC_FEEDBACK = "spec_feedback"
ANSWER = "answer"
RESOLVED = "resolved"
RESERVE = "reserve"
SUBMIT_BOOKING = "submit_booking"
BOOKING = "booking"
RESTART = "restart"

DONT_KNOW = "dont_know"
FREE_INPUT = "free_input"
DONT_KNOW_LABEL = "わからない"
FREE_INPUT_LABEL = "✏️ 自由入力"

PHOTO_CHOICES = [Choice(value="yes", label="はい、この車です"), Choice(value="no", label="いいえ、違う車です")]
SPEC_CHOICES = [Choice(value="resolved", label="✅ 解決しました"),
                Choice(value="not_resolved", label="解決していません"),
                Choice(value="already_tried", label="すでに試しました")]
RESOLUTION_CHOICES = [Choice(value="yes", label="✅ 解決しました"),
                      Choice(value="no", label="解決していません"),
                      Choice(value="book", label="📅 点検を予約したい")]
DISPATCH_CHOICE = Choice(value="dispatch", label="🚚 ロードサービス・出張点検を手配する")
VISIT_CHOICE = Choice(value="visit", label="🏠 来店予約をする")
SKIP_CHOICE = Choice(value="skip", label="今は予約しない")
CONFIRM_CHOICES = [Choice(value="confirm", label="この内容で予約する"), Choice(value="edit", label="✏️ 修正する")]
RESTART_CHOICES = [Choice(value="restart", label="🔄 新しい問診を始める")]

# Alternative spellings accepted as the action itself (e.g. action="confirm" without a value).
ACTION_ALIASES: dict[str, tuple[str, str]] = {
    "confirm": (BOOKING, "confirm"), "edit": (BOOKING, "edit"),
    "dispatch": (RESERVE, "dispatch"), "visit": (RESERVE, "visit"), "skip": (RESERVE, "skip"),
    "not_resolved": (SPEC_FEEDBACK, "not_resolved"), "already_tried": (SPEC_FEEDBACK, "already_tried"),
    "book": (RESOLVED, "book"),
}
