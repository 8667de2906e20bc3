"""How many questions to 「ナレッジに質問」 run at once in one process: :data:`ASK_SLOTS` side by side
(``KAIWA_ASK_CONCURRENCY``, 1–64, default 8), each in a slot of one ``threading.BoundedSemaphore``; a question
that finds every slot taken is refused at once with :class:`AskBusy` (the HTTP API's 429, the page's notice
in Japanese) instead of queueing behind the others. Questions in flight share the embedder (one engine per
process); what keeps a long one from holding the rest up is the bounded query text of
``core.rag.embeddings`` (and its cache of query vectors)."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator, Mapping

from core.env import bounded

DEFAULT_ASK_SLOTS = 8
ASK_BUSY_MESSAGE = ("ただいまナレッジへの質問が混み合っています（同時に受け付けられるのは {slots} 件までです）。"
                    "入力した質問はそのままです。数秒待ってからもう一度送信してください。")


def ask_slots(environ: Mapping[str, str] | None = None) -> int:
    """Questions answered at once: ``KAIWA_ASK_CONCURRENCY`` (1–64), else :data:`DEFAULT_ASK_SLOTS`."""
    return bounded("KAIWA_ASK_CONCURRENCY", DEFAULT_ASK_SLOTS, 1, 64, cast=int, environ=environ)


ASK_SLOTS = ask_slots()
_slots = threading.BoundedSemaphore(ASK_SLOTS)


class AskBusy(RuntimeError):
    """Every slot is taken: the question was not asked."""

    def __init__(self, slots: int = ASK_SLOTS):
        self.message = ASK_BUSY_MESSAGE.format(slots=slots)
        super().__init__(self.message)


@contextmanager
def ask_slot() -> Iterator[None]:
    """``with ask_slot():`` one question; :class:`AskBusy` at once when all :data:`ASK_SLOTS` are taken."""
    if not _slots.acquire(blocking=False):
        raise AskBusy()
    try:
        yield
    finally:
        _slots.release()
