"""The client protocol every provider implements, and the typed provider errors.

A client takes an :class:`LLMRequest` (messages plus optional response_format / tools) and returns
an :class:`LLMResponse` (content or tool-call arguments, usage, latency). ``task`` and ``context``
name the job and carry structured facts for the offline policies; they never go over the wire.
``LLMRequest.timeout`` bounds one whole request (not the gap between reads).
"""
from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

# ``bad_response``: a 200 that is not a usable chat completion (HTML from a proxy, empty choices).
TRANSIENT_KINDS = frozenset({"timeout", "connection", "rate_limit", "server_error", "bad_response"})
# Only these move the engine down the strategy chain: the provider rejected the method itself.
UNSUPPORTED_KINDS = frozenset({"bad_request", "unsupported"})

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


@dataclass
class LLMResponse:
    content: str | None = None
    tool_arguments: str | None = None
    refusal: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    latency_ms: float = 0.0
    finish_reason: str | None = None


class ProviderError(Exception):
    """A provider call that failed; ``kind`` says how (see TRANSIENT_KINDS / UNSUPPORTED_KINDS).

    ``retry_after`` is the server's Retry-After in seconds (429/503), ``body`` the head of the
    server's response body (unmasked: masked when logged), ``model`` the model that was asked.
    """

    def __init__(self, kind: str, message: str = "", status: int | None = None, *,
                 retry_after: float | None = None, body: str | None = None, model: str = ""):
        super().__init__(message or kind)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.body = body
        self.model = model

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
                kind, message = "bad_request", f"リクエストが受け付けられませんでした ({status})。{server}"
            return ProviderError(kind, message, status, retry_after=retry_after, body=text or None, model=model)
    if isinstance(exc, TimeoutError):
        return ProviderError("timeout", "応答がタイムアウトしました", model=model)
    if isinstance(exc, ConnectionError):
        return ProviderError("connection", "接続できませんでした", model=model)
    # Never the exception's own text: it can carry internals (IndexError, AttributeError…).
    return ProviderError("unknown", "予期しないエラーが発生しました", model=model)
