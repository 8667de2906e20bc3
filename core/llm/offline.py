"""The built-in offline provider: deterministic, rule-driven policies that answer like a model.

Each task (the schema name of a structured call) maps to a policy function ``fn(request) -> dict | str``
in the flow's own package. The reply goes back through the same parse / validate path as a real
model's, as content or as tool-call arguments depending on the strategy. When the caller streams
(``request.on_delta``), the reply is handed over in ``STREAM_CHUNK_CHARS`` pieces first, so the page's
streaming path runs with no model at all (no delay is added).
"""
from __future__ import annotations

import importlib
import json
import time
from typing import Any, Callable

from core.llm.base import LLMRequest, LLMResponse, ProviderError

STREAM_CHUNK_CHARS = 12

POLICIES: dict[str, str] = {
    "knowledge_llm_turn": "core.knowledge.offline_interviewer:respond",
    # seed 000 §10 answer call: whole sentences of the cited manual section (NO_RAG answer without one)
    "rag_answer": "core.diagnosis.rag:offline_answer",
}


def register_policy(task: str, target: str) -> None:
    """Register ``module:function`` as the offline policy for ``task``."""
    POLICIES[task] = target


class OfflineClient:
    name = "offline"

    def __init__(self, model: str = "rules-v1"):
        self.model = model
        self._cache: dict[str, Callable[[LLMRequest], Any]] = {}

    def _policy(self, task: str) -> Callable[[LLMRequest], Any]:
        if task not in self._cache:
            target = POLICIES.get(task)
            if target is None:
                raise ProviderError("unsupported", f"offline provider has no policy for task '{task}'")
            module_name, func_name = target.split(":")
            self._cache[task] = getattr(importlib.import_module(module_name), func_name)
        return self._cache[task]

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.perf_counter()
        reply = self._policy(request.task)(request)
        text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        timings: dict[str, float] = {}
        if request.on_delta is not None:
            timings = {"sent_at": started, "first_token_at": time.perf_counter()}
            for end in range(STREAM_CHUNK_CHARS, len(text) + STREAM_CHUNK_CHARS, STREAM_CHUNK_CHARS):
                request.on_delta(text[:end])
        latency = (time.perf_counter() - started) * 1000
        streamed = request.on_delta is not None
        if request.tools:
            return LLMResponse(tool_arguments=text, model=self.model, latency_ms=latency, streamed=streamed,
                               timings=timings)
        return LLMResponse(content=text, model=self.model, latency_ms=latency, streamed=streamed, timings=timings)
