"""Streaming replies: the user-facing text of a JSON answer, read while the model is still writing it.

A client that streams calls ``request.on_delta(raw_so_far, arrived_at)`` with everything the model has
written so far (content, or a tool call's argument text) and when the chunk arrived (``perf_counter``). :class:`FieldReader` parses that partial JSON with
``jiter``'s partial mode (``trailing-strings``: an unfinished string is returned as far as it goes) and
hands the one field the user reads (``assistant_message``, ``message``, ``answer``) to a
:class:`StreamSink` whenever it grows. Nothing is validated here: the engine validates the whole
answer when the stream ends, and tells the sink to ``restart`` before a repair or another strategy so
the page replaces the partial text visibly, and ``finish`` at the end.

The sink is not passed through every flow: the page sets it around a turn with :func:`stream_to`
(a context variable, so it reaches the engine in the same thread and nothing else), and a flow's call
names the field to stream (``structured_call(..., stream_field="message")``). Without a sink nothing
is parsed.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator, Protocol, runtime_checkable

import jiter


@runtime_checkable
class StreamSink(Protocol):
    """Where streamed text goes (the page's placeholder). ``key`` names the call (its task), so one turn
    with several streamed calls can show each in its own place."""

    def update(self, key: str, text: str) -> None:
        """The text so far for ``key``; it replaces what was shown."""

    def restart(self, key: str, reason: str) -> None:
        """A new attempt for ``key`` (repair, next strategy, retry): what was shown is void."""

    def finish(self, key: str, ok: bool, timings: dict[str, float]) -> None:
        """The call for ``key`` ended (``ok``: a valid answer); ``timings`` as in ``LLMResponse.timings``."""


_SINK: ContextVar[StreamSink | None] = ContextVar("kaiwa_stream_sink", default=None)


@contextmanager
def stream_to(sink: StreamSink | None) -> Iterator[StreamSink | None]:
    """Every engine call inside that names a ``stream_field`` streams that field into ``sink``."""
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


def current_sink() -> StreamSink | None:
    return _SINK.get()


def partial_field(raw: str, field: str) -> tuple[str | None, bool]:
    """``(text so far, complete)`` of the top-level string ``field`` in the partial JSON object that
    starts at the first ``{`` of ``raw`` (text or a code fence before it is skipped). ``complete`` is
    True once a later key has begun. ``(None, False)`` when there is no such string yet."""
    start = raw.find("{")
    if start < 0:
        return None, False
    try:
        data = jiter.from_json(raw[start:].encode("utf-8", "replace"), partial_mode="trailing-strings")
    except ValueError:
        return None, False
    if not isinstance(data, dict):
        return None, False
    value = data.get(field)
    if not isinstance(value, str):
        return None, False
    keys = list(data)
    return value, keys.index(field) < len(keys) - 1


class FieldReader:
    """``reader(raw_so_far)``: sends ``field``'s text to ``sink`` under ``key`` whenever it changes; stops
    parsing once the field is complete. ``shown`` is the last text sent."""

    def __init__(self, sink: StreamSink, key: str, field: str):
        self.sink, self.key, self.field = sink, key, field
        self.shown = ""
        self.complete = False
        self.updates = 0
        self.first_text_arrived_at: float | None = None  # perf_counter: the chunk that brought the first character

    def reset(self) -> None:
        self.shown, self.complete, self.first_text_arrived_at = "", False, None

    def __call__(self, raw_so_far: str, arrived_at: float | None = None) -> None:
        if self.complete or not raw_so_far:
            return
        text, complete = partial_field(raw_so_far, self.field)
        if text is not None and text != self.shown:
            if not self.shown and text:
                self.first_text_arrived_at = arrived_at if arrived_at is not None else time.perf_counter()
            self.shown = text
            self.updates += 1
            self.sink.update(self.key, text)
        self.complete = complete


class RecordingSink:
    """A sink that keeps what it was sent (for the CLI, the benchmark and tests):
    ``events`` = [(kind, key, value)], ``texts[key]`` = the text last shown."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.texts: dict[str, str] = {}

    def update(self, key: str, text: str) -> None:
        self.events.append(("update", key, text))
        self.texts[key] = text

    def restart(self, key: str, reason: str) -> None:
        self.events.append(("restart", key, reason))
        self.texts[key] = ""

    def finish(self, key: str, ok: bool, timings: dict[str, float]) -> None:
        self.events.append(("finish", key, {"ok": ok, **timings}))

    def updates(self, key: str | None = None) -> list[str]:
        return [v for kind, k, v in self.events if kind == "update" and (key is None or k == key)]
