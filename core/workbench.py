"""The prompt-tuning workbench (issue #9): filter recorded model calls, replay them with an edited
prompt, compare the outputs, batch-replay a change, turn a conversation into a ``core.eval`` scenario,
and save an edited prompt as a new version of its file (admins only, recorded with who and when).

The judge is always our own validator: a replay validates the old and the new output against the
task's schema file (``schemas/<task>.schema.json``, with the knowledge turn's entry check), or, when
the record names no known task, the schema it carried (``response_format`` / ``tools``). No Streamlit.
"""
from __future__ import annotations

import copy
import difflib
import hashlib
import importlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from core.debuglog import CallTags
from core.engine import structured_call, text_call
from core.llm.strategies import ALL_STRATEGIES, SCHEMA_INSTRUCTION_MARKER
from core.parsing import parse_with_stage
from core.paths import PROMPTS_DIR
from core.pii import mask_pii
from core.prompts import load_prompt, prompt_names, reload_prompts
from core.results import StructuredResult
from core.schemas import load_schema, to_strict_schema
from core.validation import ENTRY_FIELDS, validate_json

JST = timezone(timedelta(hours=9))
# The method a record stands for: its strategy, or the seed-004 judgment stage its task is.
METHOD_BY_TASK = {"choice_tag": "tag_fallback", "choice_evaluation": "ai_judge"}
METHODS = (*ALL_STRATEGIES, "tag_fallback", "ai_judge")
FLOW_PACKAGES = {"knowledge": "core.knowledge", "diagnosis": "core.diagnosis", "faq": "core.faq"}
DIFF_VALUE_CHARS = 120  # a value in a diff line is cut to this many characters
MAX_DIFF_LINES = 300
MAX_TEXT_DIFF_CHARS = 20_000  # a non-JSON output is compared on its head only
MAX_BATCH = 200
SCENARIO_MESSAGE_CHARS = 4000
PROMPT_NAME = re.compile(r"^[a-z0-9_]{1,80}(\.json)?$")
FRAME_COLUMNS = ["id", "time", "date", "session_id", "flow", "step", "task", "prompt", "prompt_version", "provider",
                 "model", "method", "strategy", "judgment_method", "kind", "attempt", "outcome", "error_type",
                 "latency_ms", "prompt_tokens", "completion_tokens", "total_tokens", "owner"]


# ---- records -------------------------------------------------------------------------------------
def record_task(record: Mapping[str, Any]) -> str:
    """The task of a record: its ``task``, else the schema / tool name it sent, else its prompt."""
    if record.get("task"):
        return str(record["task"])
    fmt = record.get("response_format") or {}
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict) and fmt["json_schema"].get("name"):
        return str(fmt["json_schema"]["name"])
    for tool in record.get("tools") or []:
        name = ((tool or {}).get("function") or {}).get("name")
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


def jst_date(iso: str | None) -> date | None:
    try:
        return datetime.fromisoformat(str(iso)).astimezone(JST).date()
    except (TypeError, ValueError):
        return None


def records_frame(records: Sequence[Mapping[str, Any]]):
    """A pandas DataFrame (index = position in ``records``) of every filterable column."""
    import pandas as pd

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
    try:  # seed 003 §8 registry, when present
        from core.schema_versions import version_of
    except ImportError:  # pragma: no cover - the registry is part of the repository
        version_of = None
    if version_of is not None and version_of(data):
        return version_of(data)
    control = data.get("control")
    version = control.get("schema_version") if isinstance(control, dict) else None
    return str(version or data.get("schema_version") or "") or None


# ---- replay --------------------------------------------------------------------------------------
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
            from core.validation import parse_and_validate_turn

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


# ---- diffs ---------------------------------------------------------------------------------------
def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= DIFF_VALUE_CHARS else text[: DIFF_VALUE_CHARS - 1] + "…"


