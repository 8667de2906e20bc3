"""OpenAI-compatible client over the official ``openai`` SDK (OpenAI, Azure OpenAI v1, Ollama,
vLLM, llama.cpp server: anything speaking ``/v1/chat/completions``).

The SDK's own retries are off (``max_retries=0``): the engine retries transient errors itself so
that every attempt is logged. ``request.timeout`` bounds the whole request, not the gap between
reads: the call runs in a worker thread that the caller stops waiting for at the limit (the worker
drops the body at its next chunk). The body is read in chunks and capped, then checked to be a
chat completion; anything else (HTML from a proxy, empty ``choices``, another JSON shape) is a
typed ``bad_response``, never a Python exception.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
from openai import OpenAI

from core.llm.base import (DEFAULT_MAX_OUTPUT_BYTES, ERROR_BODY_CHARS, LLMRequest, LLMResponse, ProviderError,
                           classify_exception)

# Cap on the HTTP body, well above the output cap: JSON escapes (\uXXXX) inflate text up to 6x.
BODY_CAP_FACTOR = 8
BODY_CAP_SLACK = 64 * 1024


class OpenAICompatibleClient:
    name = "openai"

    def __init__(self, *, model: str, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 60.0, http_client: httpx.Client | None = None,
                 max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES):
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
        self._sdk = OpenAI(api_key=api_key or "not-needed", base_url=base_url or None,
                           timeout=timeout, max_retries=0, http_client=http_client)

    @property
    def max_body_bytes(self) -> int:
        return self.max_output_bytes * BODY_CAP_FACTOR + BODY_CAP_SLACK

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages,
                                  "temperature": request.temperature}
        if request.max_tokens:
            kwargs["max_tokens"] = request.max_tokens
        if request.response_format:
            kwargs["response_format"] = request.response_format
        if request.tools:
            kwargs["tools"] = request.tools
            if request.tool_choice is not None:
                kwargs["tool_choice"] = request.tool_choice
        return kwargs

    def complete(self, request: LLMRequest) -> LLMResponse:
        budget = max(0.01, float(request.timeout or self.timeout))
        started = time.perf_counter()
        cancel = threading.Event()
        box: dict[str, Any] = {}
        worker = threading.Thread(target=self._fetch, args=(request, budget, cancel, box),
                                  name="kaiwa-llm-request", daemon=True)
        worker.start()
        worker.join(budget)
        if worker.is_alive():
            cancel.set()
            raise ProviderError("timeout", f"応答が {budget:g} 秒以内に完了しませんでした", model=self.model)
        if "error" in box:
            raise box["error"]
        if "body" not in box:  # pragma: no cover - the worker always leaves one or the other
            raise ProviderError("unknown", "応答がありませんでした", model=self.model)
        response = parse_completion(box["body"], model=self.model)
        response.latency_ms = (time.perf_counter() - started) * 1000
        return response

    def _fetch(self, request: LLMRequest, budget: float, cancel: threading.Event, box: dict[str, Any]) -> None:
        """Worker: send the request and read the body in chunks, up to the body cap."""
        try:
            with self._sdk.chat.completions.with_streaming_response.create(
                    **self._kwargs(request), timeout=budget) as response:
                body = bytearray()
                for chunk in response.iter_bytes():
                    if cancel.is_set():
                        return
                    body += chunk
                    if len(body) > self.max_body_bytes:
                        raise ProviderError("truncated", f"応答が大きすぎます（{self.max_body_bytes} バイト超）",
                                            response.status_code, body=bytes(body[:ERROR_BODY_CHARS]).decode(
                                                "utf-8", "replace"), model=self.model)
            box["body"] = bytes(body)
        except Exception as exc:  # typed for the engine; never leaks SDK internals upward
            box["error"] = classify_exception(exc, model=self.model)


def _bad(message: str, body: bytes | str = b"", model: str = "") -> ProviderError:
    text = body if isinstance(body, str) else body[:ERROR_BODY_CHARS].decode("utf-8", "replace")
    return ProviderError("bad_response", message, 200, body=text[:ERROR_BODY_CHARS] or None, model=model)


def _text_parts(content: Any) -> str | None:
    """``content`` as a string: some servers send a list of ``{"type": "text", "text": …}`` parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if len(parts) == len(content):
            return "".join(parts)
    raise TypeError("content is neither text nor text parts")


def parse_completion(body: bytes, *, model: str = "") -> LLMResponse:
    """An :class:`LLMResponse` from a chat-completion body, or a ``bad_response`` ProviderError."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        head = body[:80].decode("utf-8", "replace").strip().lower()
        what = "HTML ページ" if head.startswith(("<!doctype", "<html", "<")) else "JSON ではない本文"
        raise _bad(f"200 応答が chat completion ではありません（{what}）", body, model) from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise _bad("200 応答が chat completion の形ではありません（choices がありません）", body, model)
    if not data["choices"]:
        raise _bad("200 応答の choices が空でした", body, model)
    choice = data["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise _bad("200 応答の choices[0] に message がありません", body, model)
    try:
        content = _text_parts(message.get("content"))
        tool_arguments = None
        calls = message.get("tool_calls")
        if calls:
            function = calls[0]["function"]
            arguments = function.get("arguments")
            tool_arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        refusal = message.get("refusal")
        if refusal is not None and not isinstance(refusal, str):
            refusal = json.dumps(refusal, ensure_ascii=False)
    except (TypeError, KeyError, IndexError, AttributeError):
        raise _bad("200 応答の message の形が不正です", body, model) from None
    usage = data.get("usage")
    usage = {k: v for k, v in usage.items() if isinstance(v, (int, float))} if isinstance(usage, dict) else {}
    finish = choice.get("finish_reason")
    served = data.get("model")
    return LLMResponse(content=content, tool_arguments=tool_arguments, refusal=refusal or None, usage=usage,
                       model=served if isinstance(served, str) and served else model,
                       finish_reason=finish if isinstance(finish, str) else None)
