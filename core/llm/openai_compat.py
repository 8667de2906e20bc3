"""OpenAI-compatible client over the official ``openai`` SDK (OpenAI, Azure OpenAI v1, Ollama,
vLLM, llama.cpp server: anything speaking ``/v1/chat/completions``).

The SDK's own retries are off (``max_retries=0``): the engine retries transient errors itself so
that every attempt is logged.
"""
from __future__ import annotations

import time
from typing import Any

import httpx
from openai import OpenAI

from core.llm.base import LLMRequest, LLMResponse, classify_exception


class OpenAICompatibleClient:
    name = "openai"

    def __init__(self, *, model: str, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 60.0, http_client: httpx.Client | None = None):
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
        self._sdk = OpenAI(api_key=api_key or "not-needed", base_url=base_url or None,
                           timeout=timeout, max_retries=0, http_client=http_client)

    def complete(self, request: LLMRequest) -> LLMResponse:
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
        started = time.perf_counter()
        try:
            completion = self._sdk.chat.completions.create(**kwargs, timeout=request.timeout or self.timeout)
        except Exception as exc:  # typed for the engine; never leaks SDK internals upward
            raise classify_exception(exc) from exc
        latency = (time.perf_counter() - started) * 1000
        choice = completion.choices[0]
        message = choice.message
        tool_arguments = None
        if message.tool_calls:
            tool_arguments = message.tool_calls[0].function.arguments
        usage = completion.usage.model_dump(exclude_none=True) if completion.usage else {}
        return LLMResponse(content=message.content, tool_arguments=tool_arguments,
                           refusal=getattr(message, "refusal", None), usage=usage,
                           model=completion.model or self.model, latency_ms=latency,
                           finish_reason=choice.finish_reason)
