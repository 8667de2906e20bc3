"""The shared body of the providers built on a vendor SDK (Amazon Bedrock, Google Gemini, IBM watsonx.ai).

Each provider module turns an :class:`~core.llm.base.LLMRequest` (OpenAI-shaped messages, and the
``response_format`` / forced ``tools`` that :mod:`core.llm.strategies` put on it) into its SDK's call, and
the SDK's answer (or its streamed events) into *parts*. This class does everything else the same way for
all of them, as :class:`~core.llm.openai_compat.OpenAICompatibleClient` does for OpenAI:

- the SDK is called in a worker thread; the caller's thread waits on a queue with the timer that applies:
  ``first_token_timeout`` (sending until the first text, a queue included) and ``token_gap_timeout``
  (silence between chunks) while streaming, ``timeout`` for a whole response, and ``request.budget`` (what
  is left of the turn's deadline) over everything. A call that times out is abandoned (its stream closed
  when the worker next wakes) and ``last_timeout`` says which timer fired;
- ``request.on_delta(raw_so_far, arrived_at)`` is called in the caller's thread as the answer grows;
- the answer is capped at ``max_body_bytes`` (``truncated``), usage is reported as ``prompt_tokens`` /
  ``completion_tokens``, the stop reason as ``stop`` / ``length`` / ``tool_calls``, and a stop by the
  service's safety filter (``content_filter``) is the typed ``content_filter`` error;
- every exception is typed by the provider's ``classify`` (throttling ``rate_limit``, ``forbidden``,
  ``auth``, ``not_found``, ``context_overflow``, ``content_filter``, ``unsupported`` …) before it leaves.

A part is ``("text", str)``, ``("tool", str)`` (a forced tool call's argument text), ``("finish", reason)``,
``("usage", {"prompt_tokens": n, "completion_tokens": m})`` or ``("model", id)``.

SDKs are optional extras, imported only when a provider is used: :func:`require` raises the typed
``missing_sdk`` error whose Japanese message names the extra to install.
"""
from __future__ import annotations

import importlib
import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from core.llm.base import DEFAULT_MAX_OUTPUT_BYTES, LLMRequest, LLMResponse, ProviderError

logger = logging.getLogger("kaiwa.llm")

BODY_CAP_FACTOR = 8  # as the OpenAI client: well above the output cap the engine applies
BODY_CAP_SLACK = 64 * 1024
FILTERED = "content_filter"
EXTRAS = {"bedrock": ("boto3", "Amazon Bedrock"), "gemini": ("google-genai", "Google Gemini"),
          "watsonx": ("ibm-watsonx-ai", "IBM watsonx.ai")}


def missing_sdk_message(extra: str) -> str:
    package, label = EXTRAS[extra]
    return (f"{label} を使うには SDK ({package}) が必要ですが、インストールされていません。"
            f"`pip install -r requirements-{extra}.txt`（または `pip install .[{extra}]`）でインストールしてから、"
            "コンソールを再起動してください。")


def require(module: str, extra: str) -> Any:
    """``importlib.import_module(module)``, or the typed ``missing_sdk`` error naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ProviderError("missing_sdk", missing_sdk_message(extra)) from None


def split_system(messages: list[dict[str, Any]]) -> tuple[str, list[tuple[str, str]]]:
    """``(system text, [(role, text)])`` of OpenAI-shaped messages (already alternating: the engine's
    :func:`core.llm.messages.alternate`); an empty turn is sent as one space (some services refuse blanks)."""
    system: list[str] = []
    turns: list[tuple[str, str]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        text = str(content or "")
        if message.get("role") in ("system", "developer"):
            system.append(text)
        else:
            turns.append(("assistant" if message.get("role") == "assistant" else "user", text or " "))
    return "\n\n".join(s for s in system if s), turns


def forced_tool(request: LLMRequest) -> dict[str, Any] | None:
    """The one function tool of a ``tool_call`` request (``{"name", "description", "parameters"}``)."""
    for tool in request.tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            return function
    return None


def json_schema_format(request: LLMRequest) -> dict[str, Any] | None:
    """``{"name", "schema"}`` of a ``structured_output`` request's response_format, else None."""
    fmt = request.response_format or {}
    spec = fmt.get("json_schema") if fmt.get("type") == "json_schema" else None
    return spec if isinstance(spec, dict) and isinstance(spec.get("schema"), dict) else None


