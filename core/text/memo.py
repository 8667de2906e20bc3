"""Bounded memos of pure functions of one text: a turn asks for the same symptom's or manual section's result
several times, so a short text's result is remembered (least recently used dropped) and a long one (hostile
input up to the request's bound) is worked out every time, so the memo stays small."""
from __future__ import annotations

from functools import lru_cache, wraps
from typing import Any, Callable, TypeVar

R = TypeVar("R")


def short_text_memo(size: int, max_chars: int) -> Callable[[Callable[[Any], R]], Callable[[Any], R]]:
    """Decorate ``f(text)``: a ``str`` of at most ``max_chars`` characters is worked out once and remembered
    (``size`` texts); anything else is worked out every time. The memo is ``f.memo`` (``cache_info``,
    ``cache_clear``); the undecorated function ``f.__wrapped__``."""
    def decorate(function: Callable[[Any], R]) -> Callable[[Any], R]:
        memo = lru_cache(maxsize=size)(function)

        @wraps(function)
        def call(text: Any) -> R:
            return memo(text) if isinstance(text, str) and len(text) <= max_chars else function(text)

        call.memo = memo  # type: ignore[attr-defined]
        return call
    return decorate
