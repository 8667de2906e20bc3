"""Recorded model calls as a filterable table: task, method, error type and JST date of each record."""
from __future__ import annotations

from datetime import date
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from core.debuglog import METHOD_BY_TASK, error_type, record_method, record_task  # noqa: F401 - re-exported
from core.llm.strategies import ALL_STRATEGIES
from core.parsing import parse_with_stage
from core.schema_versions import version_of
from core.text.jst import jst_date

METHODS = (*ALL_STRATEGIES, "tag_fallback", "ai_judge")
FRAME_COLUMNS = ["id", "time", "date", "session_id", "flow", "step", "task", "prompt", "prompt_version", "provider",
                 "model", "method", "strategy", "judgment_method", "kind", "attempt", "outcome", "error_type",
                 "latency_ms", "prompt_tokens", "completion_tokens", "total_tokens", "owner"]


def records_frame(records: Sequence[Mapping[str, Any]]):
    """A pandas DataFrame (index = position in ``records``) of every filterable column."""
    rows = []
    for r in records:
        usage = r.get("usage") or {}
        rows.append({
            "id": r.get("id"), "time": r.get("time"), "date": jst_date(r.get("time")), "session_id": r.get("session_id"),
            "flow": r.get("flow"), "step": r.get("step"), "task": record_task(r), "prompt": r.get("prompt"),
            "prompt_version": r.get("prompt_version") or "", "provider": r.get("provider"), "model": r.get("model"),
            "method": record_method(r), "strategy": r.get("strategy"), "judgment_method": r.get("judgment_method"),
            "kind": r.get("kind"), "attempt": r.get("attempt"), "outcome": r.get("outcome"),
            "error_type": error_type(r.get("outcome")), "latency_ms": r.get("latency_ms"),
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
            "total_tokens": usage.get("total_tokens"), "owner": r.get("owner"),
        })
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def filter_records(frame, *, conversation: str = "", flows: Iterable[str] = (), steps: Iterable[str] = (),
                   tasks: Iterable[str] = (), providers: Iterable[str] = (), models: Iterable[str] = (),
                   methods: Iterable[str] = (), outcomes: Iterable[str] = (), error_types: Iterable[str] = (),
                   date_from: date | None = None, date_to: date | None = None, failed_only: bool = False):
    """The rows of ``records_frame`` matching every filter given (an empty filter matches all)."""
    mask = frame.index == frame.index
    if conversation:
        mask &= frame["session_id"].fillna("").astype(str).str.contains(conversation, regex=False)
    for column, wanted in (("flow", flows), ("step", steps), ("task", tasks), ("provider", providers),
                           ("model", models), ("method", methods), ("outcome", outcomes),
                           ("error_type", error_types)):
        wanted = list(wanted)
        if wanted:
            mask &= frame[column].isin(wanted)
    if date_from is not None:
        mask &= frame["date"].map(lambda d: d is not None and d >= date_from)
    if date_to is not None:
        mask &= frame["date"].map(lambda d: d is not None and d <= date_to)
    if failed_only:
        mask &= frame["outcome"] != "ok"
    return frame[mask]


def output_schema_version(record: Mapping[str, Any]) -> str | None:
    """The ``schema_version`` the record's output declares (``control.schema_version`` or top level)."""
    data = parse_with_stage(record.get("raw_output") or "").data
    if not isinstance(data, dict):
        return None
    if version_of(data):  # seed 003 §8 registry
        return version_of(data)
    control = data.get("control")
    version = control.get("schema_version") if isinstance(control, dict) else None
    return str(version or data.get("schema_version") or "") or None
