"""The structured-turn engine: call → parse → validate → repair, over a chain of strategies.

``structured_call`` is the one path every flow uses. For each strategy of the chain (default
structured_output → tool_call → prompt_extract) it calls the client, validates the reply with
jsonschema (the only judge of validity) and sends up to ``max_repairs`` repair requests. It moves to
the next strategy only when the provider rejects the current one (400-class error, no tool call).
Transient provider errors (timeout, connection, 429, 5xx) are retried with backoff first. It never
raises for bad output or provider errors: those come back as ``ok=False`` with a typed error.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, MutableSequence, Sequence

from core.debuglog import CallTags, append, make_record
from core.llm.base import UNSUPPORTED_KINDS, LLMRequest, LLMResponse, ProviderError, classify_exception, PROVIDER_ERROR_JA
from core.llm.strategies import DEFAULT_CHAIN, build_request, raw_output
from core.parsing import parse_with_stage
from core.prompts import render
from core.results import PARSE_ERROR, PROVIDER_ERROR, StructuredResult
from core.schemas import to_strict_schema
from core.validation import validate_json


@dataclass
class RetryPolicy:
    """Bounded retry with exponential backoff for transient provider errors."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    sleep: Callable[[float], None] = field(default=time.sleep)

    def delay(self, retry_number: int) -> float:
        return min(self.max_delay, self.base_delay * (2 ** retry_number))


DEFAULT_RETRY = RetryPolicy()


def repair_instruction(raw: str, result: StructuredResult, fields: str) -> str:
    """The user message asking the model to fix its last output (``prompts/repair_instruction.md``)."""
    return render("repair_instruction", raw_output=raw, error_type=result.error_type or "unknown_error",
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
                      method: str | None) -> StructuredResult:
    message = PROVIDER_ERROR_JA.get(err.kind, PROVIDER_ERROR_JA["unknown"])
    detail = str(err)
    errors = [f"{err.kind}: {message}"] + ([detail] if detail and detail != err.kind else [])
    return result_cls(ok=False, raw=raw, error_type=PROVIDER_ERROR, errors=errors, attempts=attempts,
                      method=method, provider_error=err.kind)


