"""The debug log for prompt tuning: one record per model call (Langfuse-style generation record).

Records are plain dicts appended to a list (``st.session_state.debug_logs`` in the console, any
list in a CLI or test): no external I/O. Every string is scrubbed of personal data and secrets
when the record is made, so nothing sensitive is ever stored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, MutableSequence

from core.llm.base import LLMRequest
from core.prompts import prompt_versions, served_version
from core.text.pii import KNOWN_SECRETS, scrub

MAX_RAW_CHARS = 256 * 1024  # a record keeps at most this much of an output (the engine caps earlier)
MAX_ERROR_BODY_CHARS = 2000
MAX_CONTEXT_CHARS = 64 * 1024  # a larger request context is not kept


@dataclass
class CallTags:
    """Who made the call: shown and filterable in the debug panel."""

    session_id: str = ""
    flow: str = ""
    step: str = ""
    prompt: str = ""


def make_record(*, tags: CallTags, provider: str, model: str, strategy: str, attempt: int, kind: str,
                request: LLMRequest, raw: str | None, outcome: str, errors: list[str] | None = None,
                latency_ms: float = 0.0, usage: dict[str, Any] | None = None,
                parse_stage: str | None = None, raw_bytes: int | None = None, error_body: str | None = None,
                status: int | None = None, model_configured: str = "", call: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """One scrubbed record. ``raw`` longer than ``MAX_RAW_CHARS`` keeps its head; ``raw_bytes`` (the
    full size of an output the engine capped) and a provider's ``error_body`` / HTTP ``status`` are
    kept when given. ``model`` is the id the server reported (``model_configured`` the one asked for,
    kept when they differ); ``call`` holds the request's limits and what happened on the wire: output
    limit and its parameter name, context size, prompt estimate, what fitting cut, stream timings,
    finish reason, the timer that fired."""
    if raw is not None and len(raw) > MAX_RAW_CHARS:
        raw_bytes = raw_bytes or len(raw.encode("utf-8", "replace"))
        raw = raw[:MAX_RAW_CHARS]
    stamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    record = {
        "task": request.task,  # the schema / offline-policy name: what a replay validates against
        "temperature": request.temperature,
        "provider": provider,
        "model": model,
        "strategy": strategy,
        "attempt": attempt,
        "kind": kind,  # call / repair / retry
        "messages": request.messages,
        "response_format": request.response_format,
        "tools": request.tools,
        "raw_output": raw,
        "outcome": outcome,  # ok / parse_error / schema_error / entry_schema_error / provider_error:<kind>
        "errors": list(errors or []),
        "parse_stage": parse_stage,
        "latency_ms": round(latency_ms, 1),
        "usage": dict(usage or {}),
        "call": dict(call or {}),
    }
    if model_configured and model_configured != model:
        record["model_configured"] = model_configured
    if raw_bytes is not None:
        record["raw_output_bytes"] = raw_bytes  # the output was capped: raw_output is its head
    if status is not None:
        record["http_status"] = status
    if error_body:
        record["error_body"] = error_body[:MAX_ERROR_BODY_CHARS]
    if request.context:  # the facts an offline policy answers from: a workbench replay needs them
        context = json.dumps(request.context, ensure_ascii=False, default=str)
        if len(context) <= MAX_CONTEXT_CHARS:
            record["context"] = json.loads(context)
    record = scrub(record, tuple(KNOWN_SECRETS))
    # Added after scrubbing: the time and the tags are what the console made (a generated session id's hex
    # digit run such as "09012345678" must not be masked as a phone number; the time is new on every call,
    # so scrubbing it was a masking pass per record), and hex digests are no personal data.
    record = {"time": stamp, "session_id": tags.session_id, "flow": tags.flow, "step": tags.step,
              "prompt": tags.prompt, **record}
    record["prompt_version"] = served_version(tags.prompt) if tags.prompt else ""  # the text this call used
    record["prompt_versions"] = prompt_versions()
    return record


# The method a record stands for: its strategy, or the seed-004 judgment stage its task is.
METHOD_BY_TASK = {"choice_tag": "tag_fallback", "choice_evaluation": "ai_judge"}


def record_task(record: Mapping[str, Any]) -> str:
    """The task of a record: its ``task``, else the schema / tool name it sent, else its prompt."""
    if record.get("task"):
        return str(record["task"])
    fmt = record.get("response_format") or {}
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict) and fmt["json_schema"].get("name"):
        return str(fmt["json_schema"]["name"])
    for tool in record.get("tools") or []:
        name = ((tool or {}).get("function") or {}).get("name") if isinstance(tool, dict) else None
        if name:
            return str(name)
    return str(record.get("prompt") or "")


def record_method(record: Mapping[str, Any]) -> str:
    return METHOD_BY_TASK.get(record_task(record), str(record.get("strategy") or ""))


def error_type(outcome: str | None) -> str:
    """"" for ok; the provider error kind for ``provider_error:<kind>``; else the outcome itself."""
    outcome = str(outcome or "")
    if outcome in ("", "ok"):
        return ""
    return outcome.split(":", 1)[1] if outcome.startswith("provider_error:") else outcome


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


def record_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the debug log filters on and analytics group by, read from a record once (when it is stored):
    task, method, error type, prompt version, kind (call / repair / retry), attempt and latency."""
    attempt = _number(record.get("attempt"))
    return {"task": record_task(record)[:100], "method": record_method(record)[:40],
            "error_type": error_type(record.get("outcome"))[:80],
            "prompt_version": str(record.get("prompt_version") or "")[:64], "kind": str(record.get("kind") or "")[:20],
            "attempt": int(attempt) if attempt is not None else None,
            "latency_ms": _number(record.get("latency_ms"))}


def append(log: MutableSequence[dict[str, Any]] | None, record: dict[str, Any]) -> None:
    if log is not None:
        log.append(record)


def records_table(records: list[dict[str, Any]]):
    """A pandas DataFrame of the records' summary columns (for the filterable table)."""
    import pandas as pd

    rows = [{
        "time": r.get("time"), "session_id": r.get("session_id"), "flow": r.get("flow"), "step": r.get("step"),
        "provider": r.get("provider"), "model": r.get("model"), "strategy": r.get("strategy"),
        "attempt": r.get("attempt"), "kind": r.get("kind"), "outcome": r.get("outcome"),
        "latency_ms": r.get("latency_ms"), "total_tokens": (r.get("usage") or {}).get("total_tokens"),
        "errors": " / ".join(r.get("errors") or []),
    } for r in records]
    return pd.DataFrame(rows, columns=["time", "session_id", "flow", "step", "provider", "model", "strategy",
                                       "attempt", "kind", "outcome", "latency_ms", "total_tokens", "errors"])


def to_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
