"""The client protocol every provider implements, and the typed provider errors.

A client takes an :class:`LLMRequest` (messages plus optional response_format / tools, and the output
limit ``max_tokens``) and returns an :class:`LLMResponse` (content or tool-call arguments, usage,
latency, the model the server reported, stream timings). ``task`` and ``context`` name the job and
carry structured facts for the offline policies; they never go over the wire. ``LLMRequest.timeout``
limits one response read whole; ``budget`` is what is left of the turn's deadline, over everything; a
streaming client applies its own time-to-first-token and between-token limits inside it. ``on_delta(raw_so_far)``, when set, is called (in the caller's thread) as
the answer grows.

Provider errors are typed by cause, not by status code (:func:`classify_exception`): a context
overflow (llama.cpp, vLLM and OpenAI word it differently) is ``context_overflow`` with the server's
``n_ctx`` / ``n_prompt_tokens`` when it says them; a chat template that refuses the message roles is
``template``; a content filter (Azure OpenAI ``content_filter``) is ``content_filter``; a server that
rejects the structured-output method (``response_format``, tools) is ``unsupported``; any other 400 is
``bad_request``.
"""
from __future__ import annotations

import email.utils
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

import httpx

# ``bad_response``: a 200 that is not a usable chat completion (HTML from a proxy, empty choices).
TRANSIENT_KINDS = frozenset({"timeout", "connection", "rate_limit", "server_error", "bad_response"})
# Only these move the engine down the strategy chain: the provider rejected the method itself (or a
# 400 of no known cause, which another request shape may pass). Never a context overflow or a template.
UNSUPPORTED_KINDS = frozenset({"bad_request", "unsupported"})
# Which timer fired (ProviderError.timer): shown in the sidebar and kept in debug records.
TIMERS_JA = {"first_token": "最初のトークン待ち（サーバーの待ち行列を含む）", "token_gap": "トークン間の待ち",
             "request": "1 回の応答全体", "deadline": "ターン全体の制限時間"}

DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024
ERROR_BODY_CHARS = 2000  # how much of a server's error body is kept (masked later) for tuners
SERVER_MESSAGE_CHARS = 300  # how much of the server's own message is shown to the user


@dataclass
class LLMRequest:
    messages: list[dict[str, Any]]
    task: str = ""
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    temperature: float = 0.2
    max_tokens: int | None = None
    timeout: float = 60.0
    context: dict[str, Any] = field(default_factory=dict)
    on_delta: Callable[..., None] | None = None  # (raw answer so far, chunk arrival perf_counter) while it streams
    budget: float | None = None  # seconds left of the turn's deadline (None: ``timeout``)


@dataclass
class LLMResponse:
    content: str | None = None
    tool_arguments: str | None = None
    refusal: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    latency_ms: float = 0.0
    finish_reason: str | None = None
    streamed: bool = False
    # ms from sending: first_token_ms (first content / tool-call text), done_ms; sent_at / first_token_at:
    # time.perf_counter() stamps; server_* from the server's own timings (llama.cpp prompt_ms, predicted_ms)
    timings: dict[str, float] = field(default_factory=dict)
    limit_param: str | None = None  # max_completion_tokens / max_tokens: the name the limit went under


class ProviderError(Exception):
    """A provider call that failed; ``kind`` says how (see TRANSIENT_KINDS / UNSUPPORTED_KINDS).

    ``retry_after`` is the server's Retry-After in seconds (429/503), ``body`` the head of the
    server's response body (unmasked: masked when logged), ``model`` the model that was asked.
    """

    def __init__(self, kind: str, message: str = "", status: int | None = None, *,
                 retry_after: float | None = None, body: str | None = None, model: str = "",
                 timer: str | None = None, n_ctx: int | None = None, n_prompt_tokens: int | None = None,
                 param: str | None = None):
        super().__init__(message or kind)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.body = body
        self.model = model
        self.timer = timer  # timeout: first_token / token_gap / request (TIMERS_JA)
        self.n_ctx = n_ctx  # context_overflow: the server's context size and the prompt's tokens, when said
        self.n_prompt_tokens = n_prompt_tokens
        self.param = param  # unsupported_param: the request field the server refused

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT_KINDS


