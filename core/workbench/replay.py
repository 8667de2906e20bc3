"""Replay a recorded call with an edited prompt, payload, temperature, model or strategy chain, judged
by our own validator; and batch replay of one change over many records."""
from __future__ import annotations

import copy
import importlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from core.debuglog import CallTags
from core.engine import structured_call, text_call
from core.llm.strategies import ALL_STRATEGIES, SCHEMA_INSTRUCTION_MARKER
from core.parsing import parse_with_stage
from core.prompts import load_prompt
from core.results import StructuredResult
from core.schemas import load_schema, to_strict_schema
from core.validation import parse_and_validate_turn, validate_json
from core.workbench.diff import changed_fields, output_diff
from core.workbench.records import METHOD_BY_TASK, record_method, record_task

FLOW_PACKAGES = {"knowledge": "core.knowledge", "diagnosis": "core.diagnosis", "faq": "core.faq"}
MAX_BATCH = 200


def _repair_head() -> str:
    return load_prompt("repair_instruction").split("{{raw_output}}", 1)[0].strip()


def base_messages(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages of the original request before the engine dressed them: a repair exchange and the
    prompt_extract schema instruction are taken off."""
    messages = [dict(m) for m in record.get("messages") or [] if isinstance(m, dict)]
    head = _repair_head()
    while (len(messages) >= 2 and messages[-1].get("role") == "user" and messages[-2].get("role") == "assistant"
           and head and str(messages[-1].get("content") or "").strip().startswith(head[:40])):
        messages = messages[:-2]
    for m in reversed(messages):
        if m.get("role") == "user":
            content = str(m.get("content") or "")
            cut = content.find(SCHEMA_INSTRUCTION_MARKER)
            if cut >= 0:
                m["content"] = content[:cut].rstrip()
            break
    return messages


def system_prompt_of(messages: Sequence[Mapping[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")


def user_payload_of(messages: Sequence[Mapping[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")


def edit_messages(messages: Sequence[Mapping[str, Any]], *, system_prompt: str | None = None,
                  user_payload: str | None = None, replace_text: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """``messages`` with the system prompt and / or the last user message replaced, then every
    ``(old, new)`` of ``replace_text`` applied to every message."""
    out = [dict(m) for m in messages]
    if system_prompt is not None:
        index = next((i for i, m in enumerate(out) if m.get("role") == "system"), None)
        if index is None:
            out.insert(0, {"role": "system", "content": system_prompt})
        else:
            out[index]["content"] = system_prompt
    if user_payload is not None:
        index = next((i for i in range(len(out) - 1, -1, -1) if out[i].get("role") == "user"), None)
        if index is None:
            out.append({"role": "user", "content": user_payload})
        else:
            out[index]["content"] = user_payload
    for old, new in replace_text:
        if old:
            for m in out:
                if isinstance(m.get("content"), str):
                    m["content"] = m["content"].replace(old, new)
    return out


def carried_schema(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The schema the record sent over the wire (``response_format`` json_schema or the tool's parameters)."""
    fmt = record.get("response_format") or {}
    if isinstance(fmt, dict):
        schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt.get("json_schema"), dict) else None
        if isinstance(schema, dict):
            return schema
    for tool in record.get("tools") or []:
        params = ((tool or {}).get("function") or {}).get("parameters")
        if isinstance(params, dict):
            return params
    return None


def task_schema(task: str) -> dict[str, Any] | None:
    if not task or not re.fullmatch(r"[a-z0-9_]{1,80}", task):
        return None
    try:
        return load_schema(task)
    except (OSError, ValueError):
        return None


@dataclass
class Judge:
    """How a task's output is judged: ``schema`` (None = a plain-text task) and ``validate(raw)``."""

    schema: dict[str, Any] | None
    wire_schema: dict[str, Any] | None
    validate: Callable[[str], StructuredResult] | None
    source: str  # "file:<task>" / "carried" / "text"


def judge_for(record: Mapping[str, Any]) -> Judge:
    task = record_task(record)
    carried = carried_schema(record)
    schema = task_schema(task)
    if schema is not None:
        validate: Callable[[str], StructuredResult] = lambda raw, s=schema: validate_json(raw, s)
        if task == "knowledge_llm_turn":
            entry = load_schema("knowledge_llm_entry")
            validate = lambda raw, s=schema: parse_and_validate_turn(raw, s, entry)  # noqa: E731
        return Judge(schema, carried or to_strict_schema(schema), validate, f"file:{task}")
    if carried is not None:
        return Judge(carried, carried, lambda raw, s=carried: validate_json(raw, s), "carried")
    return Judge(None, None, None, "text")


def judge_output(judge: Judge, raw: str | None) -> StructuredResult:
    """Validate ``raw`` like the engine does: the whole text, else the object extracted from it."""
    if raw is None:
        return StructuredResult(ok=False, raw="", error_type="no_output", errors=["出力がありません"])
    if judge.validate is None:
        return StructuredResult(ok=bool(raw.strip()), raw=raw, error_type=None if raw.strip() else "empty")
    result = judge.validate(raw)
    if result.ok or result.error_type != "parse_error":
        return result
    extracted = parse_with_stage(raw)
    if extracted.data is None:
        return result
    retried = judge.validate(json.dumps(extracted.data, ensure_ascii=False))
    retried.raw, retried.parse_stage = raw, extracted.stage
    return retried


