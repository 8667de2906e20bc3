"""Hybrid search over the vehicle manuals: Chroma holds the chunks and vectors, memory serves queries.

:class:`ManualRetriever` keeps an immutable in-memory copy of the collection (chunks sorted by
vehicle so each vehicle is one contiguous slice, their vector matrix, BM25 over their tokens) and
answers searches from it alone: dense scores are one matrix product over the vehicle's slice,
BM25 scores come from posting lists, and coverage and fusion are computed for the top candidates
only (:mod:`core.rag.hybrid`). Writes (:meth:`index_pdf`, :meth:`sync_manuals`, removals) go to
Chroma in bulk (one revision bump per call) and update the copy incrementally: tokens come from a
cache keyed by text hash and passage vectors from the shipped/cached vectors
(:mod:`core.rag.cache`), so a change re-tokenises and re-embeds only new text and rebuilds BM25
once. :func:`get_manual_retriever` is the process-wide instance: on first use it (re)indexes
``data/manuals/*.json`` when the collection is empty or a manual changed (a content hash per
vehicle is kept in the collection metadata), all changed manuals in one write; later processes
reopen from a local snapshot of the copy (:mod:`core.rag.snapshot`) when the collection has not
changed since, else from Chroma.

When another process writes to, drops or rebuilds the collection, the store notices or re-opens
it (see :mod:`core.rag.store`) and the retriever reloads its in-memory copy before answering (and
before writing); while no collection exists, searches raise
:class:`~core.rag.store.IndexUnavailable` (a Japanese notice).
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from core.documents import extract_document, paragraphs_from_lines
from core.engine import current_turn
from core.paths import DATA_DIR
from core.rag import cache, embeddings, snapshot
from core.rag.bm25 import BM25Index, Vocabulary
from core.rag.chunks import CHUNKER_VERSION, document_chunks, manual_chunks
from core.rag.hybrid import CANDIDATE_K, RRF_K, fuse, top_k
from core.rag.reading import ReadingIndex
from core.rag.records import Chunk, IngestReport, RetrievedChunk
from core.rag.store import ChromaStore
from core.text.ja_tokens import get_tokenizer

log = logging.getLogger(__name__)

MANUALS_DIR = DATA_DIR / "manuals"
_HASH_KEY = "kaiwa_manual_hash:"  # + vehicle_id, in the collection metadata


def manual_hash(raw: bytes) -> str:
    return hashlib.sha256(CHUNKER_VERSION.encode() + b"\0" + raw).hexdigest()[:32]


def _pdf_pages(name: str, data: bytes, password: str | None) -> tuple[list[list[str]], Any]:
    doc = extract_document(name, data, password=password)
    if doc.error:
        return [], doc
    page_texts = list(getattr(doc, "page_texts", None) or [])
    if page_texts:
        return [paragraphs_from_lines(t) for t in page_texts], doc
    return [list(doc.paragraphs)], doc


@dataclass(frozen=True)
class _Index:
    """One immutable in-memory copy of the collection (swapped whole on every change)."""

    chunks: list[Chunk]
    vectors: np.ndarray  # (len(chunks), dims), row i = chunk i
    token_ids: list[np.ndarray]
    bm25: BM25Index
    vehicles: dict[str, tuple[int, int]]  # vehicle_id -> [start, end) in chunks
    position: dict[str, int]
    generation: int


Change = tuple[str, "str | None", list[Chunk]]  # (vehicle_id, source or None for all, new chunks)


class ManualRetriever:
    """See module docstring. ``store`` may be a :class:`ChromaStore` or a chromadb client;
    ``cache_dir`` overrides where token/vector caches and the index snapshot live."""

    def __init__(self, store: Any = None, embedder: Any = None, tokenizer: Any = None,
                 collection: str | None = None, cache_dir: Path | None = None):
        if isinstance(store, ChromaStore):
            self.store = store
            self.embedder = embedder or store.embedder
        else:
            if embedder is None:
                embedder = embeddings.get_default_embedder()
            self.embedder = embedder
            kwargs = {"base_name": collection} if collection else {}
            self.store = ChromaStore(client=store, embedder=embedder, **kwargs)
        self.tokenizer = tokenizer or get_tokenizer()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else cache.cache_dir()
        self.passage_embedder = (self.embedder if isinstance(self.embedder, cache.CachingEmbedder)
                                 else cache.CachingEmbedder(self.embedder, self.cache_dir))
        self.token_cache = cache.TokenCache(self.tokenizer, self.cache_dir)
        self._vocab = Vocabulary()
        self._ids_by_hash: dict[str, np.ndarray] = {}
        self._lock = threading.RLock()
        self._saver: threading.Thread | None = None
        self.reloads = 0  # full reads of the collection (from Chroma or the snapshot)
        self.last_reload = ""  # "snapshot" or "store": where the last full read came from
        self._readings = ReadingIndex()
        self._readings_of: Any = None  # the index whose texts the readings hold
        self._checked = threading.local()  # per thread: the user turn whose reads found the collection current
        self.freshness_checks = 0  # looks at the collection (Chroma's get_collection) made by reads
        self._index = self._build([], np.zeros((0, 0), dtype=np.float32), -1)
        self.reload()

    # --- the in-memory copy ------------------------------------------------------------------
    @property
    def _chunks(self) -> list[Chunk]:
        return self._index.chunks

    @property
    def _generation(self) -> int:
        return self._index.generation

    def _token_ids(self, chunks: list[Chunk]) -> list[np.ndarray]:
        texts = [c.search_text() for c in chunks]
        keys = [cache.text_hash(t) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._ids_by_hash]
        if missing:
            tokens = self.token_cache.tokens([texts[i] for i in missing])
            for i, toks in zip(missing, tokens):
                self._ids_by_hash[keys[i]] = self._vocab.encode(toks)
        return [self._ids_by_hash[k] for k in keys]

    def _build(self, chunks: list[Chunk], vectors: np.ndarray, generation: int,
               token_ids: list[np.ndarray] | None = None) -> _Index:
        order = sorted(range(len(chunks)), key=lambda i: (chunks[i].vehicle_id, chunks[i].chunk_id))
        if order != list(range(len(chunks))):
            chunks = [chunks[i] for i in order]
            vectors = vectors[order] if len(vectors) else vectors
            token_ids = [token_ids[i] for i in order] if token_ids is not None else None
        if token_ids is None:
            token_ids = self._token_ids(chunks)
        bm25 = BM25Index(self.tokenizer, vocab=self._vocab)
        bm25.build_ids(token_ids)
        vehicles: dict[str, tuple[int, int]] = {}
        for i, c in enumerate(chunks):
            start = vehicles.get(c.vehicle_id, (i, i))[0]
            vehicles[c.vehicle_id] = (start, i + 1)
        return _Index(chunks=chunks, vectors=np.ascontiguousarray(vectors, dtype=np.float32), token_ids=token_ids,
                      bm25=bm25, vehicles=vehicles, position={c.chunk_id: i for i, c in enumerate(chunks)},
                      generation=generation)

    def _snapshot_path(self) -> Path:
        return snapshot.snapshot_path(self.cache_dir, self.store.name)

    def _from_snapshot(self, revision: tuple[str, str | None]) -> _Index | None:
        snap = snapshot.load(self._snapshot_path(), revision, self.store.count()) if revision[1] else None
        if snap is None:
            return None
        remap = self._vocab.encode(snap.tokens_vocab)
        flat = remap[snap.tokens_flat] if len(snap.tokens_flat) else snap.tokens_flat.astype(np.int32)
        offsets = snap.tokens_offsets
        token_ids = [flat[offsets[i]:offsets[i + 1]] for i in range(len(snap.chunks))]
        return self._build(snap.chunks, snap.vectors, getattr(self.store, "generation", 0), token_ids)

    def _save_snapshot(self, index: _Index, revision: tuple[str, str | None]) -> None:
        """Write the local snapshot of ``index`` in the background (the previous write finishes first)."""
        if not revision[1]:
            return
        previous = self._saver

        def write() -> None:
            if previous is not None:
                previous.join()
            flat = np.concatenate(index.token_ids) if index.token_ids else np.zeros(0, dtype=np.int32)
            offsets = np.concatenate([[0], np.cumsum([len(t) for t in index.token_ids])]).astype(np.int64)
            vocab = [""] * len(self._vocab)
            for token, i in list(self._vocab.ids.items()):
                if i < len(vocab):
                    vocab[i] = token
            snapshot.save(self._snapshot_path(), snapshot.Snapshot(
                revision=(str(revision[0]), str(revision[1])), chunks=index.chunks, vectors=index.vectors,
                tokens_vocab=vocab, tokens_flat=flat, tokens_offsets=offsets))

        self._saver = threading.Thread(target=write, name="kaiwa-index-snapshot", daemon=True)
        self._saver.start()

    def flush(self) -> None:
        """Wait for a pending snapshot write (tests, benchmarks, shutdown)."""
        saver = self._saver
        if saver is not None:
            saver.join()

    # --- index maintenance -------------------------------------------------------------------
    def reload(self) -> None:
        """Re-read the whole collection (from the local snapshot when it is current) and rebuild."""
        with self._lock:
            generation = getattr(self.store, "generation", 0)
            revision = self.store.revision() if hasattr(self.store, "revision") else ("", None)
            index = self._from_snapshot(revision)
            self.last_reload = "snapshot" if index is not None else "store"
            if index is None:
                chunks, vectors = self.store.read_all(vectors=True)
                if vectors is None or len(vectors) != len(chunks):
                    vectors = self.passage_embedder.passages([c.embed_text() for c in chunks])
                index = self._build(chunks, vectors, generation)
                self._save_snapshot(index, revision)
            self._index = index
            self.reloads += 1

    def ensure_current(self) -> None:
        """Reload when the collection changed since the last read (another process or replica
        wrote to it or rebuilt it); :class:`~core.rag.store.IndexUnavailable` while it is gone."""
        refresh = getattr(self.store, "refresh", None)
        if refresh is not None:
            refresh()
        if getattr(self.store, "generation", 0) != self._index.generation:
            self.reload()

    def _current_for_read(self) -> None:
        """:meth:`ensure_current` for a search or a query expansion: once per user turn (the searches of one
        turn see one state of the collection; :func:`core.engine.current_turn`), on every read outside
        one. Writes always check."""
        turn = current_turn()
        if turn is not None and getattr(self._checked, "turn", None) is turn:
            return
        self.freshness_checks += 1
        self.ensure_current()
        self._checked.turn = turn

    def _apply(self, changes: list[Change], *, drop: tuple[str, ...] = (), **meta: Any) -> None:
        """For each (vehicle, source, chunks): replace that vehicle's chunks of that source (every
        source when None) with ``chunks``. One store write (deletes by id, bulk upsert, one
        revision bump with ``meta`` merged), then one incremental rebuild of the copy."""
        new = [c for _, _, chunks in changes for c in chunks]
        vectors = (self.passage_embedder.passages([c.embed_text() for c in new]) if new
                   else np.zeros((0, 0), dtype=np.float32))
        whole = {v for v, source, _ in changes if source is None}
        pairs = {(v, source) for v, source, _ in changes if source is not None}
        with self._lock:
            self.ensure_current()  # other processes' writes first
            old = self._index
            new_ids = {c.chunk_id for c in new}
            gone = [i for i, c in enumerate(old.chunks)
                    if c.vehicle_id in whole or (c.vehicle_id, c.source) in pairs]
            self.store.replace([old.chunks[i].chunk_id for i in gone], new, vectors, drop=drop, **meta)
            gone_set = set(gone)
            keep = [i for i, c in enumerate(old.chunks) if i not in gone_set and c.chunk_id not in new_ids]
            chunks = [old.chunks[i] for i in keep] + new
            if len(old.vectors) and len(vectors):
                matrix = np.concatenate([old.vectors[keep], vectors])
            elif len(vectors):
                matrix = np.asarray(vectors, dtype=np.float32)
            else:
                matrix = old.vectors[keep] if len(old.vectors) else np.zeros((0, 0), dtype=np.float32)
            token_ids = [old.token_ids[i] for i in keep] + self._token_ids(new)
            index = self._build(chunks, matrix, getattr(self.store, "generation", 0), token_ids)
            self._index = index
            self._save_snapshot(index, self.store.revision())

    def index_manual(self, manual: dict) -> int:
        """Index one manual dict; replaces that vehicle's manual chunks (uploaded PDFs stay)."""
        chunks = manual_chunks(manual)
        self._apply([(str(manual["vehicle_id"]), "manual", chunks)])
        return len(chunks)

    def index_pdf(self, vehicle_id: str, name: str, data: bytes, password: str | None = None, *,
                  attribution: Mapping[str, str] | None = None) -> IngestReport:
        """Extract an uploaded document in memory and index it for ``vehicle_id``; re-uploading
        the same file name replaces its chunks. Errors come back on the report, not raised.
        ``attribution`` (``records.ATTRIBUTION_KEYS``) is stored on every chunk. No permission
        check here: callers acting for a user go through :mod:`core.rag.manual_admin`."""
        report = IngestReport(vehicle_id=vehicle_id, name=name, attribution=dict(attribution or {}))
        pages, doc = _pdf_pages(name, data, password)
        report.pages = getattr(doc, "pages", None)
        report.warnings = list(getattr(doc, "warnings", []) or [])
        if getattr(doc, "error", None):
            report.error = doc.error
            return report
        chunks = document_chunks(vehicle_id, name, pages)
        for chunk in chunks:
            chunk.attribution = dict(report.attribution)
        if not chunks:
            report.error = "文書から検索できるテキストが見つかりませんでした。"
            return report
        self._apply([(vehicle_id, f"pdf:{name}", chunks)])
        report.chunks = len(chunks)
        return report

    def remove_vehicle(self, vehicle_id: str) -> None:
        self._apply([(vehicle_id, None, [])])

    def remove_source(self, vehicle_id: str, source: str) -> int:
        """Delete the chunks of one source (``"pdf:<name>"``) of a vehicle; returns how many."""
        with self._lock:
            self.ensure_current()
            n = sum(1 for c in self._index.chunks if c.vehicle_id == vehicle_id and c.source == source)
            self._apply([(vehicle_id, source, [])])
        return n

    def sync_manuals(self, manuals_dir: Path | None = None, force: bool = False) -> dict[str, int]:
        """Index every ``<vehicle_id>.json`` whose content hash differs from the stored one (or all
        with ``force``); drop manual chunks of vehicles whose file is gone. All of it is one store
        write and one rebuild. Returns ``{vehicle_id: chunks}`` for the manuals (re)indexed."""
        done: dict[str, int] = {}
        manuals_dir = Path(manuals_dir) if manuals_dir is not None else MANUALS_DIR
        with self._lock:
            self.ensure_current()
            files = sorted(Path(manuals_dir).glob("*.json")) if Path(manuals_dir).is_dir() else []
            with_manual = {c.vehicle_id for c in self._index.chunks if c.source == "manual"}
            present: set[str] = set()
            hashes: dict[str, str] = {}
            changes: list[Change] = []
            for path in files:
                raw = path.read_bytes()
                try:
                    manual = json.loads(raw)
                    vehicle_id = str(manual["vehicle_id"])
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("skipping manual %s: %s", path.name, exc)
                    continue
                present.add(vehicle_id)
                digest = manual_hash(raw)
                if force or vehicle_id not in with_manual or self.store.get_meta(_HASH_KEY + vehicle_id) != digest:
                    chunks = manual_chunks(manual)
                    changes.append((vehicle_id, "manual", chunks))
                    done[vehicle_id] = len(chunks)
                    hashes[_HASH_KEY + vehicle_id] = digest
            stale = with_manual - present
            changes += [(v, "manual", []) for v in sorted(stale)]
            if changes:
                self._apply(changes, drop=tuple(_HASH_KEY + v for v in stale), **hashes)
        return done

    # --- queries -----------------------------------------------------------------------------
    def vehicles(self) -> list[str]:
        return sorted(self._index.vehicles)

    def __len__(self) -> int:
        return len(self._index.chunks)

    def expand_query(self, query: str) -> str:
        """``query`` plus the manuals' spellings of the words it writes in kana or as a homophone
        (:mod:`core.rag.reading`); the flows call it before :meth:`search`."""
        self._current_for_read()
        index = self._index
        if self._readings_of is not index:  # the texts were read for this index already (it is immutable)
            self._readings.sync_texts((f"{c.chunk_id}|{len(c.text)}", f"{c.section}\n{c.text}") for c in index.chunks)
            self._readings_of = index
        return self._readings.expand(query)

    def prefetch(self, queries: list[str]) -> None:
        """Start the query vectors of hybrid searches for ``queries`` about to run
        (:meth:`core.rag.embeddings._Embedder.prefetch`): nothing when the index holds no vectors."""
        prefetch = getattr(self.embedder, "prefetch", None)
        if prefetch is not None and self._index.vectors.size:
            prefetch(queries)

    def search(self, query: str, vehicle_id: str | None = None, n_results: int = 5,
               mode: str = "hybrid") -> list[RetrievedChunk]:
        if mode not in ("hybrid", "bm25", "dense"):
            raise ValueError(f"unknown mode {mode!r} (expected hybrid, bm25 or dense)")
        if not query or not query.strip() or n_results <= 0:
            return []
        self._current_for_read()
        index = self._index  # immutable: a concurrent write swaps in a new one
        if vehicle_id:
            start, end = index.vehicles.get(vehicle_id, (0, 0))
        else:
            start, end = 0, len(index.chunks)
        if end <= start:
            return []
        bm25_scores = coverage = cosines = None
        if mode in ("hybrid", "bm25"):
            tokens = index.bm25.query_tokens(query)
            bm25_scores = index.bm25.scores(tokens)[start:end]
            coverage = lambda local: index.bm25.coverage(tokens, local + start)  # noqa: E731
        if mode in ("hybrid", "dense") and index.vectors.size:
            vector = np.asarray(self.embedder.query_vector(query), dtype=np.float32)
            full = index.vectors[start:end] @ vector
            # as a nearest-neighbour search would return them: only the top CANDIDATE_K have a cosine
            cosines = np.full(end - start, np.nan, dtype=np.float32)
            top = top_k(full, np.ones(full.size, dtype=bool), CANDIDATE_K)
            cosines[top] = full[top]
        fused = fuse(bm25_scores=bm25_scores, coverage=coverage, cosines=cosines,
                     cosine_range=self.embedder.cosine_range, mode=mode, n_results=n_results,
                     rrf_k=RRF_K, candidate_k=CANDIDATE_K)
        out = []
        for f in fused:
            c = index.chunks[start + f.index]
            out.append(RetrievedChunk(
                chunk_id=c.chunk_id, section_id=c.section_id, vehicle_id=c.vehicle_id, section=c.section,
                chapter=c.chapter, page=c.page, content_type=c.content_type, has_warning=c.has_warning,
                text=c.text, score=round(f.score, 4), bm25_rank=f.bm25_rank, dense_rank=f.dense_rank))
        return out


_instance: ManualRetriever | None = None
_instance_lock = threading.Lock()


def get_manual_retriever() -> ManualRetriever:
    """The process-wide retriever over the configured Chroma store, synced with data/manuals."""
    global _instance
    with _instance_lock:
        if _instance is None:
            retriever = ManualRetriever()
            retriever.sync_manuals()
            _instance = retriever
        return _instance


def reset_manual_retriever() -> None:
    """Forget the singleton (tests, or after changing the environment)."""
    global _instance
    with _instance_lock:
        _instance = None
