"""In-memory BM25 (``bm25s``) over Japanese tokens, with an IDF-weighted query-coverage signal.

The index is rebuilt from the chunks whenever they change (a few hundred chunks: milliseconds).
Besides the raw BM25 score, :meth:`BM25Index.coverage` gives, per document, the share of the
query's IDF mass whose terms occur in the document (0..1). Query terms the corpus never uses get
the largest IDF, so a query about something the corpus does not cover has coverage near 0; this
is the lexical half of the absolute evidence used by :mod:`core.rag.hybrid`.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

Tokenizer = Callable[[str], list[str]]


class BM25Index:
    def __init__(self, tokenizer: Tokenizer, k1: float = 1.2, b: float = 0.75):
        self.tokenizer = tokenizer
        self.k1 = k1
        self.b = b
        self._bm25 = None
        self._doc_terms: list[set[str]] = []
        self._df: dict[str, int] = {}
        self.size = 0

    def build(self, texts: Sequence[str]) -> None:
        import bm25s

        tokens = [self.tokenizer(t) for t in texts]
        self.size = len(tokens)
        self._doc_terms = [set(t) for t in tokens]
        self._df = {}
        for terms in self._doc_terms:
            for term in terms:
                self._df[term] = self._df.get(term, 0) + 1
        if not tokens:
            self._bm25 = None
            return
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        self._bm25.index(tokens, show_progress=False)

    def idf(self, term: str) -> float:
        df = self._df.get(term, 0)
        return math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))

    def query_tokens(self, query: str) -> list[str]:
        return self.tokenizer(query)

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        """Raw BM25 score of every document (0 where no query term occurs)."""
        if self._bm25 is None or not query_tokens:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(list(query_tokens)), dtype=np.float32)

    def coverage(self, query_tokens: list[str]) -> np.ndarray:
        """Per document: sum of IDF of the (distinct) query terms it contains / sum over all."""
        terms = sorted(set(query_tokens))
        out = np.zeros(self.size, dtype=np.float32)
        if not terms or not self.size:
            return out
        weights = {t: self.idf(t) for t in terms}
        total = sum(weights.values())
        if total <= 0:
            return out
        for i, doc_terms in enumerate(self._doc_terms):
            hit = sum(w for t, w in weights.items() if t in doc_terms)
            out[i] = hit / total
        return out