def _key_path(path: str, key: Any) -> str:
    key = str(key)
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def json_diff(old: Any, new: Any, *, limit: int = MAX_DIFF_LINES) -> list[str]:
    """Readable differences ``path: old → new`` (``（なし）`` for a side without the path), in
    document order; at most ``limit`` lines (then one line saying how many were left out)."""
    lines: list[str] = []
    missing = "（なし）"

    def walk(path: str, a: Any, b: Any, depth: int) -> None:
        if isinstance(a, dict) and isinstance(b, dict) and depth < 50:
            for key in list(a) + [k for k in b if k not in a]:
                if key not in b:
                    lines.append(f"{_key_path(path, key)}: {_show(a[key])} → {missing}")
                elif key not in a:
                    lines.append(f"{_key_path(path, key)}: {missing} → {_show(b[key])}")
                else:
                    walk(_key_path(path, key), a[key], b[key], depth + 1)
        elif isinstance(a, list) and isinstance(b, list) and depth < 50:
            for i in range(max(len(a), len(b))):
                here = f"{path}[{i}]"
                if i >= len(b):
                    lines.append(f"{here}: {_show(a[i])} → {missing}")
                elif i >= len(a):
                    lines.append(f"{here}: {missing} → {_show(b[i])}")
                else:
                    walk(here, a[i], b[i], depth + 1)
        elif a != b or type(a) is not type(b):
            lines.append(f"{path}: {_show(a)} → {_show(b)}")

    walk("$", old, new, 0)
    if len(lines) > limit:
        return lines[:limit] + [f"…（ほか {len(lines) - limit} 件の差分）"]
    return lines


def changed_fields(old: Any, new: Any) -> list[str]:
    """The top-level fields whose value differs (all of them when one side is not an object)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if old == new else ["$"]
    return [k for k in list(old) + [k for k in new if k not in old] if old.get(k, ...) != new.get(k, ...)]


def text_diff(old: str, new: str, *, limit: int = MAX_DIFF_LINES) -> list[str]:
    lines = list(difflib.unified_diff((old or "")[:MAX_TEXT_DIFF_CHARS].splitlines(),
                                      (new or "")[:MAX_TEXT_DIFF_CHARS].splitlines(),
                                      "旧出力", "新出力", lineterm="", n=1))
    return lines[:limit] + ([f"…（ほか {len(lines) - limit} 行）"] if len(lines) > limit else [])


def output_diff(old_raw: str, old_data: Any, new_raw: str, new_data: Any) -> list[str]:
    """The JSON diff when both outputs are JSON objects, else a line diff of the texts."""
    if old_data is None:
        old_data = parse_with_stage(old_raw or "").data
    if new_data is None:
        new_data = parse_with_stage(new_raw or "").data
    if isinstance(old_data, dict) and isinstance(new_data, dict):
        return json_diff(old_data, new_data)
    return text_diff(old_raw, new_raw)


# ---- batch replay --------------------------------------------------------------------------------
BATCH_COLUMNS = ["record_id", "task", "valid_before", "valid_after", "method_before", "method_after", "attempts",
                 "repairs", "changed_fields", "errors_after"]


def batch_replay(records: Sequence[Mapping[str, Any]], change: Mapping[str, Any], client: Any, *,
                 limit: int = MAX_BATCH, progress: Callable[[int, int], None] | None = None):
    """Replay each record (at most ``limit``) with the same ``change`` (the keyword arguments of
    :func:`replay`: system_prompt, temperature, model, strategies, replace_text, max_repairs). One row
    each: valid before / after, methods, attempts, repairs, changed fields."""
    import pandas as pd

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


# ---- promote a conversation to a scenario --------------------------------------------------------
def _message(text: Any) -> str:
    return mask_pii(str(text or "")[:SCENARIO_MESSAGE_CHARS]).strip()


def _last(turns: Sequence[Mapping[str, Any]], role: str) -> Mapping[str, Any] | None:
    return next((t for t in reversed(turns) if t.get("role") == role), None)


def conversation_turns(store: Any, conversation_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """``(conversation, scenario turns, final state)`` of a stored conversation. User text is
    PII-masked (a scenario file is shared and may be committed)."""
    conversation = store.get_conversation(conversation_id)
    if conversation is None:
        raise LookupError(f"会話 {conversation_id} は見つかりません。")
    flow = conversation["flow"]
    rows = store.list_turns(conversation_id)
    turns: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    if flow == "knowledge":
        confirmed = [e for e in store.list_entries(conversation_id=conversation_id) if e.get("status") == "confirmed"]
        confirmed_at = sorted(str(e.get("confirmed_at") or "") for e in confirmed)
        for row in rows:
            if confirmed_at and str(row.get("created_at") or "") > confirmed_at[0]:
                turns.append({"action": "confirm"})  # the operator confirmed the draft here
                confirmed_at = []
            if row["role"] == "user" and (row.get("user_input") or "").strip():
                turns.append({"message": _message(row["user_input"])})
        if confirmed_at:
            turns.append({"action": "confirm"})
        last = next((r for r in reversed(rows) if r["role"] == "assistant" and r.get("ok")), None)
        turn = (last or {}).get("turn_json") or {}
        # The entry under test, as core.knowledge.scenario picks it: the confirmed one, else the newest draft.
        entry = confirmed[-1] if confirmed else next(iter(store.conversation_outputs(conversation_id)), None)
        final = {"phase": (turn.get("state") or {}).get("phase"), "mode": (turn.get("control") or {}).get("mode"),
                 "knowledge": {f: str(entry.get(f) or "") for f in ENTRY_FIELDS} if entry else {},
                 "confirmed": bool(confirmed), "schema_version": _schema_version(turn)}
    elif flow == "faq":
        for row in rows:
            if (row.get("user_input") or "").strip():
                turns.append({"message": _message(row["user_input"])})
        last = (rows[-1].get("turn_json") if rows else None) or {}
        final = {"outcome": last.get("outcome"), "citations": list(last.get("citations") or []),
                 "message": last.get("message") or ""}
    elif flow == "diagnosis":
        previous_step = None
        for row in rows:
            if row["role"] == "assistant":
                previous_step = row.get("step")
            elif (row.get("user_input") or "").strip() and previous_step not in ("vehicle_id", "photo_confirm"):
                turns.append({"message": _message(row["user_input"])})
        state = conversation.get("state") or {}
        session = state.get("session") or {}
        response = state.get("last_response") or {}
        urgency = response.get("urgency") or {}
        final = {"vehicle": session.get("vehicle_id"), "step": response.get("current_step") or session.get("current_step"),
                 "urgency": urgency.get("level"), "can_drive": urgency.get("can_drive"),
                 "message": (response.get("prompt") or {}).get("message") or ""}
    else:
        raise ValueError(f"unknown flow: {flow}")
    return conversation, turns, final


def _schema_version(turn: Mapping[str, Any]) -> str | None:
    try:
        from core.schema_versions import describe
    except ImportError:  # pragma: no cover
        return (turn.get("control") or {}).get("schema_version")
    return describe(turn) if turn else None


def suggest_expectations(store: Any, conversation_id: str) -> dict[str, Any]:
    """Expectations the conversation's end state satisfies, for the operator to tick."""
    conversation, _, final = conversation_turns(store, conversation_id)
    flow = conversation["flow"]
    if flow == "knowledge":
        fields = [k for k, v in (final.get("knowledge") or {}).items() if str(v or "").strip()]
        out = {"phase": final.get("phase"), "mode": final.get("mode")}
        if fields:
            out["knowledge_fields"] = fields
        if final.get("confirmed"):
            out["confirmed"] = True
    elif flow == "faq":
        out = {"outcome": final.get("outcome")}
        if final.get("citations"):
            out["citations_min"] = len(final["citations"])
    else:
        out = {"step": final.get("step"), "urgency": final.get("urgency"), "can_drive": final.get("can_drive")}
    known = known_expectations()  # only what the scenario runner can check
    return {k: v for k, v in out.items() if k in known and (v is not None or k in ("urgency", "can_drive"))}


