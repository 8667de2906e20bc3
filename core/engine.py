"""The structured-turn engine: call → parse → validate → repair, over a chain of strategies.

``structured_call`` is the one path every flow uses. For each strategy of the chain (default
structured_output → tool_call → prompt_extract) it calls the client, validates the reply with
jsonschema (the only judge of validity) and sends up to ``max_repairs`` repair requests. It moves to
the next strategy only when the provider rejects the method itself (400/422, no tool call); a
missing model (404), a bad key (401) or a forbidden deployment (403) fail at once with their own
typed error. Transient provider errors (timeout, connection, 429, 5xx, a 200 that is not a chat
completion) are retried with backoff, honouring the server's Retry-After (capped).

Every call has an overall deadline (``deadline`` seconds, else the client's ``turn_deadline``, else
``DEADLINE_FACTOR`` × the request timeout; :func:`turn_deadline` sets one shared by every call of a
turn). Each request's timeout is clipped to what is left, and retries, Retry-After waits and
repairs never pass it: when it is hit the result is the typed ``deadline`` error.

The model's output is capped at ``max_output_bytes`` (client attribute, default 256 KB) before it is
parsed, masked or logged, and scrubbed of the configured API key before anyone sees it. A reply cut
by ``finish_reason == "length"`` (or by the cap) is ``truncated``, repaired by asking for a shorter
answer. Debug records are built (and scrubbed) only when a log sink is given; failures always go to
the ``kaiwa.engine`` logger, masked. It never raises for bad output or provider errors: those come
back as ``ok=False`` with a typed error.
"""
from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, MutableSequence, Sequence

from core.debuglog import CallTags, make_record
from core.llm.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    UNSUPPORTED_KINDS,
    LLMRequest,
    LLMResponse,
    ProviderError,
    classify_exception,
)
from core.llm.settings import DEADLINE_FACTOR  # default overall deadline of a call, in request timeouts
from core.llm.strategies import DEFAULT_CHAIN, build_request, raw_output
from core.parsing import parse_with_stage
from core.prompts import render
from core.results import PARSE_ERROR, PROVIDER_ERROR, StructuredResult, provider_error_ja
from core.schemas import to_strict_schema
from core.text.pii import KNOWN_SECRETS, mask_pii, redact_secrets
from core.validation import validate_json

logger = logging.getLogger("kaiwa.engine")

REPAIR_RAW_CHARS = 4000  # how much of a (long) bad output is echoed back in a repair request
LOG_TEXT_CHARS = 300  # how much of an error message goes to the server log

_TURN_DEADLINE: ContextVar[float | None] = ContextVar("kaiwa_turn_deadline", default=None)


@dataclass
class RetryPolicy:
    """Bounded retry with exponential backoff for transient provider errors.

    A server's Retry-After replaces the backoff, capped at ``max_retry_after``. ``clock`` (monotonic
    seconds) and ``sleep`` are injectable for tests."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 20.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    clock: Callable[[], float] = field(default=time.monotonic)

    def delay(self, retry_number: int) -> float:
        return min(self.max_delay, self.base_delay * (2 ** retry_number))

    def wait_for(self, err: ProviderError, retry_number: int) -> float:
        if err.retry_after is not None:
            return min(max(0.0, err.retry_after), self.max_retry_after)
        return self.delay(retry_number)


DEFAULT_RETRY = RetryPolicy()


@contextmanager
def turn_deadline(seconds: float, *, retry: RetryPolicy | None = None) -> Iterator[float]:
    """Every engine call inside shares one deadline ``seconds`` from now (an enclosing, earlier
    deadline wins). Yields the absolute deadline on ``retry.clock``."""
    clock = (retry or DEFAULT_RETRY).clock
    end = clock() + seconds
    outer = _TURN_DEADLINE.get()
    if outer is not None:
        end = min(end, outer)
    token = _TURN_DEADLINE.set(end)
    try:
        yield end
    finally:
        _TURN_DEADLINE.reset(token)


def client_deadline(client: Any) -> float:
    """The overall deadline of one user turn on ``client`` (its ``turn_deadline``, else
    ``DEADLINE_FACTOR`` × its request timeout): flows wrap a turn of several calls in
    ``turn_deadline(client_deadline(client))`` so the calls share it."""
    return float(getattr(client, "turn_deadline", None) or DEADLINE_FACTOR * float(getattr(client, "timeout", None) or 60))


@dataclass
class _Budget:
    """What is left of a call's overall deadline."""

    end: float
    seconds: float
    clock: Callable[[], float]

    def remaining(self) -> float:
        return self.end - self.clock()

    def error(self, model: str = "") -> ProviderError:
        return ProviderError("deadline", f"制限時間 ({self.seconds:g} 秒) を超えました", model=model)


