"""Scenario-runner adapter for the diagnosis flow (``core.eval`` contract).

``run_scenario(scenario, client, log)`` selects ``scenario["vehicle"]`` (the catalog's first vehicle
when omitted), confirms the photo (unless ``confirm_photo: false``: the turns start at the photo
confirmation, as an API client that types its symptom right away does), plays ``turns`` — ``{message}``, ``{action, value}``,
``{rewind: N}`` — and returns the final observable state::

    {"step", "urgency", "can_drive", "citations": [section_id of the last response's rag_sources],
     "message", "outcome": None, "trace": [], "transcript": [...]}

``faults`` (optional list): ``model_error`` (every model call fails with a server error, no retries),
``retriever_error`` (the manual search raises), ``no_manual`` (the manual search finds nothing).
Transcript text is PII-masked.
"""
from __future__ import annotations

from typing import Any

from core.diagnosis.context import UNSET, DiagnosisContext
from core.diagnosis.models import ChatRequest, ChatResponse
from core.diagnosis.service import ChatService
from core.engine import RetryPolicy
from core.llm.base import LLMRequest, LLMResponse, ProviderError
from core.text.pii import mask_pii

FAULTS = ("model_error", "retriever_error", "no_manual")


class _FailingClient:
    name = "fault:model_error"
    model = "none"

    def complete(self, request: LLMRequest) -> LLMResponse:
        raise ProviderError("server_error", "injected fault: model_error", 500)


class _FaultyRetriever:
    def __init__(self, mode: str):
        self.mode = mode

    def search(self, query: str, vehicle_id: str | None = None, n_results: int = 5, mode: str = "hybrid") -> list:
        if self.mode == "retriever_error":
            raise RuntimeError("injected fault: retriever_error")
        return []


def _entry(response: ChatResponse) -> dict[str, Any]:
    prompt = response.prompt
    return {"role": "assistant", "step": response.current_step, "type": prompt.type,
            "message": mask_pii(prompt.message), "choices": [c.label for c in prompt.choices],
            "urgency": response.urgency.level if response.urgency else None,
            "citations": [s.section_id for s in response.rag_sources],
            "judgment": response.judgment.method if response.judgment else None,
            "fallback": response.fallback}


def run_scenario(scenario: dict[str, Any], client: Any, log: list, *, retriever: Any = UNSET) -> dict[str, Any]:
    faults = list(scenario.get("faults") or [])
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise ValueError(f"unknown diagnosis fault(s): {unknown} (known: {', '.join(FAULTS)})")
    if "model_error" in faults:
        client = _FailingClient()
    for fault in ("retriever_error", "no_manual"):
        if fault in faults:
            retriever = _FaultyRetriever(fault)
    retry = RetryPolicy(max_retries=0) if "model_error" in faults else None
    ctx = DiagnosisContext(client=client, retriever=retriever, log=log, retry=retry)
    service = ChatService(context=ctx)
    transcript: list[dict[str, Any]] = []

    def send(request: ChatRequest, shown: dict[str, Any] | None = None) -> ChatResponse:
        if shown:
            transcript.append({"role": "user", **shown})
        response = service.process(request)
        transcript.append(_entry(response))
        return response

    response = send(ChatRequest())
    sid = response.session_id
    vehicle = scenario.get("vehicle") or ctx.catalog[0].vehicle_id
    response = send(ChatRequest(session_id=sid, action="select_vehicle", action_value=vehicle),
                    {"action": "select_vehicle", "value": vehicle})
    if scenario.get("confirm_photo", True):
        response = send(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"),
                        {"action": "confirm_photo", "value": "yes"})
    for turn in scenario.get("turns") or []:
        if "rewind" in turn:
            request = ChatRequest(session_id=sid, rewind_to_turn=int(turn["rewind"]))
            shown = {"rewind": int(turn["rewind"])}
        elif "action" in turn:
            value = turn.get("value")
            request = ChatRequest(session_id=sid, action=turn["action"], action_value=value)
            shown_value = {k: mask_pii(str(v)) for k, v in value.items()} if isinstance(value, dict) else value
            shown = {"action": turn["action"], "value": shown_value}
        else:
            request = ChatRequest(session_id=sid, message=str(turn.get("message", "")))
            shown = {"message": mask_pii(str(turn.get("message", "")))}
        response = send(request, shown)
        sid = response.session_id
    return {
        "step": response.current_step,
        "urgency": response.urgency.level if response.urgency else None,
        "can_drive": response.urgency.can_drive if response.urgency else None,
        "citations": [s.section_id for s in response.rag_sources],
        "message": response.prompt.message,
        "outcome": None,
        "trace": [],
        "transcript": transcript,
    }