def known_expectations() -> set[str]:
    from core.eval.expectations import CHECKS

    return set(CHECKS)


def promote(store: Any, conversation_id: str, expectations: Mapping[str, Any], *, name: str | None = None,
            turns: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A ``core.eval`` scenario replaying the stored conversation, expecting ``expectations``
    (keys the runner knows; ValueError otherwise). ``turns`` overrides the conversation's turns."""
    conversation, found, final = conversation_turns(store, conversation_id)
    flow = conversation["flow"]
    expect = {k: v for k, v in dict(expectations).items() if v != "" and v != []}
    if not expect:
        raise ValueError("期待値を 1 つ以上選んでください。")
    unknown = sorted(set(expect) - known_expectations())
    if unknown:
        raise ValueError(f"シナリオ実行器が知らない期待値です: {', '.join(unknown)}")
    scenario: dict[str, Any] = {"name": name or f"{flow} {conversation_id}（{(conversation.get('title') or '').strip()[:40]}）",
                                "flow": flow}
    if flow == "diagnosis" and final.get("vehicle"):
        scenario["vehicle"] = final["vehicle"]
    chosen = [dict(t) for t in (turns if turns is not None else found)]
    if not any("message" in t for t in chosen):
        raise ValueError("この会話には再生できるユーザーの発話がありません。")
    scenario["turns"] = chosen
    scenario["expect"] = expect
    return scenario


def scenario_yaml(scenario: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, comment: str = "") -> str:
    """The YAML text of a scenario file (a list of scenarios), Japanese kept as is."""
    import yaml

    scenarios = [dict(scenario)] if isinstance(scenario, Mapping) else [dict(s) for s in scenario]
    head = "".join(f"# {line}\n" for line in comment.splitlines() if line.strip())
    return head + yaml.safe_dump(scenarios, allow_unicode=True, sort_keys=False, width=1000)


def save_scenario(scenario: Mapping[str, Any], path: str | Path, *, comment: str = "") -> Path:
    """Write ``scenario`` to ``path``; an existing scenario file gets it appended (a scenario of the
    same name is replaced). The file is replaced atomically."""
    import yaml

    path = Path(path)
    scenarios: list[dict[str, Any]] = []
    if path.exists():
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict) and isinstance(loaded.get("scenarios"), list):
            loaded = loaded["scenarios"]
        if loaded is not None and not isinstance(loaded, list):
            raise ValueError(f"{path.name} はシナリオのリストではありません。")
        scenarios = [s for s in loaded or [] if not (isinstance(s, dict) and s.get("name") == scenario.get("name"))]
    scenarios.append(dict(scenario))
    _atomic_write(path, scenario_yaml(scenarios, comment=comment))
    return path


