"""Streaming replies on the flow pages: the user-facing text appears while the model writes it.

``with streaming(container):`` around a flow call sets a :class:`PageStream` as the engine's sink
(``core.llm.stream.stream_to``). Each streamed call (its task is the key) gets its own placeholder
in ``container``, filled with the text so far (safe markdown: no links, no images) and a cursor;
a repair, a retry or the next strategy replaces it visibly with a note, then the new text; at the end
the placeholders are emptied, because the page then draws the validated turn from the stored chat.

Each finished call leaves its figures in ``st.session_state.stream_stats`` (the last 20): updates,
restarts, the length of the text last shown, the server's time to first token, the time from that token to
the first character on the page (which includes the tokens the model writes before the field's text, such as
``{"assistant_message": "``), and the time from the chunk that brought the first character to the page (our
own part: partial JSON, safe markdown, the Streamlit element). Shown under the debug captions and read by the
benchmark.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

import streamlit as st

from core.llm.stream import stream_to
from ui.safe import safe_markdown

CURSOR = " ▌"
RESTART_NOTES = {"repair": "⚠️ 出力がスキーマに合わなかったため、書き直しています…",
                 "call": "⚠️ 別の方式で作成し直しています…", "retry": "⚠️ 応答が途切れたため、再試行しています…"}
LABELS = {"rag_answer": "📖 取扱説明書より"}  # a second streamed call of a turn is labelled
MAX_STATS = 20


class PageStream:
    """The sink: one placeholder per streamed call in ``container``."""

    def __init__(self, container: Any):
        self.container = container
        self.slots: dict[str, Any] = {}
        self.first_char_at: dict[str, float] = {}
        self.updates: dict[str, int] = {}
        self.restarts: dict[str, int] = {}
        self.shown: dict[str, str] = {}
        self.stats: list[dict[str, Any]] = []

    def _slot(self, key: str) -> Any:
        if key not in self.slots:
            self.slots[key] = self.container.empty()
        return self.slots[key]

    def update(self, key: str, text: str) -> None:
        label = LABELS.get(key)
        body = safe_markdown(text) + CURSOR
        self._slot(key).markdown(f"{label}\n\n{body}" if label else body)
        self.first_char_at.setdefault(key, time.perf_counter())
        self.updates[key] = self.updates.get(key, 0) + 1
        self.shown[key] = text

    def restart(self, key: str, reason: str) -> None:
        self.first_char_at.pop(key, None)
        self.restarts[key] = self.restarts.get(key, 0) + 1
        self.shown[key] = ""
        self._slot(key).caption(RESTART_NOTES.get(reason, RESTART_NOTES["call"]))

    def finish(self, key: str, ok: bool, timings: dict[str, float]) -> None:
        stat: dict[str, Any] = {"key": key, "ok": ok, "updates": self.updates.get(key, 0),
                                "restarts": self.restarts.get(key, 0), "chars": len(self.shown.get(key, ""))}
        first_char, first_token, sent = self.first_char_at.get(key), timings.get("first_token_at"), timings.get("sent_at")
        if first_token is not None and sent is not None:
            stat["server_ttft_ms"] = round((first_token - sent) * 1000, 1)
        if first_char is not None and first_token is not None:
            stat["token_to_page_ms"] = round((first_char - first_token) * 1000, 2)
        if first_char is not None and timings.get("first_text_at") is not None:  # our own part: chunk → page
            stat["text_chunk_to_page_ms"] = round((first_char - timings["first_text_at"]) * 1000, 2)
        self.stats.append(stat)
        for per_call in (self.first_char_at, self.updates, self.restarts, self.shown):  # a next call of the same
            per_call.pop(key, None)  # task (the answer guards' regeneration) is timed and counted on its own

    def clear(self) -> None:
        for slot in self.slots.values():
            slot.empty()
        history = list(st.session_state.get("stream_stats") or []) + self.stats
        st.session_state.stream_stats = history[-MAX_STATS:]


@contextmanager
def streaming(container: Any = None) -> Iterator[PageStream]:
    """Stream every flow call inside into placeholders in ``container`` (default: here on the page)."""
    sink = PageStream(container if container is not None else st.container())
    try:
        with stream_to(sink):
            yield sink
    finally:
        sink.clear()


def stream_caption() -> None:
    """Debug mode: the last streamed call's figures."""
    stats = st.session_state.get("stream_stats") or []
    if not stats:
        return
    last = stats[-1]
    parts = [f"ストリーミング: 更新 {last['updates']} 回"]
    if "server_ttft_ms" in last:
        parts.append(f"最初のトークンまで {last['server_ttft_ms']:.0f} ms")
    if "token_to_page_ms" in last:
        parts.append(f"最初のトークンから画面表示まで {last['token_to_page_ms']:.1f} ms")
    if last["restarts"]:
        parts.append(f"書き直し {last['restarts']} 回")
    st.caption(" · ".join(parts))
