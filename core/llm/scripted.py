"""``ScriptedClient``: a deterministic client for tests that replays a list of responses."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from core.llm.base import LLMRequest, LLMResponse


class ScriptExhausted(RuntimeError):
    """The test script has no response left for a request."""


class ScriptedClient:
    """Each item is a string (the model's text), an exception instance (raised), or a callable
    ``fn(request) -> str`` for replies that depend on the request. Every request is kept in
    ``.requests``. When the request carries tools, the text is returned as tool-call arguments."""

    name = "scripted"

    def __init__(self, responses: Iterable[Any], model: str = "scripted-model", strategies: tuple[str, ...] | None = None):
        self._responses = list(responses)
        self.model = model
        self.requests: list[LLMRequest] = []
        if strategies is not None:
            self.strategies = strategies

    @property
    def remaining(self) -> int:
        return len(self._responses)

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self._responses:
            raise ScriptExhausted(f"script exhausted after {len(self.requests) - 1} responses")
        item = self._responses.pop(0)
        if isinstance(item, BaseException):
            raise item
        text = item(request) if callable(item) else item
        if request.tools:
            return LLMResponse(tool_arguments=text, model=self.model, usage={"total_tokens": 0})
        return LLMResponse(content=text, model=self.model, usage={"total_tokens": 0})


ResponseFn = Callable[[LLMRequest], str]
