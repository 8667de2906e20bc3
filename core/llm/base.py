"""The client protocol every provider implements, and the typed provider errors.

A client takes an :class:`LLMRequest` (messages plus optional response_format / tools) and returns
an :class:`LLMResponse` (content or tool-call arguments, usage, latency). ``task`` and ``context``
name the job and carry structured facts for the offline policies; they never go over the wire.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

TRANSIENT_KINDS = frozenset({"timeout", "connection", "rate_limit", "server_error"})
UNSUPPORTED_KINDS = frozenset({"bad_request", "unsupported"})


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
    """A provider call that failed; ``kind`` says how (see TRANSIENT_KINDS / UNSUPPORTED_KINDS)."""

    def __init__(self, kind: str, message: str = "", status: int | None = None):
        super().__init__(message or kind)
        self.kind = kind
        self.status = status

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT_KINDS


@runtime_checkable
class ChatClient(Protocol):
    name: str
    model: str

    def complete(self, request: LLMRequest) -> LLMResponse: ...


def classify_exception(exc: BaseException) -> ProviderError:
    """Map any exception from a client (openai SDK, httpx, builtins) to a typed ProviderError."""
    if isinstance(exc, ProviderError):
        return exc
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a hard dependency
        openai = None
    if openai is not None:
        if isinstance(exc, openai.APITimeoutError):
            return ProviderError("timeout", "応答がタイムアウトしました")
        if isinstance(exc, openai.APIConnectionError):
            return ProviderError("connection", "接続できませんでした")
        if isinstance(exc, openai.RateLimitError):
            return ProviderError("rate_limit", "利用上限 (429) に達しました", 429)
        if isinstance(exc, openai.InternalServerError):
            return ProviderError("server_error", f"サーバーエラー ({exc.status_code})", exc.status_code)
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return ProviderError("auth", "認証に失敗しました（API キーを確認してください）", exc.status_code)
        if isinstance(exc, (openai.BadRequestError, openai.NotFoundError, openai.UnprocessableEntityError)):
            return ProviderError("bad_request", f"リクエストが受け付けられませんでした ({exc.status_code})", exc.status_code)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            kind = "server_error" if status >= 500 else ("rate_limit" if status == 429 else "bad_request")
            return ProviderError(kind, f"HTTP {status}", status)
    if isinstance(exc, TimeoutError):
        return ProviderError("timeout", "応答がタイムアウトしました")
    if isinstance(exc, ConnectionError):
        return ProviderError("connection", "接続できませんでした")
    return ProviderError("unknown", f"{type(exc).__name__}: {exc}")


PROVIDER_ERROR_JA = {
    "timeout": "モデルの応答がタイムアウトしました。時間をおいて再送信してください。",
    "connection": "モデルのサーバーに接続できませんでした。接続先 (OPENAI_BASE_URL) を確認してください。",
    "rate_limit": "利用上限 (429) に達しました。少し待ってから再送信してください。",
    "server_error": "モデルのサーバーでエラーが発生しました (5xx)。時間をおいて再送信してください。",
    "auth": "認証に失敗しました。API キーの設定を確認してください。",
    "bad_request": "このプロバイダーは指定した構造化出力の方式を受け付けませんでした。",
    "unsupported": "このプロバイダーは指定した構造化出力の方式に対応していません。",
    "refusal": "モデルが応答を拒否しました。入力内容を見直してください。",
    "unknown": "モデルの呼び出し中に予期しないエラーが発生しました。",
}