@runtime_checkable
class ChatClient(Protocol):
    name: str
    model: str

    def complete(self, request: LLMRequest) -> LLMResponse: ...


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(str(value).strip()[:32]) / divisor
        except ValueError:
            if header == "retry-after-ms":
                continue
            try:
                when = email.utils.parsedate_to_datetime(str(value)[:64])
            except (TypeError, ValueError, IndexError, OverflowError):
                return None
            seconds = when.timestamp() - time.time()
        if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN / inf
            return None
        return max(0.0, seconds)
    return None


def _server_message(body: Any, text: str) -> str:
    """The server's own error message: ``{"error": {"message": …}}`` or ``{"message": …}``."""
    node = body
    if isinstance(node, dict) and isinstance(node.get("error"), (dict, str)):
        node = node["error"]
    if isinstance(node, dict):
        node = node.get("message") or node.get("detail") or node.get("error")
    if isinstance(node, str) and node.strip():
        return node.strip()[:SERVER_MESSAGE_CHARS]
    if node is not None and not isinstance(node, (dict, list)):
        return str(node)[:SERVER_MESSAGE_CHARS]
    return text.strip()[:SERVER_MESSAGE_CHARS]


def _response_text(response: Any) -> str:
    try:
        return response.text[:ERROR_BODY_CHARS]
    except Exception:  # noqa: BLE001 - a streamed body that was never read
        return ""


# ---- 400s by cause ---------------------------------------------------------------------------
# Context overflow as each server words it (matched on the lower-cased type, code and message):
#   llama.cpp  400 type exceed_context_size_error: "request (1981 tokens) exceeds the available context
#              size (512 tokens), try increasing it" (+ n_prompt_tokens, n_ctx in the body)
#   vLLM       "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000
#              in the messages, 1000 in the completion)..." (older); "'max_tokens' or 'max_completion_tokens'
#              is too large: 1000. This model's maximum context length is 1024 tokens and your request has 25
#              input tokens"; "You passed 1015 input tokens and requested 10 output tokens. However, the
#              model's context length is only 1024 tokens..." (0.16+); "...you requested 65535 output tokens
#              and your prompt contains at least 62466 input tokens" (0.20)
#   OpenAI     code context_length_exceeded: "This model's maximum context length is 128000 tokens. However,
#              your messages resulted in 130000 tokens. Please reduce the length of the messages."
OVERFLOW_MARKERS = ("exceed_context_size_error", "context_length_exceeded", "maximum context length",
                    "context length is only", "exceeds the available context size", "exceeds the context window",
                    "exceeds the context length", "input tokens exceed", "prompt is too long",
                    "reduce the length of the messages", "reduce the length of the input")
_N_CTX = (re.compile(r"maximum context length is (\d{1,9})"), re.compile(r"context length is only (\d{1,9})"),
          re.compile(r"available context size \((\d{1,9}) tokens?\)"), re.compile(r"context window of (\d{1,9})"))
_N_PROMPT = (re.compile(r"\((\d{1,9}) in the messages"), re.compile(r"messages resulted in (\d{1,9})"),
             re.compile(r"you passed (\d{1,9}) input tokens"), re.compile(r"request \((\d{1,9}) tokens?\)"),
             re.compile(r"prompt contains at least (\d{1,9})"), re.compile(r"request has (\d{1,9}) input tokens"),
             re.compile(r"prompt is too long: (\d{1,9})"))
FILTER_MARKERS = ("content_filter", "content management policy", "responsibleaipolicyviolation")
TEMPLATE_MARKERS = ("roles must alternate", "jinja exception", "raise_exception", "conversation roles")
METHOD_MARKERS = ("json schema error", "response_format", "json_schema", "tool_choice", "tools", "function",
                  "structured output", "grammar")