def scenario_dir() -> Path:
    """Where promoted scenarios are saved: ``KAIWA_SCENARIO_DIR``, else ``tests/scenarios/``."""
    from core.paths import ROOT

    return Path(os.environ.get("KAIWA_SCENARIO_DIR") or ROOT / "tests" / "scenarios")


def run_scenario_check(scenario: Mapping[str, Any], provider: str = "offline") -> tuple[bool, list[str]]:
    """Play ``scenario`` with ``core.eval`` (offline by default): (passed, failures)."""
    from core.eval.runner import make_client, run_scenario

    result = run_scenario(dict(scenario), lambda: make_client(provider))
    return result.passed, list(result.failures)


def scenario_filename(text: str) -> str:
    """A safe file name ``<slug>.yaml`` (ASCII letters, digits, ``_`` and ``-`` only)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", (text or "").strip())[:60].strip("_-")
    return f"{slug or 'promoted'}.yaml"


# ---- prompt versions -----------------------------------------------------------------------------
def content_version(content: str) -> str:
    """The version ``core.prompts.prompt_version`` gives a file with this content."""
    return hashlib.sha256(content.strip().encode("utf-8")).hexdigest()[:12]


def prompt_path(name: str, prompts_dir: Path = PROMPTS_DIR) -> Path:
    if not PROMPT_NAME.fullmatch(name or ""):
        raise ValueError(f"プロンプト名が不正です: {name!r}")
    return prompts_dir / (name if "." in name else f"{name}.md")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_prompt_version(name: str, content: str, identity: Any, store: Any, *, note: str = "",
                        prompts_dir: Path | None = None) -> dict[str, Any]:
    """Write ``content`` as the new ``prompts/<name>.md`` and record the version with who / when (and
    an audit row). Only an explicit call does this; PermissionError without ``prompt.write``,
    ValueError for an unknown prompt name or empty content. The previous content is kept as a version
    too (the first time a file is saved), so every saved state can be looked up by its hash."""
    from core.store.prompt_versions import add_prompt_version, get_prompt_version

    can = getattr(identity, "can", None)
    if not callable(can) or not can("prompt.write"):
        raise PermissionError("プロンプトの保存（prompt.write）は管理者のみ行えます。")
    directory = prompts_dir or PROMPTS_DIR
    path = prompt_path(name, directory)
    if prompts_dir is None and name not in prompt_names():
        raise ValueError(f"プロンプト {name} は存在しません。")
    if not content.strip():
        raise ValueError("空のプロンプトは保存できません。")
    previous_text = path.read_text(encoding="utf-8") if path.exists() else None
    previous = content_version(previous_text) if previous_text is not None else None
    version = content_version(content)
    if previous_text is not None and get_prompt_version(store, name, previous) is None:
        add_prompt_version(store, name, previous_text, previous, identity, note="（保存前の内容）")
    text = content if content.endswith("\n") else content + "\n"
    saved = add_prompt_version(store, name, content, version, identity, previous_version=previous, note=note,
                               write=lambda: _atomic_write(path, text))
    reload_prompts()
    return saved