def _budget(client: Any, timeout: float, deadline: float | None, retry: RetryPolicy) -> _Budget:
    seconds = float(deadline or getattr(client, "turn_deadline", None) or DEADLINE_FACTOR * timeout)
    now = retry.clock()
    end = now + seconds
    outer = _TURN_DEADLINE.get()
    if outer is not None and outer < end:
        end, seconds = outer, max(0.0, outer - now)
    return _Budget(end, seconds, retry.clock)


def _mask_for_log(text: Any) -> str:
    return redact_secrets(mask_pii(str(text)[:LOG_TEXT_CHARS]), tuple(KNOWN_SECRETS))


def _scrub_secrets(text: str) -> str:
    """``text`` without the configured API key(s): model output is shown to the user."""
    for secret in KNOWN_SECRETS:
        if secret and len(secret) >= 6 and secret in text:
            text = text.replace(secret, "[秘匿]")
    return text


def _scrub_data(value: Any) -> Any:
    if isinstance(value, str):
        return _scrub_secrets(value)
    if isinstance(value, dict):
        return {k: _scrub_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_data(v) for v in value]
    return value


def cap_output(text: str, max_bytes: int) -> tuple[str, int | None]:
    """``(text, None)`` when it fits in ``max_bytes`` of UTF-8, else ``(head, full size in bytes)``."""
    if len(text) * 4 <= max_bytes:  # fast path: UTF-8 needs at most 4 bytes a character
        return text, None
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text, None
    return data[:max_bytes].decode("utf-8", "ignore"), len(data)