@dataclass
class ReplayResult:
    """Old and new output of one recorded call, each with our validator's verdict, and their diff."""

    record_id: Any
    task: str
    judge: str
    messages: list[dict[str, Any]]
    temperature: float
    model: str
    strategies: list[str]
    old_raw: str
    old: StructuredResult
    old_method: str
    new_raw: str
    new: StructuredResult
    new_method: str
    attempts: int
    repairs: int
    latency_ms: float
    diff: list[str] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed_fields(self) -> list[str]:
        return changed_fields(self.old.data, self.new.data)

    def summary(self) -> dict[str, Any]:
        return {"record_id": self.record_id, "task": self.task, "valid_before": self.old.ok, "valid_after": self.new.ok,
                "method_before": self.old_method, "method_after": self.new_method, "attempts": self.attempts,
                "repairs": self.repairs, "changed_fields": ", ".join(self.changed_fields),
                "errors_after": " / ".join(self.new.errors)[:300]}


def with_model(client: Any, model: str | None) -> Any:
    """A shallow copy of ``client`` asking ``model`` (the client itself when no model is given)."""
    if not model or model == getattr(client, "model", None):
        return client
    other = copy.copy(client)
    other.model = model
    return other


def replay(record: Mapping[str, Any], *, system_prompt: str | None = None, user_payload: str | None = None,
           temperature: float | None = None, model: str | None = None, strategies: Sequence[str] | None = None,
           client: Any, replace_text: Sequence[tuple[str, str]] = (), max_repairs: int = 2) -> ReplayResult:
    """Run the recorded request again (edited as given) through the engine on ``client``."""
    task = record_task(record)
    judge = judge_for(record)
    if record.get("flow") in FLOW_PACKAGES:  # the flow's package registers its offline policies
        importlib.import_module(FLOW_PACKAGES[record["flow"]])
    messages = edit_messages(base_messages(record), system_prompt=system_prompt, user_payload=user_payload,
                             replace_text=replace_text)
    temp = float(temperature if temperature is not None else record.get("temperature") or 0.2)
    chain = [s for s in (strategies or []) if s in ALL_STRATEGIES]
    target = with_model(client, model)
    tags = CallTags(session_id=str(record.get("session_id") or ""), flow=str(record.get("flow") or ""),
                    step=f"replay:{record.get('step') or ''}"[:60], prompt=str(record.get("prompt") or ""))
    log: list[dict[str, Any]] = []
    context = dict(record.get("context") or {})
    if judge.schema is None:
        raw = text_call(target, messages, task=task, context=context, temperature=temp, log=log, tags=tags)
        new = judge_output(judge, raw)
        new.attempts, new.method = len(log), "plain_text"
        new_raw = raw or ""
    else:
        new = structured_call(target, messages, schema=judge.schema, name=task or "output", validate=judge.validate,
                              wire_schema=judge.wire_schema, strategies=chain or None, max_repairs=max_repairs,
                              context=context, temperature=temp, log=log, tags=tags)
        new_raw = new.raw or ""
    old_raw = str(record.get("raw_output") or "")
    old = judge_output(judge, record.get("raw_output"))
    return ReplayResult(
        record_id=record.get("id"), task=task, judge=judge.source, messages=messages, temperature=temp,
        model=getattr(target, "model", ""), strategies=chain or list(getattr(target, "strategies", None) or ALL_STRATEGIES),
        old_raw=old_raw, old=old, old_method=record_method(record), new_raw=new_raw, new=new,
        new_method=METHOD_BY_TASK.get(task, new.method or ""), attempts=new.attempts, repairs=new.repairs,
        latency_ms=round(sum(float(r.get("latency_ms") or 0) for r in log), 1),
        diff=output_diff(old_raw, old.data, new_raw, new.data), log=log)


# ---- batch replay --------------------------------------------------------------------------------
BATCH_COLUMNS = ["record_id", "task", "valid_before", "valid_after", "method_before", "method_after", "attempts",
                 "repairs", "changed_fields", "errors_after"]


def batch_replay(records: Sequence[Mapping[str, Any]], change: Mapping[str, Any], client: Any, *,
                 limit: int = MAX_BATCH, progress: Callable[[int, int], None] | None = None):
    """Replay each record (at most ``limit``) with the same ``change`` (the keyword arguments of
    :func:`replay`: system_prompt, temperature, model, strategies, replace_text, max_repairs). One row
    each: valid before / after, methods, attempts, repairs, changed fields."""
    allowed = {"system_prompt", "user_payload", "temperature", "model", "strategies", "replace_text", "max_repairs"}
    unknown = set(change) - allowed
    if unknown:
        raise ValueError(f"unknown change keys: {sorted(unknown)}")
    chosen = list(records)[:limit]
    rows = []
    for i, record in enumerate(chosen):
        rows.append(replay(record, client=client, **dict(change)).summary())
        if progress is not None:
            progress(i + 1, len(chosen))
    return pd.DataFrame(rows, columns=BATCH_COLUMNS)


def batch_summary(frame) -> dict[str, Any]:
    """Counts of a :func:`batch_replay` table: valid before / after, fixed, broken, method mix, repairs."""
    if frame is None or len(frame) == 0:
        return {"total": 0, "valid_before": 0, "valid_after": 0, "fixed": 0, "broken": 0, "methods": {}, "repairs": 0}
    return {"total": int(len(frame)), "valid_before": int(frame["valid_before"].sum()),
            "valid_after": int(frame["valid_after"].sum()),
            "fixed": int((~frame["valid_before"] & frame["valid_after"]).sum()),
            "broken": int((frame["valid_before"] & ~frame["valid_after"]).sum()),
            "methods": {str(k): int(v) for k, v in frame["method_after"].value_counts().items()},
            "repairs": int(frame["repairs"].sum())}