def _complete_with_retry(client: Any, request: LLMRequest, retry: RetryPolicy,
                         log_failure: Callable[[ProviderError, int, float], None],
                         ) -> tuple[LLMResponse | None, ProviderError | None, int]:
    """Call ``client``, retrying transient errors with backoff. Returns (response, error, calls made);
    ``log_failure(error, retry_no, latency_ms)`` is told of every failed call."""
    for retry_no in range(retry.max_retries + 1):
        started = time.perf_counter()
        try:
            return client.complete(request), None, retry_no + 1
        except Exception as exc:  # noqa: BLE001 - every failure becomes a typed error
            err = classify_exception(exc)
            log_failure(err, retry_no, (time.perf_counter() - started) * 1000)
            if err.transient and retry_no < retry.max_retries:
                retry.sleep(retry.delay(retry_no))
                continue
            return None, err, retry_no + 1
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
    tags = tags or CallTags()
    provider = getattr(client, "name", type(client).__name__)
    base = LLMRequest(messages=[dict(m) for m in messages], task=name, temperature=temperature,
                      max_tokens=max_tokens, timeout=timeout or getattr(client, "timeout", 60.0),
                      context=dict(context or {}))
    attempts = 0
    unsupported: ProviderError | None = None

    for strategy in chain:
        convo = list(base.messages)
        last: StructuredResult | None = None
        strategy_rejected = False
        for repair_no in range(max_repairs + 1):
            request = build_request(strategy, LLMRequest(**{**base.__dict__, "messages": convo}),
                                    name=name, wire_schema=wire, full_schema=schema)
            kind = "repair" if repair_no else "call"
            first_attempt = attempts + 1

            def log_failure(err: ProviderError, retry_no: int, latency_ms: float) -> None:
                append(log, make_record(
                    tags=tags, provider=provider, model=getattr(client, "model", ""), strategy=strategy,
                    attempt=first_attempt + retry_no, kind="retry" if retry_no else kind, request=request, raw=None,
                    outcome=f"provider_error:{err.kind}", errors=[str(err)], latency_ms=latency_ms))

            response, err, calls = _complete_with_retry(client, request, retry, log_failure)
            attempts += calls
            if err is not None:
                if err.kind not in UNSUPPORTED_KINDS:
                    return _provider_failure(result_cls, err, last.raw if last else "", attempts, strategy)
                unsupported, strategy_rejected = err, True
                break
            assert response is not None
            raw = raw_output(strategy, response)
            if raw is None and response.refusal:
                err = ProviderError("refusal", response.refusal)
                append(log, make_record(
                    tags=tags, provider=provider, model=response.model or getattr(client, "model", ""),
                    strategy=strategy, attempt=attempts, kind=kind, request=request, raw=response.refusal,
                    outcome="provider_error:refusal", errors=[response.refusal], latency_ms=response.latency_ms,
                    usage=response.usage))
                return _provider_failure(result_cls, err, response.refusal, attempts, strategy)
            if raw is None:  # e.g. tool strategy answered with neither a tool call nor text
                unsupported = ProviderError("unsupported", f"{strategy}: empty response")
                append(log, make_record(
                    tags=tags, provider=provider, model=response.model or getattr(client, "model", ""),
                    strategy=strategy, attempt=attempts, kind=kind, request=request, raw=None,
                    outcome="provider_error:unsupported", errors=[str(unsupported)],
                    latency_ms=response.latency_ms, usage=response.usage))
                break
            result = _validate_leniently(validate, raw)
            if not isinstance(result, result_cls):
                result = result_cls(**result.__dict__)
            append(log, make_record(
                tags=tags, provider=provider, model=response.model or getattr(client, "model", ""),
                strategy=strategy, attempt=attempts, kind=kind, request=request, raw=raw,
                outcome="ok" if result.ok else (result.error_type or "error"), errors=result.errors,
                latency_ms=response.latency_ms, usage=response.usage, parse_stage=result.parse_stage))
            result.attempts, result.method, result.repairs = attempts, strategy, repair_no
            if result.ok:
                return result
            last = result
            if repair_no < max_repairs:
                convo = list(base.messages) + [
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": repair_instruction(raw, result, fields)},
                ]
        if last is not None and not strategy_rejected:
            return last  # repairs exhausted: ok=False with the last raw output
    err = unsupported or ProviderError("unsupported", "no strategy configured")
    return _provider_failure(result_cls, err, "", attempts, chain[-1] if chain else None)


def text_call(
    client: Any,
    messages: Sequence[dict[str, Any]],
    *,
    task: str,
    context: dict[str, Any] | None = None,
    temperature: float = 0.0,
    log: MutableSequence[dict[str, Any]] | None = None,
    tags: CallTags | None = None,
    retry: RetryPolicy | None = None,
) -> str | None:
    """One plain-text call with no schema (e.g. seed 004's tag stage): the reply text, or None when
    the provider failed. Transient errors are retried like in :func:`structured_call`; every
    attempt is logged with strategy ``plain_text``."""
    retry = retry or DEFAULT_RETRY
    tags = tags or CallTags()
    provider = getattr(client, "name", type(client).__name__)
    request = LLMRequest(messages=[dict(m) for m in messages], task=task, temperature=temperature,
                         timeout=getattr(client, "timeout", 60.0), context=dict(context or {}))

    def log_failure(err: ProviderError, retry_no: int, latency_ms: float) -> None:
        append(log, make_record(tags=tags, provider=provider, model=getattr(client, "model", ""),
                                strategy="plain_text", attempt=retry_no + 1, kind="retry" if retry_no else "call",
                                request=request, raw=None, outcome=f"provider_error:{err.kind}", errors=[str(err)],
                                latency_ms=latency_ms))

    response, err, calls = _complete_with_retry(client, request, retry, log_failure)
    if response is None:
        return None
    raw = response.content if response.content is not None else response.tool_arguments
    append(log, make_record(tags=tags, provider=provider, model=response.model or getattr(client, "model", ""),
                            strategy="plain_text", attempt=calls, kind="retry" if calls > 1 else "call",
                            request=request, raw=raw, outcome="ok" if raw else "empty",
                            latency_ms=response.latency_ms, usage=response.usage))
    return raw or None
