"""The model calls of the diagnosis flow, all through ``core.engine.structured_call`` (or, for the
plain-text tasks, one logged ``client.complete``), tagged for the debug log.

Every function returns a result object and never raises: a failed call is ``ok=False`` / ``None``
and the caller shows a safe fallback message.
"""
from __future__ import annotations

import time
from typing import Any

from core.debuglog import CallTags, append, make_record
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import SessionState
from core.engine import structured_call
from core.llm.base import LLMRequest, classify_exception
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
    client = ctx.client
    request = LLMRequest(messages=[dict(m) for m in messages], task=task, temperature=temperature,
                         timeout=getattr(client, "timeout", 60.0), context=dict(context))
    provider = getattr(client, "name", type(client).__name__)
    started = time.perf_counter()
    try:
        response = client.complete(request)
    except Exception as exc:  # noqa: BLE001 - a failed call is a None result
        err = classify_exception(exc)
        append(ctx.log, make_record(tags=tags(session, step, prompt), provider=provider,
                                    model=getattr(client, "model", ""), strategy="plain_text", attempt=1, kind="call",
                                    request=request, raw=None, outcome=f"provider_error:{err.kind}", errors=[str(err)],
                                    latency_ms=(time.perf_counter() - started) * 1000))
        return None
    raw = response.content if response.content is not None else response.tool_arguments
    append(ctx.log, make_record(tags=tags(session, step, prompt), provider=provider,
                                model=response.model or getattr(client, "model", ""), strategy="plain_text",
                                attempt=1, kind="call", request=request, raw=raw,
                                outcome="ok" if raw else "empty", latency_ms=response.latency_ms, usage=response.usage))
    return raw or None
