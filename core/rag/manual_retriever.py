"""Hybrid search over the vehicle manuals: Chroma for vectors, in-memory BM25 for words.

:class:`ManualRetriever` keeps every chunk of the Chroma collection in memory too (a few hundred),
rebuilding the BM25 index from them after each change, so chunks added by :meth:`index_pdf` are
found by both retrievers, also after a restart. :func:`get_manual_retriever` is the process-wide
instance: on first use it (re)indexes ``data/manuals/*.json`` when the collection is empty or a
manual changed (a content hash per vehicle is kept in the collection metadata); later calls and
later processes reuse the persisted collection and only rebuild BM25 (well under a second).

When another process writes to, drops or rebuilds the collection, the store notices or re-opens
it (see :mod:`core.rag.store`) and the retriever reloads its in-memory copy before answering;
while no collection exists, searches raise :class:`~core.rag.store.IndexUnavailable` (a Japanese
notice).
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from core.paths import DATA_DIR
from core.rag.bm25 import BM25Index
from core.rag.chunks import CHUNKER_VERSION, document_chunks, manual_chunks
from core.rag.hybrid import CANDIDATE_K, RRF_K, fuse
from core.rag.ja_tokens import get_tokenizer
from core.rag.records import Chunk, IngestReport, RetrievedChunk
from core.rag.store import ChromaStore

log = logging.getLogger(__name__)

MANUALS_DIR = DATA_DIR / "manuals"
_HASH_KEY = "kaiwa_manual_hash:"  # + vehicle_id, in the collection metadata


def manual_hash(raw: bytes) -> str:
    return hashlib.sha256(CHUNKER_VERSION.encode() + b"\0" + raw).hexdigest()[:32]


def _pdf_pages(name: str, data: bytes, password: str | None) -> tuple[list[list[str]], Any]:
    from core.attachments import extract_document

    doc = extract_document(name, data, password=password)
    if doc.error:
        return [], doc
    page_texts = list(getattr(doc, "page_texts", None) or [])
    if page_texts:
        try:
            from core.attachments import paragraphs_from_lines
        except ImportError:  # pragma: no cover - older attachments module
            def paragraphs_from_lines(text: str) -> list[str]:
                return [p.strip() for p in text.split("\n\n") if p.strip()]
        return [paragraphs_from_lines(t) for t in page_texts], doc
    return [list(doc.paragraphs)], doc


class ManualRetriever:
    """See module docstring. ``store`` may be a :class:`ChromaStore` or a chromadb client."""

    def __init__(self, store: Any = None, embedder: Any = None, tokenizer: Any = None,
                 collection: str | None = None):
        if isinstance(store, ChromaStore):
            self.store = store
            self.embedder = embedder or store.embedder
        else:
            if embedder is None:
                from core.rag.embeddings import get_default_embedder

                embedder = get_default_embedder()
            self.embedder = embedder
            kwargs = {"base_name": collection} if collection else {}
            self.store = ChromaStore(client=store, embedder=embedder, **kwargs)
        self.tokenizer = tokenizer or get_tokenizer()
        self._lock = threading.RLock()
        self._chunks: list[Chunk] = []
        self._position: dict[str, int] = {}
        self._vehicle_of: np.ndarray = np.array([], dtype=object)
        self._bm25 = BM25Index(self.tokenizer)
        self._generation = -1  # the store generation the in-memory copy was read from
        self.reload()

    # --- index maintenance -------------------------------------------------------------------
    def reload(self) -> None:
        """Re-read all chunks from the store and rebuild BM25."""
        with self._lock:
            chunks = self.store.all_chunks()
            generation = getattr(self.store, "generation", 0)
            bm25 = BM25Index(self.tokenizer)
            bm25.build([c.search_text() for c in chunks])
            self._chunks = chunks
            self._position = {c.chunk_id: i for i, c in enumerate(chunks)}
            self._vehicle_of = np.array([c.vehicle_id for c in chunks], dtype=object)
            self._bm25 = bm25
            self._generation = generation

    def ensure_current(self) -> None:
        """Reload when the collection changed since the last read (another process or replica
        wrote to it or rebuilt it); :class:`~core.rag.store.IndexUnavailable` while it is gone."""
        refresh = getattr(self.store, "refresh", None)
        if refresh is not None:
            refresh()
        if getattr(self.store, "generation", 0) != self._generation:
            self.reload()

    def _replace(self, where: dict, chunks: list[Chunk]) -> None:
        vectors = self.embedder.passages([c.embed_text() for c in chunks]) if chunks else None
        with self._lock:
            self.store.delete(where)
            if chunks:
                self.store.add(chunks, vectors)
            self.reload()

    def index_manual(self, manual: dict) -> int:
        """Index one manual dict; replaces that vehicle's manual chunks (uploaded PDFs stay)."""
        chunks = manual_chunks(manual)
        vehicle_id = str(manual["vehicle_id"])
        self._replace({"$and": [{"vehicle_id": vehicle_id}, {"source": "manual"}]}, chunks)
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
        self._replace({"$and": [{"vehicle_id": vehicle_id}, {"source": f"pdf:{name}"}]}, chunks)
        report.chunks = len(chunks)
        return report

    def remove_vehicle(self, vehicle_id: str) -> None:
        self._replace({"vehicle_id": vehicle_id}, [])

    def remove_source(self, vehicle_id: str, source: str) -> int:
        """Delete the chunks of one source (``"pdf:<name>"``) of a vehicle; returns how many."""
        self.ensure_current()
        with self._lock:
            n = sum(1 for c in self._chunks if c.vehicle_id == vehicle_id and c.source == source)
        self._replace({"$and": [{"vehicle_id": vehicle_id}, {"source": source}]}, [])
        return n

    def sync_manuals(self, manuals_dir: Path | None = None, force: bool = False) -> dict[str, int]:
        """Index every ``<vehicle_id>.json`` whose content hash differs from the stored one (or all
        with ``force``); drop manual chunks of vehicles whose file is gone. Returns
        ``{vehicle_id: chunks}`` for the manuals (re)indexed."""
        done: dict[str, int] = {}
        manuals_dir = Path(manuals_dir) if manuals_dir is not None else MANUALS_DIR
        with self._lock:
            files = sorted(Path(manuals_dir).glob("*.json")) if Path(manuals_dir).is_dir() else []
            present: set[str] = set()
            hashes: dict[str, str] = {}
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
                indexed = any(c.vehicle_id == vehicle_id and c.source == "manual" for c in self._chunks)
                if force or not indexed or self.store.get_meta(_HASH_KEY + vehicle_id) != digest:
                    done[vehicle_id] = self.index_manual(manual)
                    hashes[_HASH_KEY + vehicle_id] = digest
            stale = {c.vehicle_id for c in self._chunks if c.source == "manual"} - present
            for vehicle_id in stale:
                self._replace({"$and": [{"vehicle_id": vehicle_id}, {"source": "manual"}]}, [])
            if hashes or stale:
                self.store.set_meta(drop=tuple(_HASH_KEY + v for v in stale), **hashes)
        return done

    # --- queries -----------------------------------------------------------------------------
    def vehicles(self) -> list[str]:
        with self._lock:
            return sorted({c.vehicle_id for c in self._chunks})

    def __len__(self) -> int:
        return len(self._chunks)

    def search(self, query: str, vehicle_id: str | None = None, n_results: int = 5,
               mode: str = "hybrid") -> list[RetrievedChunk]:
        if mode not in ("hybrid", "bm25", "dense"):
            raise ValueError(f"unknown mode {mode!r} (expected hybrid, bm25 or dense)")
        if not query or not query.strip() or n_results <= 0:
            return []
        hits = self._search(query, vehicle_id, n_results, mode)
        if hits is None:  # the collection was re-opened during the query: answer from the new one
            hits = self._search(query, vehicle_id, n_results, mode)
        return hits or []

    def _search(self, query: str, vehicle_id: str | None, n_results: int, mode: str) -> list[RetrievedChunk] | None:
        """One search over the current in-memory copy; None when it turned out to be stale."""
        self.ensure_current()
        with self._lock:
            chunks, bm25, vehicle_of = self._chunks, self._bm25, self._vehicle_of
            position, generation = self._position, self._generation
        if not chunks:
            return []
        subset = np.flatnonzero(vehicle_of == vehicle_id) if vehicle_id else np.arange(len(chunks))
        if not subset.size:
            return []
        bm25_scores = coverage = cosines = None
        if mode in ("hybrid", "bm25"):
            tokens = bm25.query_tokens(query)
            bm25_scores = bm25.scores(tokens)[subset]
            coverage = bm25.coverage(tokens)[subset]
        if mode in ("hybrid", "dense"):
            cosines = np.full(subset.size, np.nan, dtype=np.float32)
            local = {int(g): i for i, g in enumerate(subset)}
            vector = self.embedder.query_vector(query)
            where = {"vehicle_id": vehicle_id} if vehicle_id else None
            nearest = self.store.query(vector, min(CANDIDATE_K, int(subset.size)), where)
            if getattr(self.store, "generation", 0) != generation:
                return None
            for chunk_id, cos in nearest:
                g = position.get(chunk_id)
                if g is not None and g in local:
                    cosines[local[g]] = cos
            if coverage is None:
                coverage = np.zeros(subset.size, dtype=np.float32)
        fused = fuse(bm25_scores=bm25_scores, coverage=coverage, cosines=cosines,
                     cosine_range=self.embedder.cosine_range, mode=mode, n_results=n_results,
                     rrf_k=RRF_K, candidate_k=CANDIDATE_K)
        out = []
        for f in fused:
            c = chunks[int(subset[f.index])]
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