class SDKChatClient:
    """Base of the SDK providers: subclasses set ``name`` and implement ``_parts(request, stream, timeout)``
    (a generator of parts, run in the worker thread) and ``classify(exc)``."""

    name = "sdk"
    extra = ""  # the optional extra that installs this provider's SDK

    def __init__(self, *, model: str, timeout: float = 60.0, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
                 first_token_timeout: float | None = None, token_gap_timeout: float | None = None,
                 stream: bool = True, context_tokens: int | None = None, max_output_tokens: int | None = None,
                 embedding_model: str | None = None):
        self.model = model
        self.embedding_model = embedding_model
        self.timeout = float(timeout)
        self.max_output_bytes = max_output_bytes
        self.first_token_timeout = float(first_token_timeout or timeout)
        self.token_gap_timeout = float(token_gap_timeout or min(timeout, 30.0))
        self.stream = stream
        self.context_tokens = context_tokens
        self.max_output_tokens = max_output_tokens
        self.token_ratio = 1.0
        self.limit_param = "max_tokens"
        self.server_info = None
        self.last_timeout: dict[str, Any] | None = None

    @property
    def max_body_bytes(self) -> int:
        return self.max_output_bytes * BODY_CAP_FACTOR + BODY_CAP_SLACK

    # ---- what a provider implements --------------------------------------------------------------
    def _parts(self, request: LLMRequest, stream: bool, timeout: float) -> Iterator[tuple[str, Any]]:
        raise NotImplementedError

    def classify(self, exc: BaseException) -> ProviderError:
        raise NotImplementedError

    def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        raise ProviderError("unsupported", f"{self.name} には埋め込みモデルがありません")

    # ---- one call ---------------------------------------------------------------------------------
    def complete(self, request: LLMRequest) -> LLMResponse:
        budget = max(0.01, float(request.budget if request.budget is not None else request.timeout))
        try:
            return self._run(request, budget)
        except ProviderError as err:
            if not err.model:
                err.model = self.model
            if err.kind == "timeout":
                seconds = {"first_token": self.first_token_timeout, "token_gap": self.token_gap_timeout,
                           "request": float(request.timeout or self.timeout)}.get(err.timer or "", round(budget, 1))
                self.last_timeout = {"timer": err.timer, "seconds": seconds, "at": time.time()}
            raise

    def _run(self, request: LLMRequest, budget: float) -> LLMResponse:
        stream = bool(self.stream)
        started = time.perf_counter()
        end = started + budget
        events: queue.Queue = queue.Queue()
        cancel = threading.Event()
        sdk_timeout = min(float(request.timeout or self.timeout), budget) + 5
        worker = threading.Thread(target=self._work, args=(request, stream, sdk_timeout, cancel, events),
                                  name=f"kaiwa-{self.name}", daemon=True)
        worker.start()
        text: list[str] = []
        tool: list[str] | None = None
        usage: dict[str, Any] = {}
        finish: str | None = None
        served = ""
        first_at: float | None = None
        size = 0
        while True:
            now = time.perf_counter()
            if not stream:
                limit, timer = started + float(request.timeout or self.timeout) - now, "request"
            elif first_at is None:
                limit, timer = started + self.first_token_timeout - now, "first_token"
            else:
                limit, timer = self.token_gap_timeout, "token_gap"
            if end - now <= limit:
                limit, timer = end - now, "deadline"
            try:
                kind, value, at = events.get(timeout=max(0.0, limit))
            except queue.Empty:
                cancel.set()
                what = {"first_token": "最初のトークンが", "token_gap": "次のトークンが"}.get(timer, "応答が")
                seconds = {"first_token": self.first_token_timeout, "token_gap": self.token_gap_timeout,
                           "request": float(request.timeout or self.timeout)}.get(timer, budget)
                raise ProviderError("timeout", f"{what} {seconds:g} 秒以内に届きませんでした", timer=timer) from None
            if kind == "error":
                raise value
            if kind == "end":
                break
            if kind in ("text", "tool") and value:
                size += len(value.encode("utf-8", "replace"))
                if size > self.max_body_bytes:
                    cancel.set()
                    raise ProviderError("truncated", f"応答が大きすぎます（{self.max_body_bytes} バイト超）", 200,
                                        body="".join(text if tool is None else tool)[:2000])
                if kind == "text":
                    text.append(value)
                else:
                    tool = (tool or []) + [value]
                if first_at is None:
                    first_at = at
                if request.on_delta is not None:
                    request.on_delta("".join(tool) if tool is not None else "".join(text), at)
            elif kind == "tool":  # a tool call with empty arguments still is a tool call
                tool = tool or []
            elif kind == "finish":
                finish = value
            elif kind == "usage":
                usage.update({k: v for k, v in value.items() if isinstance(v, (int, float))})
            elif kind == "model" and value:
                served = str(value)
        if finish == FILTERED:
            raise ProviderError(FILTERED, "サービスの安全フィルターにより応答がブロックされました"
                                          + (f"（{''.join(text)[:200]}）" if text else ""), 200)
        latency = (time.perf_counter() - started) * 1000
        timings: dict[str, float] = {"sent_at": started, "done_ms": round(latency, 1)}
        if first_at is not None:
            timings.update(first_token_at=first_at, first_token_ms=round((first_at - started) * 1000, 1))
        return LLMResponse(content="".join(text) if text else None,
                           tool_arguments="".join(tool) if tool is not None else None, usage=usage,
                           model=served or self.model, latency_ms=latency, finish_reason=finish, streamed=stream,
                           timings=timings, limit_param=self.limit_param if request.max_tokens else None)

    def _work(self, request: LLMRequest, stream: bool, timeout: float, cancel: threading.Event,
              events: queue.Queue) -> None:
        """Worker: run the provider's generator, queueing ``(kind, value, perf_counter)``; then ("end") or
        ("error", ProviderError). Stops (closing the generator, so its stream) once the caller gave up."""
        parts: Iterable[tuple[str, Any]] | None = None
        try:
            parts = self._parts(request, stream, timeout)
            for kind, value in parts:
                if cancel.is_set():
                    break
                events.put((kind, value, time.perf_counter()))
            events.put(("end", None, time.perf_counter()))
        except Exception as exc:  # noqa: BLE001 - every failure goes to the caller typed
            if not cancel.is_set():
                events.put(("error", self._typed(exc), time.perf_counter()))
        finally:
            close = getattr(parts, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing an abandoned stream is best effort
                    pass

    def _typed(self, exc: BaseException) -> ProviderError:
        if isinstance(exc, ProviderError):
            return exc
        try:
            err = self.classify(exc)
        except Exception:  # noqa: BLE001 - a classifier bug must not hide the failure
            logger.warning("could not classify %s from %s", type(exc).__name__, self.name)
            err = ProviderError("unknown", "予期しないエラーが発生しました")
        err.model = err.model or self.model
        return err


def status_kind(status: int | None) -> str | None:
    """The kind an HTTP status says by itself (None: a 400/422 whose cause is in the message)."""
    if status is None:
        return None
    return {401: "auth", 403: "forbidden", 404: "not_found", 408: "timeout", 429: "rate_limit"}.get(
        status, "server_error" if status >= 500 else None)


KIND_TEXT = {"auth": "認証に失敗しました", "forbidden": "このモデルを使う権限がありません",
             "not_found": "モデルが見つかりません", "rate_limit": "利用上限（スロットリング）に達しました",
             "server_error": "サービス側でエラーが発生しました", "timeout": "応答がタイムアウトしました",
             "connection": "接続できませんでした", FILTERED: "サービスの安全フィルターにより入力または出力がブロックされました",
             "unsupported": "構造化出力の方式が受け付けられませんでした", "bad_request": "リクエストが受け付けられませんでした",
             "config": "プロバイダーの設定が不足しています"}


def typed(kind: str, said: str, status: int | None = None, *, code: str = "", body: str | None = None,
          retry_after: float | None = None, n_ctx: int | None = None, n_prompt_tokens: int | None = None
          ) -> ProviderError:
    """A ProviderError with the Japanese sentence for ``kind`` and the service's own words after it."""
    where = f" ({code or status})" if (code or status) else ""
    text = KIND_TEXT.get(kind, "モデルの呼び出しに失敗しました")
    if kind == "context_overflow":
        size = (f"（コンテキスト長 {n_ctx} トークン" + (f"、入力 {n_prompt_tokens} トークン）" if n_prompt_tokens else "）")
                if n_ctx else "")
        text = f"入力がモデルのコンテキスト長を超えました{size}"
    message = f"{text}{where}。サービスの応答: {said[:300]}" if said else f"{text}{where}。"
    return ProviderError(kind, message, status, body=body, retry_after=retry_after, n_ctx=n_ctx,
                         n_prompt_tokens=n_prompt_tokens)
