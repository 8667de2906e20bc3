"""The model calls of the diagnosis flow, all through ``core.engine.structured_call`` (or, for the
plain-text tasks, ``core.engine.text_call``), tagged for the debug log.

Every function returns a result object and never raises: a failed call is ``ok=False`` / ``None``
and the caller shows a safe fallback message.
"""
from __future__ import annotations

from typing import Any

from core.debuglog import CallTags
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import SessionState
from core.engine import structured_call, text_call
from core.results import StructuredResult
from core.schemas import load_schema

FLOW = "diagnosis"
# Offline-policy task names (also the schema names of the structured tasks).
DIAGNOSTIC_TASK = "diagnostic_response"
URGENCY_TASK = "urgency_assessment"
SPEC_TASK = "spec_classification"
CHOICE_JUDGMENT_TASK = "choice_judgment"
CHOICE_TAG_TASK = "choice_tag"
CHOICE_EVALUATION_TASK = "choice_evaluation"
SUMMARY_TASK = "diagnosis_summary"


def tags(session: SessionState, step: str, prompt: str) -> CallTags:
    return CallTags(session_id=session.session_id, flow=FLOW, step=step, prompt=prompt)


def call_structured(ctx: DiagnosisContext, session: SessionState, *, task: str, messages: list[dict[str, str]],
                    context: dict[str, Any], step: str, prompt: str, temperature: float = 0.3,
                    max_repairs: int = 2) -> StructuredResult:
    """One schema-checked call of ``task`` (= the schema name in ``schemas/``)."""
    return structured_call(ctx.client, messages, schema=load_schema(task), name=task, context=context,
                           log=ctx.log, tags=tags(session, step, prompt), max_repairs=max_repairs, temperature=temperature,
                           retry=ctx.retry)


def call_text(ctx: DiagnosisContext, session: SessionState, *, task: str, messages: list[dict[str, str]],
              context: dict[str, Any], step: str, prompt: str, temperature: float = 0.0) -> str | None:
    """One plain-text call (no schema): the reply text, or None when the provider failed."""
    return text_call(ctx.client, messages, task=task, context=context, temperature=temperature, log=ctx.log,
                     tags=tags(session, step, prompt), retry=ctx.retry)
