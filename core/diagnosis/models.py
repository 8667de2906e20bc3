"""Data models of the diagnosis chat (seed 000 §8): steps, session state, request and response.

Every field of the seed's tables is here; a few extra fields keep what the flow needs between
requests (the choices on screen, the reasons for an urgency, the last citations).
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr


class ChatStep(str, Enum):
    VEHICLE_ID = "vehicle_id"
    PHOTO_CONFIRM = "photo_confirm"
    FREE_TEXT = "free_text"
    SPEC_CHECK = "spec_check"
    DIAGNOSING = "diagnosing"
    URGENCY_CHECK = "urgency_check"
    RESERVATION = "reservation"
    BOOKING_INFO = "booking_info"
    BOOKING_CONFIRM = "booking_confirm"
    DONE = "done"


PromptType = Literal["text", "single_choice", "reservation_choice", "booking_form", "booking_confirm"]
UrgencyLevel = Literal["none", "low", "medium", "high", "critical"]
URGENCY_ORDER = {"none": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}


def urgency_rank(level: str | None) -> int:
    return URGENCY_ORDER.get(level or "none", 0)


class Choice(BaseModel):
    """One button: ``value`` is sent back as ``action_value``; ``icon`` is a repo-relative SVG path."""

    value: str
    label: str
    icon: str | None = None


class BookingField(BaseModel):
    """One field of the booking form (``kind``: text / tel / datetime / textarea)."""

    name: str
    label: str
    kind: str = "text"
    required: bool = True
    value: str = ""
    placeholder: str = ""


class PromptInfo(BaseModel):
    """What the page shows for this turn."""

    type: PromptType = "text"
    message: str = ""
    choices: list[Choice] = Field(default_factory=list)
    action: str | None = None  # the action name the choice buttons send (see core.diagnosis.actions)
    image: str | None = None  # vehicle picture on PHOTO_CONFIRM
    booking_type: str | None = None
    booking_fields: list[BookingField] = Field(default_factory=list)
    booking_summary: dict[str, str] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)  # booking form validation errors


class UrgencyInfo(BaseModel):
    level: str
    can_drive: bool | None = None
    visit_urgency: str | None = None
    reasons: list[str] = Field(default_factory=list)
    recommendation: str = ""


class RagSource(BaseModel):
    """A manual section cited for this turn."""

    section_id: str
    section: str
    page: int
    score: float
    chapter: str = ""
    content_type: str = ""
    has_warning: bool = False
    content: str = ""


class ChoiceJudgmentInfo(BaseModel):
    """How typed text was matched to a choice (seed 004): ``method`` is exact / structured_output /
    tag_fallback / ai_judge / failed; ``index`` is 1-based or None when nothing matched."""

    text: str
    index: int | None = None
    value: str | None = None
    method: str
    reason: str = ""


class SessionState(BaseModel):
    session_id: str
    current_step: ChatStep = ChatStep.VEHICLE_ID
    vehicle_id: str | None = None
    make: str | None = None
    model: str | None = None
    year: int | None = None
    symptom_text: str = ""
    collected_symptoms: list[str] = Field(default_factory=list)
    conversation_history: list[dict[str, str]] = Field(default_factory=list)
    diagnostic_turn: int = 0
    max_diagnostic_turns: int = 8
    last_confidence: float = 0.0
    candidates_shown: bool = False
    solutions_tried: int = 0
    conversation_summary: str = ""
    rewritten_query: str = ""
    urgency_level: str | None = None
    can_drive: bool | None = None
    manual_coverage: str | None = None
    visit_urgency: str | None = None
    state_snapshots: list[dict[str, Any]] = Field(default_factory=list)
    spec_hint: bool = False
    spec_check_shown: bool = False
    booking_type: str | None = None
    booking_data: dict[str, str] = Field(default_factory=dict)
    booking_number: str | None = None  # the reception number told to the customer when the booking is confirmed
    # --- beyond the seed table: what the flow carries between requests ---
    urgency_reasons: list[str] = Field(default_factory=list)
    asked_topics: list[str] = Field(default_factory=list)
    spec_rejected: bool = False
    last_prompt: PromptInfo | None = None
    pending_kind: str | None = None  # which choices are on screen: vehicle/photo/question/resolution/spec/reservation/booking_confirm
    last_rag_sources: list[RagSource] = Field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0
    # set by ``steps.done.restart`` (never stored): the service moves the fresh state to a new session id
    _restarted: bool = PrivateAttr(default=False)

    def snapshot_state(self) -> dict[str, Any]:
        """The dump stored in a rewind snapshot (everything except the snapshots themselves)."""
        return self.model_dump(mode="json", exclude={"state_snapshots"})


class ChatRequest(BaseModel):
    """One user input: a typed ``message``, a button (``action`` + ``action_value``) or a rewind.

    ``action_value`` is a string for buttons and a dict of form fields for ``submit_booking``.
    """

    session_id: str | None = None
    message: str | None = None
    action: str | None = None
    action_value: str | dict[str, str] | None = None
    rewind_to_turn: int | None = None


class ChatResponse(BaseModel):
    session_id: str
    current_step: str
    prompt: PromptInfo
    urgency: UrgencyInfo | None = None
    rag_sources: list[RagSource] = Field(default_factory=list)
    manual_coverage: str | None = None
    diagnostic_turn: int = 0
    rewound_to_turn: int | None = None
    snapshot_turn: int | None = None  # the rewind point this request created (the user turn it answered)
    judgment: ChoiceJudgmentInfo | None = None
    fallback: bool = False  # True when a model call failed and a safe message was shown
    notice: str | None = None  # e.g. "the session expired and a new one was started"
    rag_answer: str | None = None  # seed 000 §10 answer from the manual, shown with rag_sources
