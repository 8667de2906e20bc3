"""The structured-turn engine: call → parse → validate → repair, over a chain of strategies.

``structured_call`` is the one path every flow uses. For each strategy of the chain (default
structured_output → tool_call → prompt_extract) it calls the client, validates the reply with
jsonschema (the only judge of validity) and sends up to ``max_repairs`` repair requests.

**What goes out.** Every request is made acceptable to any chat template first
(``core.llm.messages.alternate``: one system message, then user / assistant turns strictly
alternating), carries an output limit fitted to its schema (``core.llm.limits``, capped by the
client's ``max_output_tokens``) and is fitted to the client's context size when it is known
(configured, read from the server, or learnt from an overflow): older history cut, retrieved and
attached text trimmed, a repair's copy of the bad output shortened. A repair request carries the bad
output once (as the assistant turn, trimmed), never again inside the instruction.

**Errors by cause.** It moves to the next strategy only when the provider rejects the method itself
(``unsupported``, or a 400 of no known cause), or when a forced tool call is answered without a tool
call (the server ignores tools): at once, without spending repairs on the text. A server that said its
chat template shows no tools (llama.cpp's ``chat_template_caps``) is not sent a tool call at all. A context overflow is
its own error (and when the client's token ratio was measured with the server's tokenizer, a prompt
that cannot fit is not sent at all: the same typed error): the call learns the server's context size and real prompt tokens from it and resends
the same strategy only with a strictly smaller prompt; it never sends an equal or larger one again,
and ends with the typed ``context_overflow`` when nothing more can be cut. A chat-template refusal
(``template``), a missing model (404), a bad key (401) or a forbidden deployment (403) fail at once.
Transient provider errors (timeout, connection, 429, 5xx, a 200 that is not a chat completion) are
retried with backoff, honouring the server's Retry-After (capped). A timeout is retried only when what is
left of the deadline after the backoff is at least as long as the attempt that timed out took (no blind
resend that cannot finish); a connection lost mid-answer is ``connection`` (timer ``dropped``).

Every call has an overall deadline (``deadline`` seconds, else the client's ``turn_deadline``, else
``DEADLINE_FACTOR`` × the request timeout; :func:`turn_deadline` sets one shared by every call of a
turn). Each request gets what is left as its ``budget`` (a streaming client also applies its first-token
and between-token timers inside it), and retries, Retry-After waits and repairs never pass it: when it
is hit the result is the typed ``deadline`` error. The timer that fired is kept on the client
(``last_timeout``), in the result (``timer``) and in the debug record.

**Validation before truncation.** An answer the server cut (``finish_reason == "length"``) is still
validated first: a complete, valid object is accepted. Otherwise it is ``truncated`` and repaired with
a request for a shorter answer and twice the output limit (up to the cap). Output over
``max_output_bytes`` (client attribute, default 256 KB) is cut before it is parsed, masked or logged,
and scrubbed of the configured API key before anyone sees it.

**Streaming.** A call names the field the user reads (``stream_field``); it comes first in the wire
schema (and in a prompt_extract instruction's schema) so the model writes it first. With a sink set
by the page (``core.llm.stream.stream_to``) its text goes to the sink as the model writes it; before a
repair, a retry or the next strategy the sink is told to ``restart``.

Debug records are built (and scrubbed) only when a log sink is given; each keeps the model id the
server reported, the output limit and its parameter name, the context size, the prompt estimate, what
fitting cut, stream timings and the timer that fired. Failures always go to the ``kaiwa.engine``
logger, masked. It never raises for bad output or provider errors: those come back as ``ok=False``
with a typed error.
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
from core.llm.limits import DEFAULT_MAX_OUTPUT_TOKENS, MIN_OUTPUT_TOKENS, output_limit
from core.llm.messages import MESSAGE_OVERHEAD_TOKENS, alternate, estimate_tokens, fit_messages
from core.llm.settings import DEADLINE_FACTOR  # default overall deadline of a call, in request timeouts
from core.llm.strategies import DEFAULT_CHAIN, TOOL_CALL, build_request, raw_output
from core.llm.stream import FieldReader, current_sink
from core.parsing import parse_with_stage
from core.prompts import render
from core.results import PARSE_ERROR, PROVIDER_ERROR, StructuredResult, provider_error_ja
from core.schemas import to_strict_schema
from core.text.pii import KNOWN_SECRETS, mask_pii, redact_secrets
from core.validation import validate_json

logger = logging.getLogger("kaiwa.engine")

REPAIR_RAW_CHARS = 2000  # how much of a (long) bad output a repair request carries (once, as the assistant turn)
NEAR_FULL = 0.8  # a prompt whose estimate fills this share of the context is counted by the server (llama.cpp)
MAX_OVERFLOW_REFITS = 2  # context overflows one model call may answer by resending a smaller prompt
OVERFLOW_SHRINK = 0.75  # without the server's context size, a resent prompt is at most this share of the last
MIN_TOKEN_RATIO, MAX_TOKEN_RATIO = 0.2, 5.0  # bounds of the learnt real-tokens / estimate ratio
LOG_TEXT_CHARS = 300  # how much of an error message goes to the server log

_TURN_DEADLINE: ContextVar[float | None] = ContextVar("kaiwa_turn_deadline", default=None)
_TURN: ContextVar[object | None] = ContextVar("kaiwa_turn", default=None)


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
    turn = _TURN.set(object()) if _TURN.get() is None else None  # the outermost block is the turn
    try:
        yield end
    finally:
        if turn is not None:
            _TURN.reset(turn)
        _TURN_DEADLINE.reset(token)


def current_turn() -> object | None:
    """A token for the user turn running in this context (the outermost :func:`turn_deadline` block), None
    outside one: what is checked once per turn (the manual index's freshness) is keyed by it."""
    return _TURN.get()


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
    # secrets first, on the whole text: masking digits or cutting first could split a key and leave its rest
    return mask_pii(redact_secrets(str(text), tuple(KNOWN_SECRETS))[:LOG_TEXT_CHARS])


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

    def __init__(self, log: MutableSequence[dict[str, Any]] | None, tags: CallTags, provider: str, model: str,
                 client: Any = None):
        self.log, self.tags, self.provider, self.model = log, tags, provider, model
        self.client = client

    def record(self, *, strategy: str, attempt: int, kind: str, request: LLMRequest, raw: str | None,
               outcome: str, errors: list[str] | None = None, response: LLMResponse | None = None,
               latency_ms: float | None = None, parse_stage: str | None = None, raw_bytes: int | None = None,
               err: ProviderError | None = None, fit: dict[str, Any] | None = None) -> None:
        if outcome != "ok":
            logger.warning("model call failed: flow=%s step=%s provider=%s model=%s strategy=%s attempt=%d "
                           "kind=%s outcome=%s status=%s timer=%s detail=%s", self.tags.flow, self.tags.step,
                           self.provider, self.model, strategy, attempt, kind, outcome, err.status if err else None,
                           err.timer if err else None, _mask_for_log(" / ".join(errors or [])))
        if self.log is None:
            return
        info = getattr(self.client, "server_info", None)
        reported = (response.model if response else "") or getattr(info, "served_model", "") or ""
        call: dict[str, Any] = {"max_tokens": request.max_tokens, "limit_param": getattr(response, "limit_param", None)
                                or (getattr(self.client, "limit_param", None) if request.max_tokens else None),
                                "context_tokens": getattr(self.client, "context_tokens", None),
                                "streamed": bool(response and response.streamed)}
        if fit:
            call.update(fit)
        if response is not None and response.timings:  # ms figures (the perf_counter stamps are for the page)
            call["timings"] = {k: v for k, v in response.timings.items() if k.endswith("_ms")}
        if response is not None and response.finish_reason:
            call["finish_reason"] = response.finish_reason
        if err is not None and err.timer:
            call["connection" if err.kind == "connection" else "timeout"] = err.timer
        if err is not None and err.kind == "context_overflow":
            call.update({"server_n_ctx": err.n_ctx, "server_n_prompt_tokens": err.n_prompt_tokens})
        self.log.append(make_record(
            tags=self.tags, provider=self.provider, model=reported or self.model, model_configured=self.model,
            strategy=strategy, attempt=attempt, kind=kind, request=request, raw=raw, outcome=outcome,
            errors=errors, latency_ms=latency_ms if latency_ms is not None else (response.latency_ms if response else 0.0),
            usage=response.usage if response else None, parse_stage=parse_stage, raw_bytes=raw_bytes,
            error_body=err.body if err else None, status=err.status if err else None, call=call))


def repair_instruction(raw: str, result: StructuredResult, fields: str) -> str:
    """The user message asking the model to fix its last output (``prompts/repair_instruction.md``). The
    bad output itself is not repeated here: it is the assistant message just before (trimmed)."""
    error_type = result.provider_error if result.error_type == PROVIDER_ERROR and result.provider_error else (
        result.error_type or "unknown_error")
    return render("repair_instruction", error_type=error_type,
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
    message = provider_error_ja(err.kind, err.model or model, err.timer)
    detail = redact_secrets(str(err), tuple(KNOWN_SECRETS))
    errors = [f"{err.kind}: {message}"] + ([detail] if detail and detail != err.kind else [])
    return result_cls(ok=False, raw=raw, error_type=PROVIDER_ERROR, errors=errors, attempts=attempts,
                      method=method, provider_error=err.kind, timer=err.timer)


def _truncated(result_cls: type[StructuredResult], raw: str, raw_bytes: int | None, max_bytes: int,
               attempts: int, method: str, why: str = "") -> StructuredResult:
    why = why or (f"出力が上限 {max_bytes} バイトを超えたため切り詰めました（実サイズ {raw_bytes} バイト）。" if raw_bytes
                  else "出力が長さの上限 (finish_reason=length) で途中で切れました。")
    errors = [f"truncated: {why}", "内容を絞り、より短い JSON で答えてください（長い文章は要約してください）。"]
    return result_cls(ok=False, raw=raw, error_type=PROVIDER_ERROR, errors=errors, attempts=attempts,
                      method=method, provider_error="truncated")


def _complete_with_retry(client: Any, request: LLMRequest, retry: RetryPolicy, budget: _Budget,
                         log_failure: Callable[[ProviderError, int, float], None],
                         on_retry: Callable[[], None] | None = None,
                         ) -> tuple[LLMResponse | None, ProviderError | None, int]:
    """Call ``client``, retrying transient errors with backoff, within ``budget``. Returns (response,
    error, calls made); ``log_failure(error, retry_no, latency_ms)`` is told of every failed call and
    ``on_retry()`` before every retry."""
    model = getattr(client, "model", "")
    calls = 0
    for retry_no in range(retry.max_retries + 1):
        remaining = budget.remaining()
        if remaining <= 0:
            return None, budget.error(model), calls
        clipped = remaining < request.timeout
        attempt = replace(request, timeout=min(request.timeout, remaining), budget=remaining)
        started = time.perf_counter()
        began = retry.clock()
        calls += 1
        try:
            return client.complete(attempt), None, calls
        except Exception as exc:  # noqa: BLE001 - every failure becomes a typed error
            err = classify_exception(exc, model=model)
            if err.kind == "unknown":
                logger.warning("unexpected %s from client %s", type(exc).__name__, getattr(client, "name", "?"))
            if err.kind == "timeout" and (err.timer == "deadline" or (clipped and err.timer in (None, "request"))):
                err = budget.error(model)
                err.timer = "deadline"
            if err.kind in ("timeout", "deadline"):
                note_timeout(client, err.timer or "request", budget.seconds)
            log_failure(err, retry_no, (time.perf_counter() - started) * 1000)
            if err.transient and retry_no < retry.max_retries:
                wait = retry.wait_for(err, retry_no)
                if wait >= budget.remaining():
                    logger.warning("not retrying %s: waiting %.1f s would pass the deadline", err.kind, wait)
                    return None, err, calls
                # A timed-out request sent again unchanged needs at least as long as it already waited in vain
                # (the timer that fired): retried only when the turn's deadline leaves that much after the wait.
                needed = retry.clock() - began
                if err.kind == "timeout" and wait + needed > budget.remaining():
                    logger.warning("not retrying a %s timeout: %.1f s left of the deadline, the attempt took %.1f s",
                                   err.timer or "request", budget.remaining(), needed)
                    return None, err, calls
                retry.sleep(wait)
                if on_retry is not None:
                    on_retry()
                continue
            return None, err, calls
    raise AssertionError("unreachable")  # pragma: no cover


def note_timeout(client: Any, timer: str, budget_seconds: float) -> None:
    """Remember on ``client`` which timer fired last (the sidebar shows it)."""
    seconds = {"first_token": getattr(client, "first_token_timeout", None),
               "token_gap": getattr(client, "token_gap_timeout", None),
               "request": getattr(client, "timeout", None)}.get(timer) or round(budget_seconds, 1)
    try:
        client.last_timeout = {"timer": timer, "seconds": seconds, "at": time.time()}
    except AttributeError:  # a client that takes no attributes
        pass


def _calibrate(client: Any, server_tokens: Any, estimate: int, *, exact: bool = False) -> None:
    """Learn the client's ratio of real prompt tokens to our estimate (bounded). A larger ratio is taken
    at once (safer), a smaller one halfway, unless ``exact`` (the server counted the very prompt that is
    about to be refitted: an overflow's ``n_prompt_tokens``)."""
    if not isinstance(server_tokens, (int, float)) or server_tokens <= 0 or estimate <= 0:
        return
    observed = min(MAX_TOKEN_RATIO, max(MIN_TOKEN_RATIO, server_tokens / estimate))
    current = float(getattr(client, "token_ratio", None) or 1.0)
    try:
        client.token_ratio = round(observed if exact or observed > current else 0.5 * current + 0.5 * observed, 4)
    except AttributeError:
        pass


def _tools_unsupported(client: Any) -> bool:
    """True when the server said its chat template cannot show tools (llama.cpp ``chat_template_caps``)."""
    return getattr(getattr(client, "server_info", None), "tools_in_prompt", True) is False


def _with_first(schema: dict[str, Any], field_name: str) -> dict[str, Any]:
    """``schema`` with ``field_name`` first among its properties (a streamed field is written first)."""
    props = schema.get("properties")
    if not isinstance(props, dict) or field_name not in props or next(iter(props)) == field_name:
        return schema
    ordered = {field_name: props[field_name], **{k: v for k, v in props.items() if k != field_name}}
    out = dict(schema, properties=ordered)
    if isinstance(schema.get("required"), list) and field_name in schema["required"]:
        out["required"] = [field_name] + [r for r in schema["required"] if r != field_name]
    return out


@dataclass
class _Plan:
    """The output limit and context budget of one call, and what an overflow taught it."""

    client: Any
    max_tokens: int
    keep_head: int
    ceiling: int | None = None  # a request must stay below this (estimated tokens at ratio 1): after an overflow
    overflow: ProviderError | None = None  # the last overflow the server reported

    @property
    def ratio(self) -> float:
        return float(getattr(self.client, "token_ratio", None) or 1.0)

    @property
    def context(self) -> int | None:
        value = getattr(self.client, "context_tokens", None)
        return int(value) if isinstance(value, (int, float)) and value > 0 else None

    def prepare(self, request: LLMRequest, tail: int) -> tuple[LLMRequest, dict[str, Any]]:
        """``request`` with alternating messages fitted to the context, and its output limit."""
        messages = alternate(request.messages)
        info = getattr(self.client, "server_info", None)
        shown = getattr(info, "tools_in_prompt", True) is not False  # a tool-less template never renders tools
        extra = json.dumps(request.tools, ensure_ascii=False) if request.tools and shown else ""
        out, context = int(request.max_tokens or self.max_tokens), self.context
        budget = None
        if context:
            out = max(min(MIN_OUTPUT_TOKENS, out), min(out, context // 2))
            budget = context - out - _margin(context)
        if self.ceiling is not None:  # after an overflow: strictly smaller than the request that overflowed
            shrink = 1.0 if context else OVERFLOW_SHRINK  # without the server's size, cut a quarter at least
            below = int((self.ceiling * shrink - 1) * self.ratio)
            budget = min(budget, below) if budget is not None else below
        fitted = fit_messages(messages, budget, ratio=self.ratio, keep_head=self.keep_head, tail=tail,
                              extra_text=extra)
        info: dict[str, Any] = {}
        counted = self._counted(fitted.messages, extra, out, context)
        if counted is not None and counted > fitted.tokens and budget is not None:  # the estimate ran low: refit
            _calibrate(self.client, counted, estimate_tokens(fitted.messages, 1.0, extra_text=extra), exact=True)
            fitted = fit_messages(messages, budget, ratio=self.ratio, keep_head=self.keep_head, tail=tail,
                                  extra_text=extra)
            counted = self._counted(fitted.messages, extra, out, context, always=True)
        if counted is not None:
            info["prompt_tokens_counted"] = counted
            fitted = replace(fitted, tokens=counted)
        if context and fitted.tokens + out + _margin(context) > context:  # what is left goes to the answer
            out = max(min(MIN_OUTPUT_TOKENS, out), context - fitted.tokens - _margin(context))
            # after an overflow the estimate is calibrated on the server's own count: trust it
            info["cannot_fit"] = fitted.tokens + min(MIN_OUTPUT_TOKENS, out) + _margin(context) > context
        info.update({"prompt_tokens_est": fitted.tokens, "token_ratio": round(self.ratio, 3)})
        if fitted.notes:
            info["fit"] = list(fitted.notes)
        size = estimate_tokens(fitted.messages, 1.0, extra_text=extra)
        info["size"] = size
        return replace(request, messages=fitted.messages, max_tokens=out), info

    def _counted(self, messages: list[dict[str, Any]], extra: str, out: int, context: int | None,
                 always: bool = False) -> int | None:
        """The server's own count of a prompt near the end of the context (a client with ``count_tokens``,
        i.e. llama.cpp), with the template's per-message overhead; None when not needed or not known."""
        counter = getattr(self.client, "count_tokens", None)
        if not context or not callable(counter) or not getattr(self.client, "token_ratio_exact", False):
            return None
        estimate = estimate_tokens(messages, self.ratio, extra_text=extra)
        if not always and estimate + out + _margin(context) < NEAR_FULL * context:
            return None
        text = "\n".join(str(m.get("content") or "") for m in messages) + ("\n" + extra if extra else "")
        real = counter(text)
        return int(real) + MESSAGE_OVERHEAD_TOKENS * len(messages) if isinstance(real, int) else None

    def overflowed(self, err: ProviderError, size: int) -> None:
        """Learn from a context overflow: the server's context size and real prompt tokens, and never
        again a request this large."""
        if err.n_ctx:
            try:
                self.client.context_tokens = int(err.n_ctx)
            except AttributeError:
                pass
        if err.n_prompt_tokens:
            _calibrate(self.client, err.n_prompt_tokens, size, exact=True)
        self.ceiling = size if self.ceiling is None else min(self.ceiling, size)
        self.overflow = err


def _wont_fit(plan: _Plan, fit: dict[str, Any], model: str) -> ProviderError:
    """The typed overflow of a prompt that, counted at the server's own tokenizer ratio, cannot fit."""
    context = plan.context or 0
    tokens = int(fit.get("prompt_tokens_est") or 0)
    return ProviderError("context_overflow", f"入力がモデルのコンテキスト長を超えます（コンテキスト長 {context} トークン、"
                         f"入力 約 {tokens} トークン。サーバーのトークナイザーで数えた比率による見積もり）", n_ctx=context,
                         n_prompt_tokens=tokens, model=model)


def _margin(context: int) -> int:
    return 16 + context // 32


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
    stream_field: str | None = None,
    keep_head: int = 1,
    keep_tail: int = 1,
) -> StructuredResult:
    """Get one schema-valid JSON object from ``client``. See the module docstring.

    ``stream_field``: the top-level string the user reads, sent to the page's sink (``core.llm.stream``)
    while the model writes it. ``keep_head``: leading messages (system prompt, pinned examples) that
    fitting the context never drops. ``keep_tail``: trailing messages it never drops (1: the current user
    message; an answer guard's regeneration keeps its question, the rejected answer and the reason: 3)."""
    chain = tuple(strategies or getattr(client, "strategies", None) or DEFAULT_CHAIN)
    if isinstance(getattr(client, "max_repairs", None), int):  # KAIWA_MAX_REPAIRS bounds every call's repairs
        max_repairs = min(max_repairs, client.max_repairs)
    validate = validate or (lambda raw: validate_json(raw, schema))
    wire = wire_schema or to_strict_schema(schema)
    fields = repair_fields or ", ".join(schema.get("properties", {}))
    retry = retry or DEFAULT_RETRY
    model = getattr(client, "model", "")
    rec = _Recorder(log, tags or CallTags(), getattr(client, "name", type(client).__name__), model, client)
    max_bytes = int(getattr(client, "max_output_bytes", None) or DEFAULT_MAX_OUTPUT_BYTES)
    cap = getattr(client, "max_output_tokens", None)
    limit = int(max_tokens or output_limit(schema, wire, cap=cap, task=name))
    sink = current_sink() if stream_field else None
    reader = FieldReader(sink, name, stream_field) if sink is not None and stream_field else None
    shown_schema = schema  # the schema written into a prompt_extract instruction
    if stream_field:  # the text the user reads is written first, so it can show while the rest is written
        wire, shown_schema = _with_first(wire, stream_field), _with_first(schema, stream_field)
    base = LLMRequest(messages=[dict(m) for m in messages], task=name, temperature=temperature,
                      max_tokens=limit, timeout=timeout or getattr(client, "timeout", None) or 60.0,
                      context=dict(context or {}), on_delta=reader)
    budget = _budget(client, base.timeout, deadline, retry)
    plan = _Plan(client, limit, keep_head)
    attempts = 0
    unsupported: ProviderError | None = None
    timings: dict[str, float] = {}

    def finish(result: StructuredResult) -> StructuredResult:
        if sink is not None:
            arrived = reader.first_text_arrived_at if reader is not None else None
            sink.finish(name, result.ok, {**timings, **({"first_text_at": arrived} if arrived else {})})
        return result

    def restart(why: str) -> None:  # a new attempt: the partial text shown so far is void
        if reader is not None and sink is not None:
            reader.reset()
            sink.restart(name, why)

    for strategy in chain:
        if strategy == TOOL_CALL and _tools_unsupported(client) and strategy != chain[-1]:
            # the server said its chat template shows no tools: a forced tool call would be answered in text
            unsupported = ProviderError("unsupported", "tool_call: the server's chat template has no tools")
            request = build_request(strategy, base, name=name, wire_schema=wire, full_schema=shown_schema)
            rec.record(strategy=strategy, attempt=attempts + 1, kind="call", request=request, raw=None,
                       outcome="provider_error:unsupported", errors=[str(unsupported), "送信していません"],
                       fit={"not_sent": True})
            continue
        convo = list(base.messages)
        last: StructuredResult | None = None
        strategy_rejected = False
        repair_limit = limit
        for repair_no in range(max_repairs + 1):
            kind = "repair" if repair_no else "call"
            overflows = 0
            while True:  # one model call; a context overflow refits the same request (smaller) and tries again
                dressed = build_request(strategy, replace(base, messages=convo, max_tokens=repair_limit),
                                        name=name, wire_schema=wire, full_schema=shown_schema)
                request, fit = plan.prepare(dressed, tail=keep_tail + 2 if repair_no else keep_tail)
                first_attempt = attempts + 1
                if plan.overflow is None and fit.get("cannot_fit") and getattr(client, "token_ratio_exact", False):
                    plan.overflow = _wont_fit(plan, fit, model)  # counted with the server's tokenizer: never sent
                if plan.overflow is not None and (fit["size"] >= (plan.ceiling or 0) or fit.get("cannot_fit")):
                    err = plan.overflow  # it cannot get smaller: never resend an equal or larger prompt
                    rec.record(strategy=strategy, attempt=first_attempt, kind=kind, request=request, raw=None,
                               outcome="provider_error:context_overflow",
                               errors=[str(err), "これ以上縮められません（送信していません）"], fit={**fit, "not_sent": True})
                    return finish(_provider_failure(result_cls, err, last.raw if last else "", attempts, strategy,
                                                    model))
                if attempts or (reader is not None and reader.shown):
                    restart(kind)

                def log_failure(err: ProviderError, retry_no: int, latency_ms: float, request=request, fit=fit,
                                first_attempt=first_attempt, kind=kind) -> None:
                    rec.record(strategy=strategy, attempt=first_attempt + retry_no, kind="retry" if retry_no else kind,
                               request=request, raw=None, outcome=f"provider_error:{err.kind}", errors=[str(err)],
                               latency_ms=latency_ms, err=err, fit=fit)

                response, err, calls = _complete_with_retry(client, request, retry, budget, log_failure,
                                                            on_retry=lambda: restart("retry"))
                attempts += calls
                if err is not None and err.kind == "context_overflow" and overflows < MAX_OVERFLOW_REFITS:
                    overflows += 1
                    plan.overflowed(err, fit["size"])
                    logger.warning("context overflow on %s (server n_ctx=%s, prompt=%s): refitting smaller",
                                   strategy, err.n_ctx, err.n_prompt_tokens)
                    continue
                break
            if response is not None:
                timings = dict(response.timings)
                _calibrate(client, response.usage.get("prompt_tokens"), fit["size"])
            if err is not None and err.kind != "truncated":
                if err.kind not in UNSUPPORTED_KINDS:
                    return finish(_provider_failure(result_cls, err, last.raw if last else "", attempts, strategy,
                                                    model))
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
                               outcome="provider_error:bad_response", errors=[str(err)], response=response, err=err,
                               fit=fit)
                    return finish(_provider_failure(result_cls, err, "", attempts, strategy, model))
                if response.refusal and not (raw or "").strip():
                    refusal = _scrub_secrets(cap_output(str(response.refusal), max_bytes)[0])
                    err = ProviderError("refusal", refusal)
                    rec.record(strategy=strategy, attempt=attempts, kind=kind, request=request, raw=refusal,
                               outcome="provider_error:refusal", errors=[refusal], response=response, fit=fit)
                    return finish(_provider_failure(result_cls, err, refusal, attempts, strategy, model))
                if raw is None:  # a forced tool call answered without one (or nothing at all): method unsupported
                    said = response.content if strategy == TOOL_CALL else None
                    what = "tool call not answered with a tool call" if strategy == TOOL_CALL else "empty response"
                    unsupported = ProviderError("unsupported", f"{strategy}: {what}")
                    shown = _scrub_secrets(cap_output(said, max_bytes)[0]) if isinstance(said, str) else None
                    rec.record(strategy=strategy, attempt=attempts, kind=kind, request=request, raw=shown,
                               outcome="provider_error:unsupported", errors=[str(unsupported)], response=response,
                               fit=fit)
                    logger.warning("strategy %s got no %s from %s: falling back", strategy,
                                   "tool call" if strategy == TOOL_CALL else "output", rec.provider)
                    strategy_rejected = True
                    break
                raw, raw_bytes = cap_output(raw, max_bytes)
                raw = _scrub_secrets(raw)
                if raw_bytes is not None:
                    result = _truncated(result_cls, raw, raw_bytes, max_bytes, attempts, strategy)
                    outcome = "provider_error:truncated"
                else:  # validate first: a complete, valid object stands even when the server says "length"
                    result = _validate_leniently(validate, raw)
                    if not isinstance(result, result_cls):
                        result = result_cls(**result.__dict__)
                    if not result.ok and response.finish_reason == "length":
                        result = _truncated(result_cls, raw, None, max_bytes, attempts, strategy)
                        repair_limit = min(repair_limit * 2, max(limit, int(cap or DEFAULT_MAX_OUTPUT_TOKENS)))
                        outcome = "provider_error:truncated"
                    else:
                        outcome = "ok" if result.ok else (result.error_type or "error")
                rec.record(strategy=strategy, attempt=attempts, kind=kind, request=request, raw=raw,
                           outcome=outcome, errors=result.errors, response=response,
                           parse_stage=result.parse_stage, raw_bytes=raw_bytes, fit=fit)
            result.attempts, result.method, result.repairs = attempts, strategy, repair_no
            if result.ok:
                if KNOWN_SECRETS and result.data is not None:
                    result.data = _scrub_data(result.data)
                return finish(result)
            last = result
            if repair_no < max_repairs:
                convo = list(base.messages) + [
                    {"role": "assistant", "content": _head(raw)},
                    {"role": "user", "content": repair_instruction(raw, result, fields)},
                ]
        if last is not None and not strategy_rejected:
            return finish(last)  # repairs exhausted: ok=False with the last raw output
    err = unsupported or ProviderError("unsupported", "no strategy configured")
    return finish(_provider_failure(result_cls, err, "", attempts, chain[-1] if chain else None, model))


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
    same kind of deadline; the request alternates, fits the context and carries the plain-text output
    limit; every attempt is logged with strategy ``plain_text``."""
    retry = retry or DEFAULT_RETRY
    model = getattr(client, "model", "")
    rec = _Recorder(log, tags or CallTags(), getattr(client, "name", type(client).__name__), model, client)
    max_bytes = int(getattr(client, "max_output_bytes", None) or DEFAULT_MAX_OUTPUT_BYTES)
    limit = output_limit(cap=getattr(client, "max_output_tokens", None))
    base = LLMRequest(messages=[dict(m) for m in messages], task=task, temperature=temperature, max_tokens=limit,
                      timeout=getattr(client, "timeout", None) or 60.0, context=dict(context or {}))
    request, fit = _Plan(client, limit, 1).prepare(base, tail=1)
    budget = _budget(client, request.timeout, deadline, retry)

    def log_failure(err: ProviderError, retry_no: int, latency_ms: float) -> None:
        rec.record(strategy="plain_text", attempt=retry_no + 1, kind="retry" if retry_no else "call",
                   request=request, raw=None, outcome=f"provider_error:{err.kind}", errors=[str(err)],
                   latency_ms=latency_ms, err=err, fit=fit)

    response, err, calls = _complete_with_retry(client, request, retry, budget, log_failure)
    if response is None:
        return None
    _calibrate(client, response.usage.get("prompt_tokens"), fit["size"])
    raw = response.content if response.content is not None else response.tool_arguments
    raw_bytes = None
    if isinstance(raw, str):
        raw, raw_bytes = cap_output(raw, max_bytes)
        raw = _scrub_secrets(raw)
    else:
        raw = None
    rec.record(strategy="plain_text", attempt=calls, kind="retry" if calls > 1 else "call", request=request,
               raw=raw, outcome="ok" if raw else "empty", response=response, raw_bytes=raw_bytes, fit=fit)
    return raw or None