def _head(text: str, limit: int = REPAIR_RAW_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n…（以下省略: 全 {len(text)} 文字）"


class _Recorder:
    """Debug records (only when there is a sink) and the server log (always, masked)."""

    def __init__(self, log: MutableSequence[dict[str, Any]] | None, tags: CallTags, provider: str, model: str):
        self.log, self.tags, self.provider, self.model = log, tags, provider, model

    def record(self, *, strategy: str, attempt: int, kind: str, request: LLMRequest, raw: str | None,
               outcome: str, errors: list[str] | None = None, response: LLMResponse | None = None,
               latency_ms: float | None = None, parse_stage: str | None = None, raw_bytes: int | None = None,
               err: ProviderError | None = None) -> None:
        if outcome != "ok":
            logger.warning("model call failed: flow=%s step=%s provider=%s model=%s strategy=%s attempt=%d "
                           "kind=%s outcome=%s status=%s detail=%s", self.tags.flow, self.tags.step, self.provider,
                           self.model, strategy, attempt, kind, outcome, err.status if err else None,
                           _mask_for_log(" / ".join(errors or [])))
        if self.log is None:
            return
        self.log.append(make_record(
            tags=self.tags, provider=self.provider, model=(response.model if response else "") or self.model,
            strategy=strategy, attempt=attempt, kind=kind, request=request, raw=raw, outcome=outcome,
            errors=errors, latency_ms=latency_ms if latency_ms is not None else (response.latency_ms if response else 0.0),
            usage=response.usage if response else None, parse_stage=parse_stage, raw_bytes=raw_bytes,
            error_body=err.body if err else None, status=err.status if err else None))


def repair_instruction(raw: str, result: StructuredResult, fields: str) -> str:
    """The user message asking the model to fix its last output (``prompts/repair_instruction.md``)."""
    error_type = result.provider_error if result.error_type == PROVIDER_ERROR and result.provider_error else (
        result.error_type or "unknown_error")
    return render("repair_instruction", raw_output=_head(raw), error_type=error_type,
                  error_detail="\n".join(f"- {e}" for e in result.errors) or "-", fields=fields)


def _validate_leniently(validate: Callable[[str], StructuredResult], raw: str) -> StructuredResult:
    """Strict validation first; on a parse error, retry on the object extracted from the text."""
    result = validate(raw)
    if result.ok or result.error_type != PARSE_ERROR:
        if result.ok:
            result.parse_stage = "direct"
        return result
    extracted = parse_with_stage(raw)
    if extracted.data is None:
        return result
    retried = validate(json.dumps(extracted.data, ensure_ascii=False))
    retried.raw = raw
    retried.parse_stage = extracted.stage
    return retried


def _provider_failure(result_cls: type[StructuredResult], err: ProviderError, raw: str, attempts: int,
                      method: str | None, model: str = "") -> StructuredResult:
    message = provider_error_ja(err.kind, err.model or model)
    detail = redact_secrets(str(err), tuple(KNOWN_SECRETS))
    errors = [f"{err.kind}: {message}"] + ([detail] if detail and detail != err.kind else [])
    return result_cls(ok=False, raw=raw, error_type=PROVIDER_ERROR, errors=errors, attempts=attempts,
                      method=method, provider_error=err.kind)


def _truncated(result_cls: type[StructuredResult], raw: str, raw_bytes: int | None, max_bytes: int,
               attempts: int, method: str, why: str = "") -> StructuredResult:
    why = why or (f"出力が上限 {max_bytes} バイトを超えたため切り詰めました（実サイズ {raw_bytes} バイト）。" if raw_bytes
                  else "出力が長さの上限 (finish_reason=length) で途中で切れました。")
    errors = [f"truncated: {why}", "内容を絞り、より短い JSON で答えてください（長い文章は要約してください）。"]
    return result_cls(ok=False, raw=raw, error_type=PROVIDER_ERROR, errors=errors, attempts=attempts,
                      method=method, provider_error="truncated")


def _complete_with_retry(client: Any, request: LLMRequest, retry: RetryPolicy, budget: _Budget,
                         log_failure: Callable[[ProviderError, int, float], None],
                         ) -> tuple[LLMResponse | None, ProviderError | None, int]:
    """Call ``client``, retrying transient errors with backoff, within ``budget``. Returns (response,
    error, calls made); ``log_failure(error, retry_no, latency_ms)`` is told of every failed call."""
    model = getattr(client, "model", "")
    calls = 0
    for retry_no in range(retry.max_retries + 1):
        remaining = budget.remaining()
        if remaining <= 0:
            return None, budget.error(model), calls
        clipped = remaining < request.timeout
        attempt = replace(request, timeout=min(request.timeout, remaining))
        started = time.perf_counter()
        calls += 1
        try:
            return client.complete(attempt), None, calls
        except Exception as exc:  # noqa: BLE001 - every failure becomes a typed error
            err = classify_exception(exc, model=model)
            if err.kind == "unknown":
                logger.warning("unexpected %s from client %s", type(exc).__name__, getattr(client, "name", "?"))
            if err.kind == "timeout" and clipped:
                err = budget.error(model)
            log_failure(err, retry_no, (time.perf_counter() - started) * 1000)
            if err.transient and retry_no < retry.max_retries:
                wait = retry.wait_for(err, retry_no)
                if wait >= budget.remaining():
                    logger.warning("not retrying %s: waiting %.1f s would pass the deadline", err.kind, wait)
                    return None, err, calls
                retry.sleep(wait)
                continue
            return None, err, calls
    raise AssertionError("unreachable")  # pragma: no cover


def structured_call(
    client: Any,
    messages: Sequence[dict[str, Any]],
    *,
    schema: dict[str, Any],
    name: str,
    validate: Callable[[str], StructuredResult] | None = None,
    wire_schema: dict[str, Any] | None = None,
    strategies: Sequence[str] | None = None,
    max_repairs: int = 2,
    repair_fields: str | None = None,
    context: dict[str, Any] | None = None,
    temperature: float = 0.2,
    max_tokens: int | None = None,
    timeout: float | None = None,
    deadline: float | None = None,
    log: MutableSequence[dict[str, Any]] | None = None,
    tags: CallTags | None = None,
    retry: RetryPolicy | None = None,
    result_cls: type[StructuredResult] = StructuredResult,
) -> StructuredResult:
    """Get one schema-valid JSON object from ``client``. See the module docstring."""
    chain = tuple(strategies or getattr(client, "strategies", None) or DEFAULT_CHAIN)
    validate = validate or (lambda raw: validate_json(raw, schema))
    wire = wire_schema or to_strict_schema(schema)
    fields = repair_fields or ", ".join(schema.get("properties", {}))
    retry = retry or DEFAULT_RETRY
    model = getattr(client, "model", "")
    rec = _Recorder(log, tags or CallTags(), getattr(client, "name", type(client).__name__), model)
    max_bytes = int(getattr(client, "max_output_bytes", None) or DEFAULT_MAX_OUTPUT_BYTES)
    base = LLMRequest(messages=[dict(m) for m in messages], task=name, temperature=temperature,
                      max_tokens=max_tokens, timeout=timeout or getattr(client, "timeout", None) or 60.0,
                      context=dict(context or {}))
    budget = _budget(client, base.timeout, deadline, retry)
    attempts = 0
    unsupported: ProviderError | None = None

    for strategy in chain:
        convo = list(base.messages)
        last: StructuredResult | None = None
        strategy_rejected = False
        for repair_no in range(max_repairs + 1):
            request = build_request(strategy, replace(base, messages=convo),
                                    name=name, wire_schema=wire, full_schema=schema)
            kind = "repair" if repair_no else "call"
            first_attempt = attempts + 1

            def log_failure(err: ProviderError, retry_no: int, latency_ms: float) -> None:
                rec.record(strategy=strategy, attempt=first_attempt + retry_no, kind="retry" if retry_no else kind,
                           request=request, raw=None, outcome=f"provider_error:{err.kind}", errors=[str(err)],
                           latency_ms=latency_ms, err=err)

            response, err, calls = _complete_with_retry(client, request, retry, budget, log_failure)
            attempts += calls
            if err is not None and err.kind != "truncated":
                if err.kind not in UNSUPPORTED_KINDS:
                    return _provider_failure(result_cls, err, last.raw if last else "", attempts, strategy, model)
                unsupported, strategy_rejected = err, True
                logger.warning("strategy %s rejected by %s (%s): falling back", strategy, rec.provider, err.kind)
                break
            if err is not None:  # the body itself was over the cap (already logged): a repairable truncation
                raw = _scrub_secrets(err.body or "")
                result = _truncated(result_cls, raw, None, max_bytes, attempts, strategy, why=str(err))
            else:
                assert response is not None
                raw = raw_output(strategy, response)
                if raw is not None and not isinstance(raw, str):
                    err = ProviderError("bad_response", "client returned non-text output", model=model)
                    rec.record(strategy=strategy, attempt=attempts, kind=kind, request=request, raw=None,
                               outcome="provider_error:bad_response", errors=[str(err)], response=response, err=err)
                    return _provider_failure(result_cls, err, "", attempts, strategy, model)
                if response.refusal and not (raw or "").strip():
                    refusal = _scrub_secrets(cap_output(str(response.refusal), max_bytes)[0])
                    err = ProviderError("refusal", refusal)
                    rec.record(strategy=strategy, attempt=attempts, kind=kind, request=request, raw=refusal,
                               outcome="provider_error:refusal", errors=[refusal], response=response)
                    return _provider_failure(result_cls, err, refusal, attempts, strategy, model)
                if raw is None:  # e.g. tool strategy answered with neither a tool call nor text
                    unsupported = ProviderError("unsupported", f"{strategy}: empty response")
                    rec.record(strategy=strategy, attempt=attempts, kind=kind, request=request, raw=None,
                               outcome="provider_error:unsupported", errors=[str(unsupported)], response=response)
                    logger.warning("strategy %s got an empty response from %s: falling back", strategy, rec.provider)
                    break
                raw, raw_bytes = cap_output(raw, max_bytes)
                raw = _scrub_secrets(raw)
                if raw_bytes is not None or response.finish_reason == "length":
                    result = _truncated(result_cls, raw, raw_bytes, max_bytes, attempts, strategy)
                    outcome = "provider_error:truncated"
                else:
                    result = _validate_leniently(validate, raw)
                    if not isinstance(result, result_cls):
                        result = result_cls(**result.__dict__)
                    outcome = "ok" if result.ok else (result.error_type or "error")
                rec.record(strategy=strategy, attempt=attempts, kind=kind, request=request, raw=raw,
                           outcome=outcome, errors=result.errors, response=response,
                           parse_stage=result.parse_stage, raw_bytes=raw_bytes)
            result.attempts, result.method, result.repairs = attempts, strategy, repair_no
            if result.ok:
                if KNOWN_SECRETS and result.data is not None:
                    result.data = _scrub_data(result.data)
                return result
            last = result
            if repair_no < max_repairs:
                convo = list(base.messages) + [
                    {"role": "assistant", "content": _head(raw)},
                    {"role": "user", "content": repair_instruction(raw, result, fields)},
                ]
        if last is not None and not strategy_rejected:
            return last  # repairs exhausted: ok=False with the last raw output
    err = unsupported or ProviderError("unsupported", "no strategy configured")
    return _provider_failure(result_cls, err, "", attempts, chain[-1] if chain else None, model)


def text_call(
    client: Any,
    messages: Sequence[dict[str, Any]],
    *,
    task: str,
    context: dict[str, Any] | None = None,
    temperature: float = 0.0,
    deadline: float | None = None,
    log: MutableSequence[dict[str, Any]] | None = None,
    tags: CallTags | None = None,
    retry: RetryPolicy | None = None,
) -> str | None:
    """One plain-text call with no schema (e.g. seed 004's tag stage): the reply text, or None when
    the provider failed. Transient errors are retried like in :func:`structured_call`, within the
    same kind of deadline; every attempt is logged with strategy ``plain_text``."""
    retry = retry or DEFAULT_RETRY
    model = getattr(client, "model", "")
    rec = _Recorder(log, tags or CallTags(), getattr(client, "name", type(client).__name__), model)
    max_bytes = int(getattr(client, "max_output_bytes", None) or DEFAULT_MAX_OUTPUT_BYTES)
    request = LLMRequest(messages=[dict(m) for m in messages], task=task, temperature=temperature,
                         timeout=getattr(client, "timeout", None) or 60.0, context=dict(context or {}))
    budget = _budget(client, request.timeout, deadline, retry)

    def log_failure(err: ProviderError, retry_no: int, latency_ms: float) -> None:
        rec.record(strategy="plain_text", attempt=retry_no + 1, kind="retry" if retry_no else "call",
                   request=request, raw=None, outcome=f"provider_error:{err.kind}", errors=[str(err)],
                   latency_ms=latency_ms, err=err)

    response, err, calls = _complete_with_retry(client, request, retry, budget, log_failure)
    if response is None:
        return None
    raw = response.content if response.content is not None else response.tool_arguments
    raw_bytes = None
    if isinstance(raw, str):
        raw, raw_bytes = cap_output(raw, max_bytes)
        raw = _scrub_secrets(raw)
    else:
        raw = None
    rec.record(strategy="plain_text", attempt=calls, kind="retry" if calls > 1 else "call", request=request,
               raw=raw, outcome="ok" if raw else "empty", response=response, raw_bytes=raw_bytes)
    return raw or None