PARAM_MARKERS = ("unsupported parameter", "unrecognized request argument", "unknown parameter", "not supported",
                 "extra inputs are not permitted", "unexpected keyword", "extra_forbidden", "not permitted")


def _first_int(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def _refused_param(node: dict[str, Any], text: str) -> str | None:
    """The request field a 400 refuses (token-limit name, stream options, streaming), if it names one."""
    param = node.get("param") if isinstance(node.get("param"), str) else None
    if param in ("max_tokens", "max_completion_tokens", "stream_options", "stream"):
        return param
    if "use 'max_completion_tokens'" in text or 'use "max_completion_tokens"' in text:
        return "max_tokens"
    if "use 'max_tokens'" in text or 'use "max_tokens"' in text:
        return "max_completion_tokens"
    for name in ("max_completion_tokens", "stream_options", "max_tokens"):
        if name in text:
            return name
    if "'stream'" in text or '"stream"' in text or "streaming" in text:
        return "stream"
    return None


def classify_bad_request(status: int, body: Any, text: str, *, model: str = "", retry_after: float | None = None
                         ) -> ProviderError:
    """A 400/422 typed by what the server says caused it (see the markers above)."""
    node = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    node = node if isinstance(node, dict) else {}
    said = _server_message(body, text)
    server = f"サーバーの応答: {said}" if said else f"HTTP {status}"
    blob = " ".join(str(node.get(k) or "") for k in ("type", "code", "message", "detail"))
    blob = f"{blob} {text[:ERROR_BODY_CHARS]}".lower()
    kw: dict[str, Any] = {"body": text or None, "model": model, "retry_after": retry_after}
    if any(marker in blob for marker in OVERFLOW_MARKERS):
        n_ctx = node.get("n_ctx") if isinstance(node.get("n_ctx"), int) else _first_int(_N_CTX, blob)
        n_prompt = (node.get("n_prompt_tokens") if isinstance(node.get("n_prompt_tokens"), int)
                    else _first_int(_N_PROMPT, blob))
        size = f"（コンテキスト長 {n_ctx} トークン" + (f"、入力 {n_prompt} トークン）" if n_prompt else "）") if n_ctx else ""
        return ProviderError("context_overflow", f"入力がモデルのコンテキスト長を超えました{size}。{server}", status,
                             n_ctx=n_ctx, n_prompt_tokens=n_prompt, **kw)
    if any(marker in blob for marker in FILTER_MARKERS):  # Azure OpenAI's content filter (code content_filter)
        return ProviderError("content_filter", f"安全フィルターにより入力がブロックされました ({status})。{server}", status, **kw)
    if "json schema error" in blob:
        return ProviderError("unsupported", f"構造化出力のスキーマが受け付けられませんでした ({status})。{server}", status, **kw)
    if any(marker in blob for marker in TEMPLATE_MARKERS):
        return ProviderError("template", f"チャットテンプレートがメッセージの並びを受け付けませんでした ({status})。{server}",
                             status, **kw)
    if any(marker in blob for marker in PARAM_MARKERS):
        param = _refused_param(node, blob)
        if param is not None:
            return ProviderError("unsupported_param", f"パラメーター {param} が受け付けられませんでした ({status})。{server}",
                                 status, param=param, **kw)
    if any(marker in blob for marker in METHOD_MARKERS):
        return ProviderError("unsupported", f"構造化出力の方式が受け付けられませんでした ({status})。{server}", status, **kw)
    return ProviderError("bad_request", f"リクエストが受け付けられませんでした ({status})。{server}", status, **kw)


DROPPED = "dropped"  # ProviderError.timer of a connection lost mid-answer (a server killed while it answered)


# Transport errors by class name: the openai SDK's own HTTP stack (httpx2 / httpcore2 in openai 3.x), httpx and
# httpcore name them alike, in different modules.
DROPPED_ERRORS = frozenset({"RemoteProtocolError", "ReadError", "WriteError", "ConnectionResetError", "BrokenPipeError",
                            "IncompleteRead", "ProtocolError"})
CONNECT_ERRORS = frozenset({"ConnectError", "ConnectionRefusedError", "NetworkError", "TransportError", "ProxyError"})
TIMEOUT_ERRORS = frozenset({"ReadTimeout", "WriteTimeout", "ConnectTimeout", "PoolTimeout", "TimeoutException"})


def _chain(exc: BaseException, depth: int = 6) -> list[BaseException]:
    out: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and len(out) < depth and node not in out:
        out.append(node)
        node = node.__cause__ or node.__context__
    return out


def _dropped(exc: BaseException) -> str | None:
    """The name of the transport error when ``exc`` (or what it wraps) is a connection that broke after the
    request was sent (the body cut off, the peer gone): RemoteProtocolError / ReadError / WriteError of any
    HTTP stack, or a reset socket. None otherwise."""
    for node in _chain(exc):
        if type(node).__name__ in DROPPED_ERRORS:
            return type(node).__name__
    return None


def classify_exception(exc: BaseException, *, model: str = "") -> ProviderError:
    """Map any exception from a client (openai SDK, httpx, builtins) to a typed ProviderError."""
    if isinstance(exc, ProviderError):
        if model and not exc.model:
            exc.model = model
        return exc
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a hard dependency
        openai = None
    dropped = _dropped(exc)
    if dropped is not None:
        return ProviderError("connection", f"サーバーとの接続が応答の途中で切れました ({dropped})", model=model,
                             timer=DROPPED)
    if openai is not None:
        if isinstance(exc, openai.APITimeoutError):
            return ProviderError("timeout", "応答がタイムアウトしました", model=model)
        if isinstance(exc, openai.APIConnectionError):
            return ProviderError("connection", "接続できませんでした", model=model)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = _response_text(exc.response)
            body = getattr(exc, "body", None)
            if body is None and text:
                try:
                    body = json.loads(text)
                except ValueError:
                    body = None
            said = _server_message(body, text)
            server = f"サーバーの応答: {said}" if said else f"HTTP {status}"
            retry_after = parse_retry_after(getattr(exc.response, "headers", None))
            if status == 401:
                kind, message = "auth", f"認証に失敗しました (401)。{server}"
            elif status == 403:
                kind, message = "forbidden", f"このモデルを使う権限がありません (403)。{server}"
            elif status == 404:
                kind, message = "not_found", f"モデル {model or '?'} が見つかりません (404)。{server}"
            elif status == 408:
                kind, message = "timeout", f"応答がタイムアウトしました (408)。{server}"
            elif status == 429:
                kind, message = "rate_limit", f"利用上限 (429) に達しました。{server}"
            elif status >= 500:
                kind, message = "server_error", f"サーバーエラー ({status})。{server}"
            else:
                return classify_bad_request(status, body, text, model=model, retry_after=retry_after)
            return ProviderError(kind, message, status, retry_after=retry_after, body=text or None, model=model)
    if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
        return ProviderError("timeout", "応答がタイムアウトしました", model=model)
    if isinstance(exc, httpx.TransportError):
        return ProviderError("connection", "接続できませんでした", model=model)
    if isinstance(exc, ConnectionError):
        return ProviderError("connection", "接続できませんでした", model=model)
    names = {type(node).__name__ for node in _chain(exc)}
    if names & TIMEOUT_ERRORS:
        return ProviderError("timeout", "応答がタイムアウトしました", model=model)
    if names & CONNECT_ERRORS:
        return ProviderError("connection", "接続できませんでした", model=model)
    # Never the exception's own text: it can carry internals (IndexError, AttributeError…).
    return ProviderError("unknown", "予期しないエラーが発生しました", model=model)
